package groupstate

import (
	"errors"
	"iter"
	"reflect"
	"sync"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/sdk/go/jsonobj"
)

// fastRow, fastState and fastOut have the typed layer's fast paths: UnmarshalJSON and
// AppendJSON. calls counts how often each ran, to prove they are used.
type fastRow struct{ V int64 }

type fastState struct{ Sum int64 }

type fastOut struct {
	Key []byte
	Sum int64
}

var calls struct{ row, stateDec, stateEnc, out int }

func (r *fastRow) UnmarshalJSON(b []byte) error {
	calls.row++
	return jsonobj.Each(b, func(name, value []byte) (err error) {
		if string(name) == "v" {
			r.V, err = jsonobj.Int(value)
		}
		return err
	})
}

func (s *fastState) UnmarshalJSON(b []byte) error {
	calls.stateDec++
	return jsonobj.Each(b, func(name, value []byte) (err error) {
		if string(name) == "sum" {
			s.Sum, err = jsonobj.Int(value)
		}
		return err
	})
}

func (s fastState) AppendJSON(dst []byte) ([]byte, error) {
	calls.stateEnc++
	w := jsonobj.NewWriter(dst)
	w.Int("sum", s.Sum)
	return w.End()
}

func (o *fastOut) AppendJSON(dst []byte) ([]byte, error) { // a pointer receiver works too
	calls.out++
	if o.Sum < 0 {
		return dst, errors.New("negative")
	}
	w := jsonobj.NewWriter(dst)
	w.Raw("key", o.Key)
	w.Int("sum", o.Sum)
	return w.End()
}

func fastSum(key Key, rows iter.Seq[fastRow], st *GroupState[fastState], out *Emitter[fastOut]) error {
	s, _ := st.GetOption()
	for r := range rows {
		s.Sum += r.V
	}
	out.Emit(fastOut{Key: key.JSON(), Sum: s.Sum})
	return st.Update(s)
}

// TestTypedFastPath shows that types with UnmarshalJSON and AppendJSON are decoded and encoded
// through them, with the same results and errors as encoding/json would give.
func TestTypedFastPath(t *testing.T) {
	calls = struct{ row, stateDec, stateEnc, out int }{}
	m := typedModule(t, abi.TimeoutNone, fastSum)
	res := parseResults(t, m.Process(processBuf(1, 0,
		group{key: `"a"`, state: []byte(`{"sum":10}`), rows: []string{`{"v":1}`, `{"v":2,"x":[1]}`}},
		group{key: `7`, rows: []string{`{"v":5}`}},
		group{key: `"bad"`, rows: []string{`{"v":1.5}`}},
		group{key: `"neg"`, rows: []string{`{"v":-1}`}},
	)))
	want := []result{
		{action: abi.ActionUpdate, state: `{"sum":13}`, emits: []string{`{"key":"a","sum":13}`}},
		{action: abi.ActionUpdate, state: `{"sum":5}`, emits: []string{`{"key":7,"sum":5}`}},
		// A failed group's emits are in the result buffer; the host discards them.
		{status: abi.StatusError, err: "row 0: jsonobj: want an integer, got 1.5", emits: []string{`{"key":"bad","sum":0}`}},
		{status: abi.StatusError, err: "emit: negative"},
	}
	for i := range want {
		if !reflect.DeepEqual(res[i], want[i]) {
			t.Errorf("group %d: got %+v, want %+v", i, res[i], want[i])
		}
	}
	if calls.row != 5 || calls.stateDec != 1 || calls.stateEnc != 4 || calls.out != 4 {
		t.Errorf("fast paths ran %+v times, want row 5, stateDec 1, stateEnc 4, out 4", calls)
	}
}

// TestTypedEmptyRowsNotDecoded shows that rows of an empty struct type are not decoded.
func TestTypedEmptyRowsNotDecoded(t *testing.T) {
	m := typedModule(t, abi.TimeoutNone, func(key Key, rows iter.Seq[struct{}], st *GroupState[int], out *Emitter[int]) error {
		n, _ := st.GetOption()
		for range rows {
			n++
		}
		return st.Update(n)
	})
	// The second row is not an object; only the host's validation would catch it, so skipping
	// decoding shows here as success.
	res := parseResults(t, m.Process(processBuf(1, 0, group{key: `"a"`, rows: []string{`{"v":1}`, `[1]`}})))
	if res[0].status != abi.StatusOK || res[0].state != "2" {
		t.Fatalf("got %+v", res[0])
	}
}

// TestTypedConcurrentModules runs one typed RawHandler on two modules at once (go test -race
// checks that the reused call handles are not shared).
func TestTypedConcurrentModules(t *testing.T) {
	h := Typed(func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[testState]) error {
		s, _ := st.GetOption()
		for r := range rows {
			s.Sum += r.V
		}
		out.Emit(s)
		return st.Update(s)
	})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := newTestModule(t, abi.TimeoutNone, 0, "{}", h)
			for i := range 200 {
				res := parseResults(t, m.Process(processBuf(1, 0, group{key: `"k"`, state: []byte(`{"sum":1}`), rows: []string{`{"v":2}`}})))
				if res[0].state != `{"sum":3}` || res[0].emits[0] != `{"sum":3}` {
					t.Errorf("worker %d call %d: %+v", w, i, res[0])
					return
				}
			}
		}()
	}
	wg.Wait()
}
