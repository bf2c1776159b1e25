package handler

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
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

// TestDecodeSharedMemory: the results of one call share their backing memory, which must not
// let one result's slices reach into another's, nor a later call's results into an earlier's;
// and a call allocates the same whatever its number of groups.
func TestDecodeSharedMemory(t *testing.T) {
	build := func(n int, tag string) []byte {
		var w abi.ResultWriter
		w.Reset()
		for i := range n {
			w.BeginGroup()
			w.Emit([]byte(tag + "e" + string(rune('a'+i%26))))
			if tag != "x" {
				w.Emit([]byte(tag + "f"))
			}
			w.EndGroup(abi.GroupResult{Action: abi.ActionUpdate, State: []byte(tag + "s")})
		}
		return w.Bytes()
	}
	buf := build(2, "1")
	first := make([]Result, 2)
	if err := Decode(buf, first); err != nil {
		t.Fatal(err)
	}
	_ = append(first[0].State, "XX"...)
	_ = append(first[0].Emits[1], "XX"...)
	_ = append(first[0].Emits, []byte("XX"))
	if string(first[1].State) != "1s" || len(first[1].Emits) != 2 || string(first[1].Emits[0]) != "1eb" {
		t.Fatalf("appending to result 0 changed result 1: %q %q", first[1].State, first[1].Emits)
	}
	copy(buf, build(2, "2"))
	second := make([]Result, 2)
	if err := Decode(buf, second); err != nil {
		t.Fatal(err)
	}
	if string(second[0].State) != "2s" || string(first[0].State) != "1s" || string(first[0].Emits[0]) != "1ea" || string(first[0].Emits[1]) != "1f" {
		t.Fatalf("a later call changed an earlier call's results: %q %q", first[0].State, first[0].Emits)
	}
	// An update to an empty value still has a (non-nil) value.
	var w abi.ResultWriter
	w.Reset()
	w.BeginGroup()
	w.EndGroup(abi.GroupResult{Action: abi.ActionUpdate, State: []byte{}})
	empty := make([]Result, 1)
	if err := Decode(w.Bytes(), empty); err != nil || empty[0].State == nil || len(empty[0].State) != 0 {
		t.Fatalf("empty update: %v %#v", err, empty[0].State)
	}

	allocs := func(n int) float64 { // one emit per group
		buf, res := build(n, "x"), make([]Result, n)
		return testing.AllocsPerRun(20, func() {
			if err := Decode(buf, res); err != nil {
				t.Fatal(err)
			}
		})
	}
	if a, b := allocs(4), allocs(400); a != b || b > 4 {
		t.Fatalf("Decode allocates %v times for 4 groups and %v for 400; want a constant, at most 4", a, b)
	}
}

// BenchmarkDecode decodes a result buffer of 4096 groups shaped like logincount's (a small
// state update, one emitted row and a timeout each).
func BenchmarkDecode(b *testing.B) {
	const n = 4096
	var w abi.ResultWriter
	w.Reset()
	for i := range n {
		w.BeginGroup()
		w.Emit(fmt.Appendf(nil, `{"user_id":"user-%06d","total_logins":42}`, i))
		w.EndGroup(abi.GroupResult{Action: abi.ActionUpdate, Flags: abi.ResultTimeoutSet, TimeoutMs: 11000, State: []byte(`{"login_count":42}`)})
	}
	buf, res := w.Bytes(), make([]Result, n)
	b.ReportAllocs()
	for b.Loop() {
		if err := Decode(buf, res); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/group")
}

// TestEncodeV2Inputs: with inputs, DATA rows carry their input indexes (abi/README.md 9.3a)
// and the sizes agree; without, Inputs is ignored. TIMERS and INITIAL groups are the same
// either way.
func TestEncodeV2Inputs(t *testing.T) {
	rows := [][]byte{[]byte(`{"ts":5}`), []byte(`{"ts":3}`)}
	data := &CallV2{ProcessingTimeMs: 1000, Groups: []GroupV2{{Kind: abi.GroupData, Key: []byte(`"a"`), Rows: rows, Inputs: []uint32{1, 0}}}}
	hdr := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 1, ProcessingTimeMs: 1000})
	for _, tc := range []struct {
		name   string
		call   *CallV2
		inputs bool
		want   []byte
	}{
		{"data with inputs", data, true, abi.AppendDataGroupInputs(slices.Clip(hdr), []byte(`"a"`), rows, []uint32{1, 0})},
		{"data without inputs", data, false, abi.AppendDataGroup(slices.Clip(hdr), []byte(`"a"`), rows)},
		{"nil inputs", &CallV2{ProcessingTimeMs: 1000, Groups: []GroupV2{{Kind: abi.GroupData, Key: []byte(`"a"`), Rows: rows}}}, true,
			abi.AppendDataGroupInputs(slices.Clip(hdr), []byte(`"a"`), rows, []uint32{0, 0})},
		{"timers", &CallV2{ProcessingTimeMs: 1000, Groups: []GroupV2{{Kind: abi.GroupTimers, Key: []byte(`"a"`), Timers: []int64{7}}}}, true,
			abi.AppendTimersGroup(slices.Clip(hdr), []byte(`"a"`), []int64{7})},
		{"initial", &CallV2{ProcessingTimeMs: 1000, Groups: []GroupV2{{Kind: abi.GroupInitial, Key: []byte(`"a"`), Initial: []byte(`{}`)}}}, true,
			abi.AppendInitialGroup(slices.Clip(hdr), []byte(`"a"`), []byte(`{}`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeV2(nil, tc.call, tc.inputs)
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("got % x\nwant % x", got, tc.want)
			}
			if n := EncodedSizeV2(tc.call, tc.inputs); n != len(got) {
				t.Fatalf("EncodedSizeV2 %d, encoded %d", n, len(got))
			}
		})
	}
}
