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

// op is a DecodedOp with its elements, for comparisons.
type op struct {
	op        abi.Op
	v         uint32
	value     string
	mapKey    string
	cursor    uint64
	mapCursor string
	maxBytes  uint32
	ts        int64
	n         uint32
	elems     []string
}

func (o op) String() string { return fmt.Sprintf("%s%+v", o.op, struct{ op }{o}) }

func toOp(d *abi.DecodedOp) op {
	o := op{op: d.Op, v: d.Var, value: string(d.Value), mapKey: string(d.MapKey), cursor: d.Cursor, mapCursor: string(d.MapCursor), maxBytes: d.MaxBytes, ts: d.Ts, n: d.N}
	for e := range d.Elements() {
		o.elems = append(o.elems, string(e))
	}
	if len(o.elems) != int(d.Count) {
		panic("Count disagrees with Elements")
	}
	return o
}

func equalOp(a, b op) bool {
	return a.op == b.op && a.v == b.v && a.value == b.value && a.mapKey == b.mapKey && a.cursor == b.cursor &&
		a.mapCursor == b.mapCursor && a.maxBytes == b.maxBytes && a.ts == b.ts && a.n == b.n && slices.Equal(a.elems, b.elems)
}

// readOps decodes a whole op list.
func readOps(b []byte) ([]op, error) {
	or := abi.NewOpReader(b)
	var d abi.DecodedOp
	var out []op
	for {
		ok, err := or.Next(&d)
		if !ok {
			return out, err
		}
		out = append(out, toOp(&d))
	}
}

// opCases has every op, written with OpWriter, and what decoding it gives.
var opCases = []struct {
	write func(w *abi.OpWriter)
	want  op
}{
	{func(w *abi.OpWriter) { w.ValueGet(0) }, op{op: abi.OpValueGet}},
	{func(w *abi.OpWriter) { w.ValueSet(255, []byte(`{"n":1}`)) }, op{op: abi.OpValueSet, v: 255, value: `{"n":1}`}},
	{func(w *abi.OpWriter) { w.ValueSet(1, nil) }, op{op: abi.OpValueSet, v: 1}},
	{func(w *abi.OpWriter) { w.ValueClear(2) }, op{op: abi.OpValueClear, v: 2}},
	{func(w *abi.OpWriter) { w.ListRead(3, 1<<63+5, 4096) }, op{op: abi.OpListRead, v: 3, cursor: 1<<63 + 5, maxBytes: 4096}},
	{func(w *abi.OpWriter) { w.ListAppend(4, []byte("a"), nil, []byte("ccc")) }, op{op: abi.OpListAppend, v: 4, elems: []string{"a", "", "ccc"}}},
	{func(w *abi.OpWriter) { w.ListAppend(4) }, op{op: abi.OpListAppend, v: 4}},
	{func(w *abi.OpWriter) { w.ListPut(5, []byte("x")) }, op{op: abi.OpListPut, v: 5, elems: []string{"x"}}},
	{func(w *abi.OpWriter) { w.ListClear(6) }, op{op: abi.OpListClear, v: 6}},
	{func(w *abi.OpWriter) { w.ListExists(7) }, op{op: abi.OpListExists, v: 7}},
	{func(w *abi.OpWriter) { w.ListDropFirst(7, 3) }, op{op: abi.OpListDropFirst, v: 7, n: 3}},
	{func(w *abi.OpWriter) { w.ListDropFirst(0, 1<<32-1) }, op{op: abi.OpListDropFirst, n: 1<<32 - 1}},
	{func(w *abi.OpWriter) { w.MapGet(8, []byte("k")) }, op{op: abi.OpMapGet, v: 8, mapKey: "k"}},
	{func(w *abi.OpWriter) { w.MapContains(9, nil) }, op{op: abi.OpMapContains, v: 9}},
	{func(w *abi.OpWriter) { w.MapSet(10, []byte("k"), []byte("v")) }, op{op: abi.OpMapSet, v: 10, mapKey: "k", value: "v"}},
	{func(w *abi.OpWriter) { w.MapRemove(11, []byte("gone")) }, op{op: abi.OpMapRemove, v: 11, mapKey: "gone"}},
	{func(w *abi.OpWriter) { w.MapRead(12, []byte("opaque"), 0) }, op{op: abi.OpMapRead, v: 12, mapCursor: "opaque"}},
	{func(w *abi.OpWriter) { w.MapRead(12, nil, 1<<32-1) }, op{op: abi.OpMapRead, v: 12, maxBytes: 1<<32 - 1}},
	{func(w *abi.OpWriter) { w.MapClear(13) }, op{op: abi.OpMapClear, v: 13}},
	{func(w *abi.OpWriter) { w.MapExists(14) }, op{op: abi.OpMapExists, v: 14}},
	{func(w *abi.OpWriter) { w.TimerRegister(-1) }, op{op: abi.OpTimerRegister, ts: -1}},
	{func(w *abi.OpWriter) { w.TimerDelete(1 << 62) }, op{op: abi.OpTimerDelete, ts: 1 << 62}},
	{func(w *abi.OpWriter) { w.TimerList() }, op{op: abi.OpTimerList}},
}

// allOps returns an op list of every case, and the offsets where each op starts and ends.
func allOps() ([]byte, []int) {
	var w abi.OpWriter
	bounds := []int{0}
	for _, tc := range opCases {
		tc.write(&w)
		bounds = append(bounds, w.Len())
	}
	return w.Bytes(), bounds
}

func TestOpNames(t *testing.T) {
	names := map[abi.Op]string{}
	for _, tc := range opCases {
		names[tc.want.op] = ""
	}
	if len(names) != 19 {
		t.Fatalf("the cases cover %d ops, want all 19", len(names))
	}
	for o := range 256 {
		op := abi.Op(o)
		_, known := names[op]
		if op.Valid() != known {
			t.Errorf("%#x: Valid() = %v", o, op.Valid())
		}
		if !known {
			if op.String() != "unknown" || op.IsRead() || op.VarKind() != 0 {
				t.Errorf("%#x: %q read %v kind %v", o, op, op.IsRead(), op.VarKind())
			}
		}
	}
	for _, tc := range []struct {
		op   abi.Op
		name string
		kind abi.VarKind
		read bool
	}{
		{abi.OpValueGet, "VALUE_GET", abi.VarValue, true},
		{abi.OpValueSet, "VALUE_SET", abi.VarValue, false},
		{abi.OpValueClear, "VALUE_CLEAR", abi.VarValue, false},
		{abi.OpListRead, "LIST_READ", abi.VarList, true},
		{abi.OpListAppend, "LIST_APPEND", abi.VarList, false},
		{abi.OpListPut, "LIST_PUT", abi.VarList, false},
		{abi.OpListClear, "LIST_CLEAR", abi.VarList, false},
		{abi.OpListExists, "LIST_EXISTS", abi.VarList, true},
		{abi.OpListDropFirst, "LIST_DROP_FIRST", abi.VarList, false},
		{abi.OpMapGet, "MAP_GET", abi.VarMap, true},
		{abi.OpMapContains, "MAP_CONTAINS", abi.VarMap, true},
		{abi.OpMapSet, "MAP_SET", abi.VarMap, false},
		{abi.OpMapRemove, "MAP_REMOVE", abi.VarMap, false},
		{abi.OpMapRead, "MAP_READ", abi.VarMap, true},
		{abi.OpMapClear, "MAP_CLEAR", abi.VarMap, false},
		{abi.OpMapExists, "MAP_EXISTS", abi.VarMap, true},
		{abi.OpTimerRegister, "TIMER_REGISTER", 0, false},
		{abi.OpTimerDelete, "TIMER_DELETE", 0, false},
		{abi.OpTimerList, "TIMER_LIST", 0, true},
	} {
		if tc.op.String() != tc.name || tc.op.VarKind() != tc.kind || tc.op.IsRead() != tc.read {
			t.Errorf("%#x: %q kind %v read %v, want %q %v %v", uint8(tc.op), tc.op, tc.op.VarKind(), tc.op.IsRead(), tc.name, tc.kind, tc.read)
		}
	}
}

func TestOpRoundTrip(t *testing.T) {
	for _, tc := range opCases {
		t.Run(tc.want.op.String(), func(t *testing.T) {
			var w abi.OpWriter
			tc.write(&w)
			got, err := readOps(w.Bytes())
			if err != nil || len(got) != 1 || !equalOp(got[0], tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
			// Append encodes a decoded op back to the same bytes.
			var d abi.DecodedOp
			if ok, err := abi.NewOpReader(w.Bytes()).Next(&d); !ok || err != nil {
				t.Fatal(ok, err)
			}
			var again abi.OpWriter
			again.Append(&d)
			if !bytes.Equal(again.Bytes(), w.Bytes()) {
				t.Fatalf("Append: % x, want % x", again.Bytes(), w.Bytes())
			}
		})
	}

	b, bounds := allOps()
	got, err := readOps(b)
	if err != nil || len(got) != len(opCases) {
		t.Fatalf("all ops: %d ops, %v", len(got), err)
	}
	for i, tc := range opCases {
		if !equalOp(got[i], tc.want) {
			t.Fatalf("op %d: %v, want %v", i, got[i], tc.want)
		}
	}
	// A prefix that ends between two ops is a shorter op list; any other is malformed.
	for i := range b {
		got, err := readOps(b[:i])
		if n, boundary := slices.BinarySearch(bounds, i); boundary {
			if err != nil || len(got) != n {
				t.Fatalf("prefix %d (%d ops): %d ops, %v", i, n, len(got), err)
			}
		} else if !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("truncated at %d: err = %v", i, err)
		}
	}
}

// TestOpLayout pins the byte layout of abi/README.md section 9.4.
func TestOpLayout(t *testing.T) {
	var w abi.OpWriter
	w.ValueSet(3, []byte("ab"))
	w.ListRead(1, 2, 100)
	w.ListAppend(2, []byte("x"), []byte("yz"))
	w.ListDropFirst(5, 258)
	w.MapRead(4, nil, 7)
	w.TimerRegister(1000)
	w.TimerList()
	want := []byte{
		0x02, 3, 0, 0, 0, 2, 0, 0, 0, 'a', 'b', // VALUE_SET var 3 "ab"
		0x10, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, // LIST_READ var 1 cursor 2 max_bytes 100
		0x11, 2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 'x', 2, 0, 0, 0, 'y', 'z', // LIST_APPEND var 2, 2 elements
		0x15, 5, 0, 0, 0, 2, 1, 0, 0, // LIST_DROP_FIRST var 5 n 258
		0x24, 4, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, // MAP_READ var 4 cursor "" max_bytes 7
		0x30, 0xe8, 3, 0, 0, 0, 0, 0, 0, // TIMER_REGISTER 1000
		0x32, // TIMER_LIST
	}
	if !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("got % x\nwant % x", w.Bytes(), want)
	}
	w.Reset()
	if w.Len() != 0 {
		t.Fatal("Reset left bytes")
	}
}

func TestOpReaderMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"op 0", []byte{0}, "op 0: unknown op code 0x0"},
		{"op 4", []byte{0x32, 0x04}, "op 1: unknown op code 0x4"},
		{"op 0xff", []byte{0xff}, "unknown op code 0xff"},
		{"var 256", []byte{0x01, 0, 1, 0, 0}, "VALUE_GET: variable index 256 is not below 256"},
		{"var 2^32-1", []byte{0x25, 0xff, 0xff, 0xff, 0xff}, "MAP_CLEAR: variable index 4294967295"},
		{"truncated var", []byte{0x13, 0, 0}, "LIST_CLEAR: truncated variable index"},
		{"truncated value", []byte{0x02, 0, 0, 0, 0, 5, 0, 0, 0, 'a'}, "VALUE_SET: truncated operands"},
		{"absurd element count", []byte{0x12, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, "LIST_PUT: 4294967295 elements cannot fit"},
		{"element beyond the list", []byte{0x11, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1}, "LIST_APPEND: truncated operands"},
		{"absurd key length", []byte{0x20, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, "MAP_GET: truncated operands"},
		{"truncated ts", []byte{0x31, 1, 2, 3, 4, 5, 6, 7}, "TIMER_DELETE: truncated operands"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			or := abi.NewOpReader(tc.b)
			var d abi.DecodedOp
			var err error
			for ok := true; ok && err == nil; ok, err = or.Next(&d) {
			}
			if !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if ok, err2 := or.Next(&d); ok || err2 != err {
				t.Fatalf("after the error: %v %v", ok, err2)
			}
		})
	}
}

func TestValidateWriteOps(t *testing.T) {
	var w abi.OpWriter
	w.ValueSet(0, []byte("1"))
	w.ListAppend(1, []byte("a"))
	w.MapSet(2, []byte("k"), []byte("v"))
	w.TimerRegister(5)
	if err := abi.ValidateWriteOps(w.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := abi.ValidateWriteOps(nil); err != nil {
		t.Fatal(err)
	}
	w.MapGet(2, []byte("k"))
	if err := abi.ValidateWriteOps(w.Bytes()); !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), "op 4: read op MAP_GET") {
		t.Fatalf("read op: err = %v", err)
	}
	if err := abi.ValidateWriteOps([]byte{0x02, 0}); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("truncated: err = %v", err)
	}
}

func TestOpReaderNoAlloc(t *testing.T) {
	b, _ := allOps()
	var or abi.OpReader
	var d abi.DecodedOp
	n := testing.AllocsPerRun(100, func() {
		or.Reset(b)
		for {
			ok, err := or.Next(&d)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			c := d.ElementCursor()
			for _, ok := c.Next(); ok; _, ok = c.Next() {
			}
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per op list", n)
	}
}

func ExampleOpWriter() {
	const count, events = 0, 1 // variable indexes: positions in the declarations
	var w abi.OpWriter
	w.ValueSet(count, []byte("3"))
	w.ListAppend(events, []byte(`{"e":1}`), []byte(`{"e":2}`))
	w.TimerRegister(60_000)
	fmt.Printf("% x\n", w.Bytes())
	// Output:
	// 02 00 00 00 00 01 00 00 00 33 11 01 00 00 00 02 00 00 00 07 00 00 00 7b 22 65 22 3a 31 7d 07 00 00 00 7b 22 65 22 3a 32 7d 30 60 ea 00 00 00 00 00 00
}

func ExampleOpReader() {
	var w abi.OpWriter
	w.MapSet(2, []byte("alice"), []byte("1"))
	w.ListAppend(1, []byte("a"), []byte("b"))
	w.MapGet(2, []byte("bob"))

	// The host side: decode each op, refuse one of the wrong kind.
	decls := []abi.VarDecl{{Name: "n", Kind: abi.VarValue}, {Name: "l", Kind: abi.VarList}, {Name: "m", Kind: abi.VarMap}}
	or := abi.NewOpReader(w.Bytes())
	var op abi.DecodedOp
	for {
		ok, err := or.Next(&op)
		if err != nil {
			panic(err)
		}
		if !ok {
			break
		}
		if op.Var >= uint32(len(decls)) || decls[op.Var].Kind != op.Op.VarKind() {
			panic("wrong kind")
		}
		switch op.Op {
		case abi.OpMapSet:
			fmt.Printf("%s %s[%s] = %s\n", op.Op, decls[op.Var].Name, op.MapKey, op.Value)
		case abi.OpListAppend:
			for e := range op.Elements() {
				fmt.Printf("%s %s += %s\n", op.Op, decls[op.Var].Name, e)
			}
		default:
			fmt.Printf("%s %s[%s] (read: %v)\n", op.Op, decls[op.Var].Name, op.MapKey, op.Op.IsRead())
		}
	}
	// Output:
	// MAP_SET m[alice] = 1
	// LIST_APPEND l += a
	// LIST_APPEND l += b
	// MAP_GET m[bob] (read: true)
}

// FuzzOpReader: whatever op list a module sends, decoding never panics, fails only with
// ErrMalformed, and what it accepts encodes back to the same bytes.
func FuzzOpReader(f *testing.F) {
	b, _ := allOps()
	f.Add(b)
	for _, tc := range opCases {
		var w abi.OpWriter
		tc.write(&w)
		f.Add(w.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		or := abi.NewOpReader(b)
		var d abi.DecodedOp
		var w abi.OpWriter
		for {
			ok, err := or.Next(&d)
			if err != nil {
				if !errors.Is(err, abi.ErrMalformed) {
					t.Fatalf("error does not wrap ErrMalformed: %v", err)
				}
				return
			}
			if !ok {
				break
			}
			if !d.Op.Valid() || (d.Op.VarKind() != 0 && d.Var >= abi.MaxVars) {
				t.Fatalf("accepted %+v", d)
			}
			for range d.Elements() {
			}
			w.Append(&d)
		}
		if !bytes.Equal(w.Bytes(), b) {
			t.Fatalf("re-encoded % x, read % x", w.Bytes(), b)
		}
		if err := abi.ValidateWriteOps(b); err != nil && !errors.Is(err, abi.ErrMalformed) {
			t.Fatal(err)
		}
	})
}
