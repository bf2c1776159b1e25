package handler

import (
	"errors"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

func TestDecode(t *testing.T) {
	var w abi.ResultWriter
	w.Reset()
	w.BeginGroup()
	w.Emit([]byte("e1"))
	w.EndGroup(abi.GroupResult{Action: abi.ActionUpdate, Flags: abi.ResultTimeoutSet, TimeoutMs: 5, State: []byte("s")})
	w.BeginGroup()
	w.Emit([]byte("ignored"))
	w.EndGroup(abi.GroupResult{Status: abi.StatusError, Action: abi.ActionUpdate, State: []byte("ignored")})
	w.BeginGroup()
	w.EndGroup(abi.GroupResult{Action: abi.ActionKeep, TimeoutMs: 77}) // no flag: no timeout
	buf := w.Bytes()

	res := make([]Result, 3)
	if err := Decode(buf, res); err != nil {
		t.Fatal(err)
	}
	if r := res[0]; r.Err != nil || string(r.State) != "s" || !r.TimeoutSet || r.TimeoutMs != 5 || len(r.Emits) != 1 || string(r.Emits[0]) != "e1" {
		t.Fatalf("result 0: %+v", r)
	}
	var ge *GroupError
	if r := res[1]; !errors.As(r.Err, &ge) || r.State != nil || r.Emits != nil {
		t.Fatalf("result 1: a failed group must carry only its error: %+v", r)
	}
	if r := res[2]; r.Err != nil || r.TimeoutSet || r.TimeoutMs != abi.NoTimeout || r.Action != abi.ActionKeep {
		t.Fatalf("result 2: %+v", r)
	}
	// Results are copies: scribbling over the buffer changes nothing.
	for i := range buf {
		buf[i] = 0xff
	}
	if string(res[0].State) != "s" || string(res[0].Emits[0]) != "e1" {
		t.Fatal("results alias the guest buffer")
	}
	if err := Decode(w.Bytes(), make([]Result, 2)); !errors.Is(err, abi.ErrMalformed) {
		t.Fatalf("count mismatch: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	var w abi.ResultWriter
	w.Reset()
	w.BeginGroup()
	w.Emit([]byte("x"))
	w.EndGroup(abi.GroupResult{Action: abi.ActionUpdate, State: []byte("s")})
	f.Add(w.Bytes(), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		_ = Decode(b, make([]Result, n))
	})
}
