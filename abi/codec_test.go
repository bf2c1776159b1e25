package abi_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

func TestInitRoundTrip(t *testing.T) {
	in := abi.Init{ABIVersion: abi.Version, Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark, Name: []byte("sessions"), Config: []byte(`{"gap":"5s"}`)}
	b := abi.AppendInit(nil, in)
	got, err := abi.ParseInit(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ABIVersion != in.ABIVersion || got.Mode != in.Mode || got.Flags != in.Flags || string(got.Name) != "sessions" || string(got.Config) != `{"gap":"5s"}` {
		t.Fatalf("got %+v", got)
	}
	for i := range b {
		if _, err := abi.ParseInit(b[:i]); !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("truncated at %d: err = %v", i, err)
		}
	}
	if _, err := abi.ParseInit(append(b, 0)); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("trailing byte: err = %v", err)
	}
}

// TestInitLayout pins the byte layout of abi/README.md.
func TestInitLayout(t *testing.T) {
	b := abi.AppendInit(nil, abi.Init{ABIVersion: 1, Mode: abi.TimeoutProcessingTime, Flags: 0, Name: []byte("ab"), Config: []byte("{}")})
	want := []byte{1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 'a', 'b', 2, 0, 0, 0, '{', '}'}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x\nwant % x", b, want)
	}
}

func TestProcessRoundTrip(t *testing.T) {
	b := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 2, ProcessingTimeMs: 1500, WatermarkMs: -1})
	rowsA := [][]byte{[]byte(`{"a":1}`), []byte(`{"a":2}`)}
	b = abi.AppendGroup(b, abi.GroupStateExists, []byte(`"a"`), []byte(`{"n":1}`), rowsA)
	b = abi.AppendGroup(b, abi.GroupTimedOut, []byte(`7`), nil, nil)
	if len(b) != abi.ProcessHeaderSize+abi.GroupSize([]byte(`"a"`), []byte(`{"n":1}`), rowsA)+abi.GroupSize([]byte(`7`), nil, nil) {
		t.Fatal("GroupSize disagrees with AppendGroup")
	}
	ir, err := abi.NewInputReader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h := ir.Header(); h.GroupCount != 2 || h.ProcessingTimeMs != 1500 || h.WatermarkMs != -1 {
		t.Fatalf("header %+v", h)
	}
	var g abi.Group
	ok, err := ir.Next(&g)
	if !ok || err != nil || string(g.Key) != `"a"` || string(g.State) != `{"n":1}` || g.Flags != abi.GroupStateExists {
		t.Fatalf("group 0: %v %v %+v", ok, err, g)
	}
	var rows []string
	for r := range g.Rows() {
		rows = append(rows, string(r))
	}
	if !slices.Equal(rows, []string{`{"a":1}`, `{"a":2}`}) {
		t.Fatalf("rows %v", rows)
	}
	ok, err = ir.Next(&g)
	if !ok || err != nil || string(g.Key) != `7` || g.RowCount != 0 || g.Flags != abi.GroupTimedOut {
		t.Fatalf("group 1: %v %v %+v", ok, err, g)
	}
	if ok, err = ir.Next(&g); ok || err != nil {
		t.Fatalf("end: %v %v", ok, err)
	}
}

func TestResultRoundTrip(t *testing.T) {
	var w abi.ResultWriter
	w.Reset()
	w.BeginGroup()
	w.Emit([]byte(`{"out":1}`))
	w.Emit([]byte(`{"out":2}`))
	w.EndGroup(abi.GroupResult{Status: abi.StatusOK, Action: abi.ActionUpdate, Flags: abi.ResultTimeoutSet, TimeoutMs: 99, State: []byte(`{"n":2}`)})
	w.BeginGroup()
	w.EndGroup(abi.GroupResult{Status: abi.StatusError, Error: []byte("boom")})
	buf := w.Bytes()

	rr, err := abi.NewResultReader(buf)
	if err != nil || rr.Count() != 2 {
		t.Fatalf("%v, count %d", err, rr.Count())
	}
	var g abi.GroupResult
	if ok, err := rr.Next(&g); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var emits []string
	for e := range g.Emits() {
		emits = append(emits, string(e))
	}
	if g.Action != abi.ActionUpdate || g.TimeoutMs != 99 || string(g.State) != `{"n":2}` || !slices.Equal(emits, []string{`{"out":1}`, `{"out":2}`}) {
		t.Fatalf("group 0: %+v %v", g, emits)
	}
	if ok, err := rr.Next(&g); !ok || err != nil || g.Status != abi.StatusError || string(g.Error) != "boom" || g.EmitCount != 0 {
		t.Fatalf("group 1: %v %v %+v", ok, err, g)
	}
	if ok, err := rr.Next(&g); ok || err != nil {
		t.Fatalf("end: %v %v", ok, err)
	}

	// Every truncation is malformed, never a panic.
	for i := range buf {
		rr, err := abi.NewResultReader(buf[:i])
		for err == nil {
			var ok bool
			if ok, err = rr.Next(&g); !ok && err == nil {
				t.Fatalf("truncated at %d read as complete", i)
			}
		}
		if !errors.Is(err, abi.ErrMalformed) {
			t.Fatalf("truncated at %d: %v", i, err)
		}
	}
}

func TestCallError(t *testing.T) {
	_, err := abi.NewResultReader(abi.AppendCallError(nil, "bad input"))
	var ce *abi.CallError
	if !errors.As(err, &ce) || ce.Message != "bad input" {
		t.Fatalf("err = %v", err)
	}
}

func TestResultOutOfRange(t *testing.T) {
	var w abi.ResultWriter
	w.Reset()
	w.BeginGroup()
	w.EndGroup(abi.GroupResult{Action: 7})
	rr, err := abi.NewResultReader(w.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var g abi.GroupResult
	if _, err := rr.Next(&g); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("action 7: err = %v", err)
	}
}

// FuzzResultReader: whatever a hostile module returns, reading it never panics and never
// reads out of bounds.
func FuzzResultReader(f *testing.F) {
	var w abi.ResultWriter
	w.Reset()
	w.BeginGroup()
	w.Emit([]byte("x"))
	w.EndGroup(abi.GroupResult{Action: abi.ActionUpdate, State: []byte("s")})
	f.Add(w.Bytes())
	f.Add(abi.AppendCallError(nil, "m"))
	f.Add([]byte{0, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		rr, err := abi.NewResultReader(b)
		if err != nil {
			return
		}
		var g abi.GroupResult
		for range rr.Count() {
			ok, err := rr.Next(&g)
			if !ok || err != nil {
				return
			}
			for range g.Emits() {
			}
		}
	})
}

// FuzzInputReader: the guest side reads process buffers the same way.
func FuzzInputReader(f *testing.F) {
	b := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 1})
	f.Add(abi.AppendGroup(b, 0, []byte(`"k"`), nil, [][]byte{[]byte("{}")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		ir, err := abi.NewInputReader(b)
		if err != nil {
			return
		}
		var g abi.Group
		for {
			ok, err := ir.Next(&g)
			if !ok || err != nil {
				return
			}
			for range g.Rows() {
			}
		}
	})
}
