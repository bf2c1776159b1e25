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

type resultV2 struct {
	status abi.Status
	err    string
	ops    string
	emits  []string
}

func readResultV2(b []byte) ([]resultV2, error) {
	rr, err := abi.NewResultReaderV2(b)
	if err != nil {
		return nil, err
	}
	var out []resultV2
	var g abi.GroupResultV2
	for {
		ok, err := rr.Next(&g)
		if !ok {
			return out, err
		}
		d := resultV2{status: g.Status, err: string(g.Error), ops: string(g.Ops)}
		for e := range g.Emits() {
			d.emits = append(d.emits, string(e))
		}
		if len(d.emits) != int(g.EmitCount) {
			panic("EmitCount disagrees with Emits")
		}
		out = append(out, d)
	}
}

// validResultV2 returns a result buffer with an OK group that emits and writes, a failed group
// and an empty group, and what reading it gives.
func validResultV2() ([]byte, []resultV2) {
	var ops abi.OpWriter
	ops.ValueSet(0, []byte("2"))
	ops.MapRemove(1, []byte("k"))
	ops.TimerDelete(77)
	var w abi.ResultWriterV2
	w.Reset()
	w.BeginGroup()
	w.Emit([]byte(`{"out":1}`))
	w.Emit(nil)
	w.EndGroup(abi.GroupResultV2{Status: abi.StatusOK, Ops: ops.Bytes()})
	w.BeginGroup()
	w.Emit([]byte(`{"ignored":true}`))
	w.EndGroup(abi.GroupResultV2{Status: abi.StatusError, Error: []byte("boom")})
	w.BeginGroup()
	w.EndGroup(abi.GroupResultV2{})
	return w.Bytes(), []resultV2{
		{status: abi.StatusOK, ops: string(ops.Bytes()), emits: []string{`{"out":1}`, ``}},
		{status: abi.StatusError, err: "boom", emits: []string{`{"ignored":true}`}},
		{status: abi.StatusOK},
	}
}

func TestResultV2RoundTrip(t *testing.T) {
	b, want := validResultV2()
	got, err := readResultV2(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.status != w.status || g.err != w.err || g.ops != w.ops || !slices.Equal(g.emits, w.emits) {
			t.Fatalf("group %d: %+v, want %+v", i, g, w)
		}
	}
	for i := range b {
		if _, err := readResultV2(b[:i]); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("truncated at %d: err = %v", i, err)
		}
	}
	if _, err := readResultV2(append(slices.Clip(b), 0)); !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), "trailing bytes after 3 groups") {
		t.Fatalf("trailing byte: err = %v", err)
	}
}

// TestResultV2Layout pins the byte layout of abi/README.md section 9.6.
func TestResultV2Layout(t *testing.T) {
	var w abi.ResultWriterV2
	w.BeginGroup()
	w.Emit([]byte("e"))
	w.EndGroup(abi.GroupResultV2{Ops: []byte{0x03, 1, 0, 0, 0}})
	w.BeginGroup()
	w.EndGroup(abi.GroupResultV2{Status: abi.StatusError, Error: []byte("x")})
	want := []byte{
		0, 0, 0, 0, 2, 0, 0, 0, // status 0, group_count 2
		1, 0, 0, 0, 1, 0, 0, 0, 'e', // emits: 1, "e"
		0, 0, 0, 0, // status 0
		0, 0, 0, 0, // error: 0
		5, 0, 0, 0, 0x03, 1, 0, 0, 0, // ops: VALUE_CLEAR var 1
		0, 0, 0, 0, // emits: 0
		1, 0, 0, 0, // status 1
		1, 0, 0, 0, 'x', // error: "x"
		0, 0, 0, 0, // ops: none
	}
	if got := w.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("got % x\nwant % x", got, want)
	}
	var empty abi.ResultWriterV2
	if got := empty.Bytes(); !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 0, 0, 0}) {
		t.Fatalf("no groups: % x", got)
	}
}

func TestResultV2Malformed(t *testing.T) {
	group := func(status abi.Status, ops []byte) []byte {
		var w abi.ResultWriterV2
		w.BeginGroup()
		w.EndGroup(abi.GroupResultV2{Status: status, Ops: ops})
		return w.Bytes()
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short header", []byte{0, 0, 0, 0, 1}, "shorter than its header"},
		{"header status 2", []byte{2, 0, 0, 0, 0, 0, 0, 0}, "status 2 (want 0 or 1)"},
		{"call error with trailing bytes", append(abi.AppendCallError(nil, "m"), 0), "whole-call error truncated or followed by trailing bytes"},
		{"group status 2", group(2, nil), "group 0: status 2 (want 0 or 1)"},
		{"read op", group(abi.StatusOK, []byte{0x32}), "group 0: ops: op 0: read op TIMER_LIST in an op list of writes"},
		{"read op in a failed group", group(abi.StatusError, []byte{0x01, 0, 0, 0, 0}), "read op VALUE_GET"},
		{"unknown op", group(abi.StatusOK, []byte{0x40}), "ops: op 0: unknown op code 0x40"},
		{"truncated op", group(abi.StatusOK, []byte{0x30, 1}), "ops: op 0: TIMER_REGISTER: truncated operands"},
		{"absurd emit count", []byte{0, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, "group 0: emits truncated"},
		{"group count beyond the buffer", []byte{0, 0, 0, 0, 1, 0, 0, 0}, "group 0: emits truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readResultV2(tc.b)
			if !errors.Is(err, abi.ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestResultV2CallError(t *testing.T) {
	_, err := abi.NewResultReaderV2(abi.AppendCallError(nil, "bad input"))
	var ce *abi.CallError
	if !errors.As(err, &ce) || ce.Message != "bad input" {
		t.Fatalf("err = %v", err)
	}
}

func TestResultReaderV2NoAlloc(t *testing.T) {
	// Many groups, so nothing per group (like its index in a message) allocates.
	var w abi.ResultWriterV2
	var ops abi.OpWriter
	ops.MapSet(1, []byte("k"), []byte("v"))
	for range 300 {
		w.BeginGroup()
		w.Emit([]byte("{}"))
		w.EndGroup(abi.GroupResultV2{Ops: ops.Bytes()})
	}
	b := w.Bytes()
	var rr abi.ResultReaderV2
	var g abi.GroupResultV2
	n := testing.AllocsPerRun(100, func() {
		if err := rr.Reset(b); err != nil {
			t.Fatal(err)
		}
		for {
			ok, err := rr.Next(&g)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per buffer", n)
	}
}

func ExampleResultWriterV2() {
	// The guest: one group emits a row and leaves two writes for the host.
	var ops abi.OpWriter
	ops.ValueSet(0, []byte(`{"n":2}`))
	ops.TimerRegister(11000)
	var w abi.ResultWriterV2
	w.Reset()
	w.BeginGroup()
	w.Emit([]byte(`{"n":2}`))
	w.EndGroup(abi.GroupResultV2{Status: abi.StatusOK, Ops: ops.Bytes()})

	// The host.
	rr, err := abi.NewResultReaderV2(w.Bytes())
	if err != nil {
		panic(err)
	}
	var g abi.GroupResultV2
	for {
		ok, err := rr.Next(&g)
		if err != nil {
			panic(err)
		}
		if !ok {
			break
		}
		for e := range g.Emits() {
			fmt.Printf("emit %s\n", e)
		}
		or := abi.NewOpReader(g.Ops)
		var op abi.DecodedOp
		for ok, _ := or.Next(&op); ok; ok, _ = or.Next(&op) {
			fmt.Println(op.Op, op.Var, string(op.Value), op.Ts)
		}
	}
	// Output:
	// emit {"n":2}
	// VALUE_SET 0 {"n":2} 0
	// TIMER_REGISTER 0  11000
}

// FuzzResultReaderV2: whatever a module returns from gs_process, reading it never panics,
// fails only with ErrMalformed (or a CallError), and accepts only write ops.
func FuzzResultReaderV2(f *testing.F) {
	b, _ := validResultV2()
	f.Add(b)
	f.Add(abi.AppendCallError(nil, "m"))
	f.Add([]byte{0, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		rr, err := abi.NewResultReaderV2(b)
		if err != nil {
			var ce *abi.CallError
			if !errors.Is(err, abi.ErrMalformed) && !errors.As(err, &ce) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		var g abi.GroupResultV2
		for {
			ok, err := rr.Next(&g)
			if err != nil && !errors.Is(err, abi.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			if !ok {
				return
			}
			for range g.Emits() {
			}
			or := abi.NewOpReader(g.Ops)
			var op abi.DecodedOp
			for {
				ok, err := or.Next(&op)
				if err != nil {
					t.Fatalf("accepted an op list that does not decode: %v", err)
				}
				if !ok {
					break
				}
				if op.Op.IsRead() {
					t.Fatalf("accepted read op %s", op.Op)
				}
			}
		}
	})
}

// TestResultV2ReadmeExample pins the example of abi/README.md section 9.6.
func TestResultV2ReadmeExample(t *testing.T) {
	var ops abi.OpWriter
	ops.TimerRegister(60000)
	var w abi.ResultWriterV2
	w.BeginGroup()
	w.EndGroup(abi.GroupResultV2{Ops: ops.Bytes()})
	want := "00 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 09 00 00 00 30 60 ea 00 00 00 00 00 00"
	if got := fmt.Sprintf("% x", w.Bytes()); got != want || len(w.Bytes()) != 33 {
		t.Fatalf("got %s", got)
	}
}
