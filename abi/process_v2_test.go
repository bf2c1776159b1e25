package abi_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

// groupV2 is a decoded GroupV2 with its rows and timers, for comparisons.
type groupV2 struct {
	kind    abi.GroupKind
	key     string
	rows    []string
	inputs  []uint32 // the rows' input indexes, when read with an input count
	timers  []int64
	initial string
}

// readInputV2 reads every group of a v2 process buffer, checking that the iterators and the
// cursor agree.
func readInputV2(t testing.TB, b []byte) (abi.ProcessHeader, []groupV2, error) {
	return readInputV2Inputs(t, b, 0)
}

// readInputV2Inputs is readInputV2 with the reader's input count set to n (see
// InputReaderV2.SetInputCount); with n > 0 it records the rows' input indexes.
func readInputV2Inputs(t testing.TB, b []byte, n uint32) (abi.ProcessHeader, []groupV2, error) {
	var ir abi.InputReaderV2
	ir.SetInputCount(n)
	if err := ir.Reset(b); err != nil {
		return abi.ProcessHeader{}, nil, err
	}
	var out []groupV2
	var g abi.GroupV2
	for {
		ok, err := ir.Next(&g)
		if err != nil || !ok {
			return ir.Header(), out, err
		}
		d := groupV2{kind: g.Kind, key: string(g.Key), initial: string(g.Initial)}
		for r := range g.Rows() {
			d.rows = append(d.rows, string(r))
		}
		c := g.Cursor()
		i := 0
		for r, ok := c.Next(); ok; r, ok = c.Next() {
			if string(r) != d.rows[i] {
				t.Fatalf("cursor row %d = %q, Rows gave %q", i, r, d.rows[i])
			}
			if c.Input() >= max(n, 1) {
				t.Fatalf("cursor row %d: input %d of %d", i, c.Input(), n)
			}
			if n > 0 {
				d.inputs = append(d.inputs, c.Input())
			}
			i++
		}
		i = 0
		for in, r := range g.InputRows() {
			if string(r) != d.rows[i] || (n > 0 && in != d.inputs[i]) || (n == 0 && in != 0) {
				t.Fatalf("InputRows row %d = %d %q, the cursor gave %v %q", i, in, r, d.inputs, d.rows[i])
			}
			i++
		}
		if i != len(d.rows) {
			t.Fatalf("InputRows gave %d rows, Rows %d", i, len(d.rows))
		}
		for ts := range g.Timers() {
			d.timers = append(d.timers, ts)
		}
		for i, ts := range d.timers {
			if g.Timer(i) != ts {
				t.Fatalf("Timer(%d) = %d, Timers gave %d", i, g.Timer(i), ts)
			}
		}
		n := len(d.rows) + len(d.timers)
		if g.Count != uint32(n) || (g.Kind == abi.GroupInitial) != (n == 0) {
			t.Fatalf("group %+v: Count %d", d, g.Count)
		}
		out = append(out, d)
	}
}

func TestGroupKindString(t *testing.T) {
	for k, want := range map[abi.GroupKind]string{abi.GroupData: "DATA", abi.GroupTimers: "TIMERS", abi.GroupInitial: "INITIAL", 3: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("GroupKind(%d) = %q, want %q", uint32(k), got, want)
		}
	}
}

// validInputsV2 returns one valid buffer of each kind, and what reading it gives.
func validInputsV2() map[string]struct {
	buf    []byte
	groups []groupV2
} {
	h := abi.ProcessHeader{GroupCount: 2, ProcessingTimeMs: 1000, WatermarkMs: -5}
	data := abi.AppendProcessHeader(nil, h)
	data = abi.AppendDataGroup(data, []byte(`"a"`), [][]byte{[]byte(`{"k":"a"}`), []byte(`{}`)})
	data = abi.AppendDataGroup(data, []byte(`7`), [][]byte{{}})
	timers := abi.AppendProcessHeader(nil, h)
	timers = abi.AppendTimersGroup(timers, []byte(`"a"`), []int64{-3, 0, 1000})
	timers = abi.AppendTimersGroup(timers, []byte(`"b"`), []int64{42})
	initial := abi.AppendProcessHeader(nil, h)
	initial = abi.AppendInitialGroup(initial, []byte(`"a"`), []byte(`{"count":3}`))
	initial = abi.AppendInitialGroup(initial, []byte(`"b"`), nil)
	return map[string]struct {
		buf    []byte
		groups []groupV2
	}{
		"data": {data, []groupV2{
			{kind: abi.GroupData, key: `"a"`, rows: []string{`{"k":"a"}`, `{}`}},
			{kind: abi.GroupData, key: `7`, rows: []string{``}},
		}},
		"timers": {timers, []groupV2{
			{kind: abi.GroupTimers, key: `"a"`, timers: []int64{-3, 0, 1000}},
			{kind: abi.GroupTimers, key: `"b"`, timers: []int64{42}},
		}},
		"initial": {initial, []groupV2{
			{kind: abi.GroupInitial, key: `"a"`, initial: `{"count":3}`},
			{kind: abi.GroupInitial, key: `"b"`},
		}},
	}
}

func TestInputV2RoundTrip(t *testing.T) {
	for name, tc := range validInputsV2() {
		t.Run(name, func(t *testing.T) {
			h, groups, err := readInputV2(t, tc.buf)
			if err != nil {
				t.Fatal(err)
			}
			if h != (abi.ProcessHeader{GroupCount: 2, ProcessingTimeMs: 1000, WatermarkMs: -5}) {
				t.Fatalf("header %+v", h)
			}
			if len(groups) != len(tc.groups) {
				t.Fatalf("got %d groups", len(groups))
			}
			for i := range groups {
				g, w := groups[i], tc.groups[i]
				if g.kind != w.kind || g.key != w.key || g.initial != w.initial || !slices.Equal(g.rows, w.rows) || !slices.Equal(g.timers, w.timers) {
					t.Fatalf("group %d: %+v, want %+v", i, g, w)
				}
			}
			// Every truncation, and a trailing byte, is malformed, never a panic.
			for i := range tc.buf {
				if _, _, err := readInputV2(t, tc.buf[:i]); !errors.Is(err, abi.ErrMalformed) {
					t.Fatalf("truncated at %d: err = %v", i, err)
				}
			}
			if _, _, err := readInputV2(t, append(slices.Clip(tc.buf), 0)); !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), "trailing bytes") {
				t.Fatalf("trailing byte: err = %v", err)
			}
		})
	}
}

func TestGroupV2Sizes(t *testing.T) {
	key, rows, initial := []byte(`"k"`), [][]byte{[]byte("ab"), nil, []byte("{}")}, []byte(`{"v":1}`)
	if got := len(abi.AppendDataGroup(nil, key, rows)); got != abi.DataGroupSize(key, rows) {
		t.Errorf("DataGroupSize %d, appended %d", abi.DataGroupSize(key, rows), got)
	}
	if got := len(abi.AppendTimersGroup(nil, key, []int64{1, 2})); got != abi.TimersGroupSize(key, 2) {
		t.Errorf("TimersGroupSize %d, appended %d", abi.TimersGroupSize(key, 2), got)
	}
	if got := len(abi.AppendInitialGroup(nil, key, initial)); got != abi.InitialGroupSize(key, initial) {
		t.Errorf("InitialGroupSize %d, appended %d", abi.InitialGroupSize(key, initial), got)
	}
}

// TestInputV2Layout pins the byte layout of abi/README.md section 9.3.
func TestInputV2Layout(t *testing.T) {
	hdr := []byte{1, 0, 0, 0, 0xe8, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	h := abi.ProcessHeader{GroupCount: 1, ProcessingTimeMs: 1000}
	for _, tc := range []struct {
		got, want []byte
	}{
		{abi.AppendDataGroup(abi.AppendProcessHeader(nil, h), []byte(`7`), [][]byte{[]byte("{}")}),
			[]byte{0, 0, 0, 0, 1, 0, 0, 0, '7', 1, 0, 0, 0, 2, 0, 0, 0, '{', '}'}},
		{abi.AppendTimersGroup(abi.AppendProcessHeader(nil, h), []byte(`7`), []int64{1000}),
			[]byte{1, 0, 0, 0, 1, 0, 0, 0, '7', 1, 0, 0, 0, 0xe8, 3, 0, 0, 0, 0, 0, 0}},
		{abi.AppendInitialGroup(abi.AppendProcessHeader(nil, h), []byte(`7`), []byte("{}")),
			[]byte{2, 0, 0, 0, 1, 0, 0, 0, '7', 2, 0, 0, 0, '{', '}'}},
	} {
		if want := append(slices.Clip(hdr), tc.want...); !bytes.Equal(tc.got, want) {
			t.Errorf("got % x\nwant % x", tc.got, want)
		}
	}
}

func TestInputV2Malformed(t *testing.T) {
	hdr := func(n uint32) []byte { return abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: n}) }
	u32 := func(b []byte, v uint32) []byte { return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	for _, tc := range []struct {
		name string
		buf  []byte
		want string
	}{
		{"short header", hdr(0)[:19], "shorter than its header"},
		{"unknown kind", u32(append(hdr(1), 3, 0, 0, 0), 0), "group 0: unknown kind 3"},
		{"data without rows", abi.AppendDataGroup(hdr(1), []byte("1"), nil), "DATA group without rows"},
		{"timers without timers", abi.AppendTimersGroup(hdr(1), []byte("1"), nil), "TIMERS group without timers"},
		{"timers descending", abi.AppendTimersGroup(hdr(1), []byte("1"), []int64{5, 4}), "not in strictly ascending order at timer 1"},
		{"timers repeated", abi.AppendTimersGroup(hdr(1), []byte("1"), []int64{1, 2, 2}), "at timer 2"},
		{"mixed kinds", abi.AppendTimersGroup(abi.AppendDataGroup(hdr(2), []byte("1"), [][]byte{nil}), []byte("2"), []int64{1}), "group 1: kind TIMERS after DATA groups"},
		{"absurd data count", u32(append(hdr(1), 0, 0, 0, 0, 0, 0, 0, 0), 0xffffffff), "rows truncated"},
		{"absurd timer count", u32(append(hdr(1), 1, 0, 0, 0, 0, 0, 0, 0), 0xffffffff), "timers truncated"},
		{"absurd key length", u32(append(hdr(1), 2, 0, 0, 0), 0xfffffff0), "truncated kind or key"},
		{"group count beyond the buffer", abi.AppendInitialGroup(hdr(2), []byte("1"), nil), "group 1: truncated"},
		{"trailing group", abi.AppendInitialGroup(abi.AppendInitialGroup(hdr(1), []byte("1"), nil), []byte("2"), nil), "trailing bytes after 1 groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readInputV2(t, tc.buf)
			if !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestInputReaderV2Sticky: after an error, Next keeps returning it.
func TestInputReaderV2Sticky(t *testing.T) {
	b := abi.AppendTimersGroup(abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 2}), []byte("1"), []int64{2, 1})
	ir, err := abi.NewInputReaderV2(b)
	if err != nil {
		t.Fatal(err)
	}
	var g abi.GroupV2
	_, err1 := ir.Next(&g)
	ok, err2 := ir.Next(&g)
	if err1 == nil || ok || err2 != err1 {
		t.Fatalf("%v, then %v %v", err1, ok, err2)
	}
}

func TestInputReaderV2NoAlloc(t *testing.T) {
	b := validInputsV2()["data"].buf
	var ir abi.InputReaderV2
	var g abi.GroupV2
	n := testing.AllocsPerRun(100, func() {
		if err := ir.Reset(b); err != nil {
			t.Fatal(err)
		}
		for {
			ok, err := ir.Next(&g)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			c := g.Cursor()
			for _, ok := c.Next(); ok; _, ok = c.Next() {
			}
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per buffer", n)
	}
}

func ExampleInputReaderV2() {
	b := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 2, ProcessingTimeMs: 5000})
	b = abi.AppendTimersGroup(b, []byte(`"a"`), []int64{1000, 2000})
	b = abi.AppendTimersGroup(b, []byte(`"b"`), []int64{4000})

	ir, err := abi.NewInputReaderV2(b)
	if err != nil {
		panic(err)
	}
	var g abi.GroupV2
	for {
		ok, err := ir.Next(&g)
		if err != nil {
			panic(err)
		}
		if !ok {
			break
		}
		for ts := range g.Timers() {
			fmt.Println(g.Kind, string(g.Key), ts)
		}
	}
	// Output:
	// TIMERS "a" 1000
	// TIMERS "a" 2000
	// TIMERS "b" 4000
}

// FuzzInputReaderV2: the guest reads whatever process buffer it is given without panicking,
// with or without input indexes (inputs, the init's input count, 0 for none), and what it
// accepts encodes back to the same bytes.
func FuzzInputReaderV2(f *testing.F) {
	for _, tc := range validInputsV2() {
		f.Add(tc.buf, uint8(0))
	}
	withIndexes, _ := validInputsWithIndexes()
	f.Add(withIndexes, uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, inputs uint8) {
		n := uint32(inputs % (abi.MaxInputs + 2))
		h, groups, err := readInputV2Inputs(t, b, n)
		if err != nil {
			if !errors.Is(err, abi.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		again := abi.AppendProcessHeader(nil, h)
		for _, g := range groups {
			switch g.kind {
			case abi.GroupData:
				rows := make([][]byte, len(g.rows))
				for i, r := range g.rows {
					rows[i] = []byte(r)
				}
				if n > 0 {
					again = abi.AppendDataGroupInputs(again, []byte(g.key), rows, g.inputs)
				} else {
					again = abi.AppendDataGroup(again, []byte(g.key), rows)
				}
			case abi.GroupTimers:
				again = abi.AppendTimersGroup(again, []byte(g.key), g.timers)
			case abi.GroupInitial:
				again = abi.AppendInitialGroup(again, []byte(g.key), []byte(g.initial))
			}
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded % x, read % x", again, b)
		}
	})
}
