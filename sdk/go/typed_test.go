package groupstate

import (
	"errors"
	"iter"
	"reflect"
	"testing"
	"time"

	"github.com/groupstate/groupstate/abi"
)

type testRow struct {
	V int `json:"v"`
}

type testState struct {
	Sum int `json:"sum"`
}

// typedModule returns an initialized module running the typed handler h.
func typedModule[R, S, O any](t testing.TB, mode abi.TimeoutMode, h func(Key, iter.Seq[R], *GroupState[S], *Emitter[O]) error) *Module {
	t.Helper()
	m := NewModule()
	HandleTyped(m, h)
	requireInitOK(t, m.Init(initBuf(mode, abi.InitHasWatermark, "{}")))
	return m
}

// TestTyped covers the typed layer: row decoding, JSON state, emits, and their failures.
func TestTyped(t *testing.T) {
	sum := func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[map[string]any]) error {
		s, _ := st.GetOption()
		for r := range rows {
			s.Sum += r.V
			out.Emit(map[string]any{"key": key.String(), "v": r.V})
		}
		return st.Update(s)
	}
	tests := []struct {
		name  string
		h     func(Key, iter.Seq[testRow], *GroupState[testState], *Emitter[map[string]any]) error
		state []byte
		rows  []string
		want  result
	}{
		{"emit order and state", sum, []byte(`{"sum":10}`), []string{`{"v":1}`, `{"v":2}`, `{"v":3,"x":"<&>"}`},
			result{action: abi.ActionUpdate, state: `{"sum":16}`,
				emits: []string{`{"key":"k","v":1}`, `{"key":"k","v":2}`, `{"key":"k","v":3}`}}},
		{"new state", sum, nil, []string{`{"v":4}`},
			result{action: abi.ActionUpdate, state: `{"sum":4}`, emits: []string{`{"key":"k","v":4}`}}},
		{"row decode error", sum, nil, []string{`{"v":1}`, `{"v":"x"}`, `{"v":3}`},
			result{status: abi.StatusError, err: `row 1: json: cannot unmarshal string into Go struct field testRow.v of type int`}},
		{"invalid JSON row", sum, nil, []string{`{`},
			result{status: abi.StatusError, err: `row 0: unexpected end of JSON input`}},
		{"bad stored state", sum, []byte(`[]`), []string{`{"v":1}`},
			result{status: abi.StatusError, err: `groupstate: decoding state: json: cannot unmarshal array into Go value of type groupstate.testState`}},
		{"get errors", func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[map[string]any]) error {
			_, err := st.Get()
			return check(errors.Is(err, ErrNoState) && !st.Exists(), "ErrNoState")
		}, nil, nil, result{}},
		{"get cached after update", func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[map[string]any]) error {
			err := st.Update(testState{Sum: 7})
			v, gerr := st.Get()
			return errors.Join(err, gerr, check(v.Sum == 7 && st.Exists(), "cached"))
		}, []byte(`{"sum":1}`), nil, result{action: abi.ActionUpdate, state: `{"sum":7}`}},
		{"remove then get", func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[map[string]any]) error {
			st.Remove()
			_, err := st.Get()
			_, ok := st.GetOption()
			return check(err == ErrNoState && !ok, "removed")
		}, []byte(`{"sum":1}`), nil, result{action: abi.ActionRemove}},
		{"emit failure", func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[map[string]any]) error {
			out.Emit(map[string]any{"f": func() {}})
			return nil
		}, nil, nil, result{status: abi.StatusError, err: `emit: json: unsupported type: func()`}},
		{"emit without HTML escaping", func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[map[string]any]) error {
			out.Emit(map[string]any{"s": "<a&b>"})
			return nil
		}, nil, nil, result{emits: []string{`{"s":"<a&b>"}`}}},
		{"early break", func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[map[string]any]) error {
			for r := range rows {
				out.Emit(map[string]any{"v": r.V})
				break
			}
			return nil
		}, nil, []string{`{"v":1}`, `bad`}, result{emits: []string{`{"v":1}`}}},
		{"timeouts through the typed handle", func(key Key, rows iter.Seq[testRow], st *GroupState[testState], out *Emitter[map[string]any]) error {
			w, err := st.CurrentWatermarkMs()
			return errors.Join(err, check(st.SetTimeoutDuration(time.Second) == ErrDurationNotAllowed, "duration"),
				st.SetTimeoutTimestamp(w+st.CurrentProcessingTimeMs()), check(!st.HasTimedOut(), "timedOut"))
		}, nil, nil, result{timeout: true, timeoutMs: 5 + 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := typedModule(t, abi.TimeoutEventTime, tc.h)
			res := parseResults(t, m.Process(processBuf(100, 5, group{key: `"k"`, state: tc.state, rows: tc.rows})))
			if tc.want.status == abi.StatusError {
				res[0].emits = nil // the host discards the emits of a failed group
			}
			if !reflect.DeepEqual(res[0], tc.want) {
				t.Fatalf("got  %+v\nwant %+v", res[0], tc.want)
			}
		})
	}
}

// TestTypedNullState checks that values encoding to null cannot be stored.
func TestTypedNullState(t *testing.T) {
	var errs []error
	m := typedModule(t, abi.TimeoutNone, func(key Key, rows iter.Seq[struct{}], st *GroupState[*testState], out *Emitter[int]) error {
		errs = append(errs, st.Update(nil))
		return nil
	})
	m2 := typedModule(t, abi.TimeoutNone, func(key Key, rows iter.Seq[struct{}], st *GroupState[map[string]int], out *Emitter[int]) error {
		errs = append(errs, st.Update(nil), st.Update(map[string]int{}))
		return nil
	})
	r1 := parseResults(t, m.Process(processBuf(1, 0, group{key: `"k"`, state: []byte(`{"sum":1}`)})))
	r2 := parseResults(t, m2.Process(processBuf(1, 0, group{key: `"k"`})))
	if errs[0] != ErrNullState || errs[1] != ErrNullState || errs[2] != nil {
		t.Fatalf("errors %v", errs)
	}
	if r1[0].action != abi.ActionKeep || r2[0].action != abi.ActionUpdate || r2[0].state != `{}` {
		t.Fatalf("results %+v %+v", r1, r2)
	}
}

// TestTypedRowCount: RowCount is the number of rows of the call, 0 for a timeout call, and
// counting with it allocates nothing.
func TestTypedRowCount(t *testing.T) {
	m := typedModule(t, abi.TimeoutProcessingTime, func(key Key, rows iter.Seq[struct{}], st *GroupState[int], out *Emitter[int]) error {
		out.Emit(st.RowCount())
		return nil
	})
	buf := processBuf(1, 0,
		group{key: `"a"`, rows: []string{`{}`, `{}`, `{}`}},
		group{key: `"b"`, flags: abi.GroupTimedOut},
		group{key: `"c"`, rows: []string{`{}`}},
	)
	res := parseResults(t, m.Process(buf))
	for i, want := range []string{"3", "0", "1"} {
		if res[i].status != abi.StatusOK || len(res[i].emits) != 1 || res[i].emits[0] != want {
			t.Errorf("group %d: %+v, want the emit %s", i, res[i], want)
		}
	}
}
