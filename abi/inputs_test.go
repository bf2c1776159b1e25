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

// names returns the names as byte strings.
func names(s ...string) [][]byte {
	b := make([][]byte, len(s))
	for i, n := range s {
		b[i] = []byte(n)
	}
	return b
}

func TestInitInputsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   abi.Init
	}{
		{"two", abi.Init{ABIVersion: abi.Version2, Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark | abi.InitHasInputs, Name: []byte("adjoin"), Config: []byte(`{"within":"1h"}`), Inputs: names("impressions", "clicks")}},
		{"one", abi.Init{ABIVersion: abi.Version2, Flags: abi.InitHasInputs, Name: []byte("x"), Config: []byte(`{}`), Inputs: names("a")}},
		{"sixteen, the longest name", abi.Init{ABIVersion: abi.Version2, Flags: abi.InitHasInputs, Name: []byte("x"), Config: []byte(`{}`),
			Inputs: names("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", strings.Repeat("p-_9", 8))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := abi.AppendInit(nil, tc.in)
			got, err := abi.ParseInit(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.ABIVersion != tc.in.ABIVersion || got.Mode != tc.in.Mode || got.Flags != tc.in.Flags || !bytes.Equal(got.Name, tc.in.Name) ||
				!bytes.Equal(got.Config, tc.in.Config) || !slices.EqualFunc(got.Inputs, tc.in.Inputs, bytes.Equal) {
				t.Fatalf("got %+v", got)
			}
			for i := range b {
				if _, err := abi.ParseInit(b[:i]); !errors.Is(err, abi.ErrMalformed) {
					t.Fatalf("truncated at %d: err = %v", i, err)
				}
			}
			if _, err := abi.ParseInit(append(slices.Clip(b), 0)); !errors.Is(err, abi.ErrMalformed) {
				t.Fatalf("trailing byte: err = %v", err)
			}
		})
	}
}

// TestInitWithoutInputsUnchanged: without the flag the init buffer is the version 1 layout,
// whatever Inputs holds, and ParseInit reads it as before (no Inputs).
func TestInitWithoutInputsUnchanged(t *testing.T) {
	in := abi.Init{ABIVersion: abi.Version, Mode: abi.TimeoutProcessingTime, Name: []byte("ab"), Config: []byte("{}"), Inputs: names("a", "b")}
	b := abi.AppendInit(nil, in)
	want := []byte{1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 'a', 'b', 2, 0, 0, 0, '{', '}'}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x\nwant % x", b, want)
	}
	got, err := abi.ParseInit(b)
	if err != nil || got.Inputs != nil || got.Flags != 0 {
		t.Fatalf("got %+v, %v", got, err)
	}
	// A v1 buffer with the reserved bits other than HAS_INPUTS set still parses.
	b[8] = 0x1d
	if got, err := abi.ParseInit(b); err != nil || got.Flags != 0x1d || got.Inputs != nil {
		t.Fatalf("reserved bits: got %+v, %v", got, err)
	}
}

func TestInitInputsMalformed(t *testing.T) {
	head := func() []byte {
		return abi.AppendInit(nil, abi.Init{ABIVersion: 2, Name: []byte("x"), Config: []byte("{}")})
	}
	// withTail is head with the flag set and tail appended.
	withTail := func(tail ...[]byte) []byte {
		b := head()
		b[8] = byte(abi.InitHasInputs)
		for _, t := range tail {
			b = append(b, t...)
		}
		return b
	}
	u32 := func(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }
	str := func(s string) []byte { return append(u32(uint32(len(s))), s...) }
	for _, tc := range []struct {
		name string
		buf  []byte
		want string
	}{
		{"no tail", withTail(), "HAS_INPUTS without input_count"},
		{"zero inputs", withTail(u32(0)), "input_count 0 (want 1 to 16)"},
		{"seventeen inputs", withTail(u32(17)), "input_count 17"},
		{"absurd count", withTail(u32(0xffffffff)), "input_count 4294967295"},
		{"missing name", withTail(u32(2), str("a")), "input 1: name truncated"},
		{"empty name", withTail(u32(1), str("")), `input 0: name "" is empty`},
		{"long name", withTail(u32(1), str(strings.Repeat("a", 33))), "longer than 32 bytes"},
		{"digit first", withTail(u32(1), str("1a")), "does not start with a letter"},
		{"upper case", withTail(u32(1), str("aB")), "at offset 1"},
		{"dot", withTail(u32(1), str("a.b")), "at offset 1"},
		{"twice", withTail(u32(2), str("a"), str("a")), `input 1: name "a" already used by input 0`},
		{"trailing", withTail(u32(1), str("a"), []byte{0}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := abi.ParseInit(tc.buf)
			if !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestValidateInputName(t *testing.T) {
	for name, ok := range map[string]bool{
		"impressions": true, "a": true, "a-b_c9": true, strings.Repeat("x", 32): true,
		"": false, "9a": false, "_a": false, "-a": false, "Ab": false, "a b": false, "a.b": false, strings.Repeat("x", 33): false, "é": false,
	} {
		if err := abi.ValidateInputName(name); (err == nil) != ok {
			t.Errorf("ValidateInputName(%q) = %v", name, err)
		}
	}
}

// TestInitInputsReadmeExample pins the init buffer example of abi/README.md section 9.3a.
func TestInitInputsReadmeExample(t *testing.T) {
	b := abi.AppendInit(nil, abi.Init{ABIVersion: abi.Version2, Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark | abi.InitHasInputs,
		Name: []byte("adjoin"), Config: []byte("{}"), Inputs: names("impressions", "clicks")})
	want := "02 00 00 00 02 00 00 00 03 00 00 00 06 00 00 00 61 64 6a 6f 69 6e 02 00 00 00 7b 7d " +
		"02 00 00 00 0b 00 00 00 69 6d 70 72 65 73 73 69 6f 6e 73 06 00 00 00 63 6c 69 63 6b 73"
	if got := fmt.Sprintf("% x", b); got != want || len(b) != 57 {
		t.Fatalf("got %s (%d bytes)", got, len(b))
	}
}

// TestDataGroupInputsReadmeExample pins the process buffer example of abi/README.md section
// 9.3a, and reads it back.
func TestDataGroupInputsReadmeExample(t *testing.T) {
	b := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 1, ProcessingTimeMs: 1000})
	b = abi.AppendDataGroupInputs(b, []byte(`"a"`), names(`{"ts":5}`, `{"ts":3}`), []uint32{1, 0})
	want := "01 00 00 00 e8 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00 " +
		"00 00 00 00 03 00 00 00 22 61 22 02 00 00 00 " +
		"01 00 00 00 08 00 00 00 7b 22 74 73 22 3a 35 7d 00 00 00 00 08 00 00 00 7b 22 74 73 22 3a 33 7d"
	if got := fmt.Sprintf("% x", b); got != want || len(b) != 67 {
		t.Fatalf("got %s (%d bytes)", got, len(b))
	}
	_, groups, err := readInputV2Inputs(t, b, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || !slices.Equal(groups[0].rows, []string{`{"ts":5}`, `{"ts":3}`}) || !slices.Equal(groups[0].inputs, []uint32{1, 0}) {
		t.Fatalf("read %+v", groups)
	}
}

func TestDataGroupInputsSize(t *testing.T) {
	key, rows := []byte(`"k"`), names("ab", "", "{}")
	if got := len(abi.AppendDataGroupInputs(nil, key, rows, []uint32{0, 1, 2})); got != abi.DataGroupInputsSize(key, rows) {
		t.Errorf("DataGroupInputsSize %d, appended %d", abi.DataGroupInputsSize(key, rows), got)
	}
	// Missing indexes are written as 0.
	if a, b := abi.AppendDataGroupInputs(nil, key, rows, nil), abi.AppendDataGroupInputs(nil, key, rows, []uint32{0, 0, 0}); !bytes.Equal(a, b) {
		t.Errorf("nil inputs: % x, want % x", a, b)
	}
}

// validInputsWithIndexes returns a buffer of DATA groups with input indexes (for an init with
// 3 inputs), and what reading it gives.
func validInputsWithIndexes() ([]byte, []groupV2) {
	b := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 2, ProcessingTimeMs: 1000, WatermarkMs: 7})
	b = abi.AppendDataGroupInputs(b, []byte(`"a"`), names(`{"k":"a"}`, `{}`, `{"x":1}`), []uint32{2, 0, 2})
	b = abi.AppendDataGroupInputs(b, []byte(`7`), names(``), []uint32{1})
	return b, []groupV2{
		{kind: abi.GroupData, key: `"a"`, rows: []string{`{"k":"a"}`, `{}`, `{"x":1}`}, inputs: []uint32{2, 0, 2}},
		{kind: abi.GroupData, key: `7`, rows: []string{``}, inputs: []uint32{1}},
	}
}

func TestInputV2WithIndexes(t *testing.T) {
	b, want := validInputsWithIndexes()
	_, groups, err := readInputV2Inputs(t, b, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != len(want) {
		t.Fatalf("got %d groups", len(groups))
	}
	for i := range groups {
		if g, w := groups[i], want[i]; g.key != w.key || !slices.Equal(g.rows, w.rows) || !slices.Equal(g.inputs, w.inputs) {
			t.Fatalf("group %d: %+v, want %+v", i, g, w)
		}
	}
	for i := range b {
		if _, _, err := readInputV2Inputs(t, b[:i], 3); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("truncated at %d: err = %v", i, err)
		}
	}
	// An index at or above the init's input count is malformed.
	if _, _, err := readInputV2Inputs(t, b, 2); !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), "group 0: row 0: input index 2, the init has 2 inputs") {
		t.Fatalf("index 2 of 2 inputs: err = %v", err)
	}
	// Read without input indexes, the same bytes are other rows (here: malformed).
	if _, _, err := readInputV2Inputs(t, b, 0); err == nil {
		t.Fatal("read without input indexes: no error")
	}
	// TIMERS and INITIAL groups are unchanged by the input count.
	for name, tc := range validInputsV2() {
		if name == "data" {
			continue
		}
		if _, groups, err := readInputV2Inputs(t, tc.buf, 3); err != nil || len(groups) != len(tc.groups) {
			t.Fatalf("%s with 3 inputs: %d groups, %v", name, len(groups), err)
		}
	}
}

// TestInputReaderV2InputCountKept: the input count holds across Reset, and a group read
// without indexes reports input 0 for every row.
func TestInputReaderV2InputCountKept(t *testing.T) {
	b, _ := validInputsWithIndexes()
	var ir abi.InputReaderV2
	ir.SetInputCount(3)
	for range 2 {
		if err := ir.Reset(b); err != nil {
			t.Fatal(err)
		}
		var g abi.GroupV2
		if ok, err := ir.Next(&g); !ok || err != nil || ir.InputCount() != 3 {
			t.Fatalf("%v %v, count %d", ok, err, ir.InputCount())
		}
	}
	plain := validInputsV2()["data"].buf
	ir.SetInputCount(0)
	if err := ir.Reset(plain); err != nil {
		t.Fatal(err)
	}
	var g abi.GroupV2
	if ok, err := ir.Next(&g); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for in := range g.InputRows() {
		if in != 0 {
			t.Fatalf("input %d without indexes", in)
		}
	}
}

func TestInputReaderV2WithIndexesNoAlloc(t *testing.T) {
	b, _ := validInputsWithIndexes()
	var ir abi.InputReaderV2
	ir.SetInputCount(3)
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
				_ = c.Input()
			}
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per buffer", n)
	}
}

func ExampleAppendDataGroupInputs() {
	// The init said HAS_INPUTS with the inputs impressions (0) and clicks (1).
	inputs := []string{"impressions", "clicks"}
	b := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 1, ProcessingTimeMs: 1000})
	b = abi.AppendDataGroupInputs(b, []byte(`"ad1"`), [][]byte{[]byte(`{"ts":5}`), []byte(`{"ts":3}`)}, []uint32{1, 0})

	var ir abi.InputReaderV2
	ir.SetInputCount(uint32(len(inputs)))
	if err := ir.Reset(b); err != nil {
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
		for in, row := range g.InputRows() {
			fmt.Println(string(g.Key), inputs[in], string(row))
		}
	}
	// Output:
	// "ad1" clicks {"ts":5}
	// "ad1" impressions {"ts":3}
}

// FuzzParseInit: a guest reads whatever init buffer it is given without panicking, and what it
// accepts encodes back to the same bytes.
func FuzzParseInit(f *testing.F) {
	f.Add(abi.AppendInit(nil, abi.Init{ABIVersion: 1, Mode: abi.TimeoutProcessingTime, Name: []byte("demo"), Config: []byte(`{"ttl":"10s"}`)}))
	f.Add(abi.AppendInit(nil, abi.Init{ABIVersion: 2, Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark | abi.InitHasInputs,
		Name: []byte("adjoin"), Config: []byte("{}"), Inputs: names("impressions", "clicks")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := abi.ParseInit(b)
		if err != nil {
			if !errors.Is(err, abi.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if (in.Flags&abi.InitHasInputs != 0) != (in.Inputs != nil) {
			t.Fatalf("flags %#x with %d inputs", in.Flags, len(in.Inputs))
		}
		for _, n := range in.Inputs {
			if err := abi.ValidateInputName(string(n)); err != nil {
				t.Fatal(err)
			}
		}
		if again := abi.AppendInit(nil, in); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded % x, read % x", again, b)
		}
	})
}
