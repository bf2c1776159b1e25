package groupstate

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/groupstate/groupstate/abi"
)

// TestRawState covers every rule of the state handle (docs/semantics.md, "The state handle").
func TestRawState(t *testing.T) {
	const T, W = 100000, 50000
	old := []byte(`{"n":1}`)
	tests := []struct {
		name    string
		mode    abi.TimeoutMode
		flags   uint32 // init flags
		gflags  uint32 // group flags
		state   []byte // nil: no state
		handler func(s *RawState) error
		want    result
	}{
		{name: "keep when untouched", state: old,
			handler: func(s *RawState) error { return nil },
			want:    result{action: abi.ActionKeep}},
		{name: "exists and get existing", state: old,
			handler: func(s *RawState) error {
				v, err := s.Get()
				o, ok := s.GetOption()
				return errors.Join(check(s.Exists(), "exists"), err, check(string(v) == `{"n":1}`, "get"),
					check(ok && string(o) == `{"n":1}`, "getOption"))
			},
			want: result{action: abi.ActionKeep}},
		{name: "absent state",
			handler: func(s *RawState) error {
				_, err := s.Get()
				o, ok := s.GetOption()
				return errors.Join(check(!s.Exists(), "!exists"), check(errors.Is(err, ErrNoState), "ErrNoState"),
					check(!ok && o == nil, "getOption"))
			},
			want: result{action: abi.ActionKeep}},
		{name: "update nil is an error",
			handler: func(s *RawState) error {
				return errors.Join(check(s.Update(nil) == ErrNullState, "ErrNullState"), check(!s.Exists(), "!exists"))
			},
			want: result{action: abi.ActionKeep}},
		{name: "update empty is a value",
			handler: func(s *RawState) error { return s.Update([]byte{}) },
			want:    result{action: abi.ActionUpdate, state: ""}},
		{name: "update copies",
			handler: func(s *RawState) error {
				v := []byte("abc")
				err := s.Update(v)
				v[0] = 'X'
				got, _ := s.Get()
				return errors.Join(err, check(string(got) == "abc", "copied"), check(s.Exists(), "exists"))
			},
			want: result{action: abi.ActionUpdate, state: "abc"}},
		{name: "last update wins", state: old,
			handler: func(s *RawState) error { return errors.Join(s.Update([]byte("a")), s.Update([]byte("bb"))) },
			want:    result{action: abi.ActionUpdate, state: "bb"}},
		{name: "remove", state: old,
			handler: func(s *RawState) error {
				s.Remove()
				_, err := s.Get()
				_, ok := s.GetOption()
				return errors.Join(check(!s.Exists(), "!exists"), check(err == ErrNoState, "ErrNoState"), check(!ok, "!ok"))
			},
			want: result{action: abi.ActionRemove}},
		{name: "remove is repeatable", state: old,
			handler: func(s *RawState) error { s.Remove(); s.Remove(); return nil },
			want:    result{action: abi.ActionRemove}},
		{name: "remove without state",
			handler: func(s *RawState) error { s.Remove(); return nil },
			want:    result{action: abi.ActionRemove}},
		{name: "update after remove revives", state: old,
			handler: func(s *RawState) error {
				s.Remove()
				err := s.Update([]byte("new"))
				v, _ := s.Get()
				return errors.Join(err, check(s.Exists() && string(v) == "new", "revived"))
			},
			want: result{action: abi.ActionUpdate, state: "new"}},
		{name: "remove after update removes", state: old,
			handler: func(s *RawState) error { err := s.Update([]byte("new")); s.Remove(); return err },
			want:    result{action: abi.ActionRemove}},
		{name: "failed update after remove keeps removal", state: old,
			handler: func(s *RawState) error { s.Remove(); _ = s.Update(nil); return nil },
			want:    result{action: abi.ActionRemove}},
		{name: "not timed out on data call",
			handler: func(s *RawState) error { return check(!s.HasTimedOut(), "!timedOut") },
			want:    result{}},
		{name: "timed out", gflags: abi.GroupTimedOut, state: old,
			handler: func(s *RawState) error { return check(s.HasTimedOut(), "timedOut") },
			want:    result{}},
		{name: "processing time", mode: abi.TimeoutProcessingTime,
			handler: func(s *RawState) error { return check(s.CurrentProcessingTimeMs() == T, "T") },
			want:    result{}},

		// SetTimeoutDuration.
		{name: "duration under processing time", mode: abi.TimeoutProcessingTime,
			handler: func(s *RawState) error { return s.SetTimeoutDuration(10 * time.Second) },
			want:    result{timeout: true, timeoutMs: T + 10000}},
		{name: "duration truncated to ms", mode: abi.TimeoutProcessingTime,
			handler: func(s *RawState) error { return s.SetTimeoutDuration(1500 * time.Microsecond) },
			want:    result{timeout: true, timeoutMs: T + 1}},
		{name: "last duration wins", mode: abi.TimeoutProcessingTime,
			handler: func(s *RawState) error {
				return errors.Join(s.SetTimeoutDuration(time.Hour), s.SetTimeoutDuration(time.Second))
			},
			want: result{timeout: true, timeoutMs: T + 1000}},
		{name: "failed duration keeps earlier one", mode: abi.TimeoutProcessingTime,
			handler: func(s *RawState) error {
				return errors.Join(s.SetTimeoutDuration(time.Second), check(s.SetTimeoutDuration(0) == ErrNonPositiveDuration, "err"))
			},
			want: result{timeout: true, timeoutMs: T + 1000}},
		{name: "duration without state and after remove", mode: abi.TimeoutProcessingTime, state: old,
			handler: func(s *RawState) error { s.Remove(); return s.SetTimeoutDuration(time.Second) },
			want:    result{action: abi.ActionRemove, timeout: true, timeoutMs: T + 1000}},
		{name: "duration on timeout call re-arms", mode: abi.TimeoutProcessingTime, gflags: abi.GroupTimedOut, state: old,
			handler: func(s *RawState) error { return s.SetTimeoutDuration(time.Second) },
			want:    result{timeout: true, timeoutMs: T + 1000}},

		// SetTimeoutTimestamp.
		{name: "timestamp under event time", mode: abi.TimeoutEventTime, flags: abi.InitHasWatermark,
			handler: func(s *RawState) error { return s.SetTimeoutTimestamp(W + 5) },
			want:    result{timeout: true, timeoutMs: W + 5}},
		{name: "timestamp equal to watermark", mode: abi.TimeoutEventTime, flags: abi.InitHasWatermark,
			handler: func(s *RawState) error { return s.SetTimeoutTimestamp(W) },
			want:    result{timeout: true, timeoutMs: W}},
		{name: "last timestamp wins", mode: abi.TimeoutEventTime,
			handler: func(s *RawState) error { return errors.Join(s.SetTimeoutTimestamp(W+9), s.SetTimeoutTimestamp(W+1)) },
			want:    result{timeout: true, timeoutMs: W + 1}},
		{name: "timestamp without state", mode: abi.TimeoutEventTime,
			handler: func(s *RawState) error { return errors.Join(check(!s.Exists(), "!exists"), s.SetTimeoutTimestamp(W+1)) },
			want:    result{timeout: true, timeoutMs: W + 1}},

		// Watermark.
		{name: "watermark", mode: abi.TimeoutEventTime, flags: abi.InitHasWatermark,
			handler: func(s *RawState) error {
				w, err := s.CurrentWatermarkMs()
				return errors.Join(err, check(w == W, "W"))
			},
			want: result{}},
		{name: "watermark with processing time", mode: abi.TimeoutProcessingTime, flags: abi.InitHasWatermark,
			handler: func(s *RawState) error {
				w, err := s.CurrentWatermarkMs()
				return errors.Join(err, check(w == W, "W"))
			},
			want: result{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := func(g *RawGroup) error { return tc.handler(g.State()) }
			res := run(t, tc.mode, tc.flags, T, W, h, group{flags: tc.gflags, key: `"k"`, state: tc.state})
			if res[0].err != "" {
				t.Fatalf("group failed: %s", res[0].err)
			}
			got := res[0]
			got.emits = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTimeoutMisuse covers the errors of the timeout setters and of CurrentWatermarkMs.
func TestTimeoutMisuse(t *testing.T) {
	const T, W = 100000, 50000
	tests := []struct {
		name  string
		mode  abi.TimeoutMode
		flags uint32
		call  func(s *RawState) error
		want  error
		msg   string
	}{
		{"duration under none", abi.TimeoutNone, 0, func(s *RawState) error { return s.SetTimeoutDuration(time.Second) }, ErrDurationNotAllowed, ""},
		{"duration under event time", abi.TimeoutEventTime, 0, func(s *RawState) error { return s.SetTimeoutDuration(time.Second) }, ErrDurationNotAllowed, ""},
		{"zero duration", abi.TimeoutProcessingTime, 0, func(s *RawState) error { return s.SetTimeoutDuration(0) }, ErrNonPositiveDuration, ""},
		{"negative duration", abi.TimeoutProcessingTime, 0, func(s *RawState) error { return s.SetTimeoutDuration(-time.Second) }, ErrNonPositiveDuration, ""},
		{"sub-millisecond duration", abi.TimeoutProcessingTime, 0, func(s *RawState) error { return s.SetTimeoutDuration(999 * time.Microsecond) }, ErrNonPositiveDuration, ""},
		{"timestamp under none", abi.TimeoutNone, 0, func(s *RawState) error { return s.SetTimeoutTimestamp(W + 1) }, ErrTimestampNotAllowed, ""},
		{"timestamp under processing time", abi.TimeoutProcessingTime, 0, func(s *RawState) error { return s.SetTimeoutTimestamp(W + 1) }, ErrTimestampNotAllowed, ""},
		{"zero timestamp", abi.TimeoutEventTime, abi.InitHasWatermark, func(s *RawState) error { return s.SetTimeoutTimestamp(0) }, ErrNonPositiveTimestamp, ""},
		{"negative timestamp", abi.TimeoutEventTime, abi.InitHasWatermark, func(s *RawState) error { return s.SetTimeoutTimestamp(-5) }, ErrNonPositiveTimestamp, ""},
		{"timestamp before watermark", abi.TimeoutEventTime, abi.InitHasWatermark, func(s *RawState) error { return s.SetTimeoutTimestamp(W - 1) }, ErrTimestampBeforeWatermark,
			"groupstate: timeout timestamp (49999) cannot be earlier than the current watermark (50000)"},
		{"no watermark", abi.TimeoutEventTime, 0, func(s *RawState) error { _, err := s.CurrentWatermarkMs(); return err }, ErrNoWatermark, ""},
		{"no watermark under none", abi.TimeoutNone, 0, func(s *RawState) error { _, err := s.CurrentWatermarkMs(); return err }, ErrNoWatermark, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got error
			h := func(g *RawGroup) error { got = tc.call(g.State()); return nil }
			res := run(t, tc.mode, tc.flags, T, W, h, group{key: `"k"`})
			if !errors.Is(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if tc.msg != "" && got.Error() != tc.msg {
				t.Fatalf("message %q, want %q", got.Error(), tc.msg)
			}
			if res[0].timeout {
				t.Fatalf("a failed setter left a timeout: %+v", res[0])
			}
		})
	}
}

// TestEveryCallStartsWithoutTimeout checks that a timeout set for one group does not leak into
// the next group of the same call, nor into a later call (docs/semantics.md, "A micro-batch":
// Every call starts with no timeout).
func TestEveryCallStartsWithoutTimeout(t *testing.T) {
	calls := 0
	h := func(g *RawGroup) error {
		calls++
		if g.Key().String() == "a" {
			return g.State().SetTimeoutDuration(time.Second)
		}
		return g.State().Update([]byte("x"))
	}
	m := newTestModule(t, abi.TimeoutProcessingTime, 0, "{}", h)
	for call := 0; call < 2; call++ {
		res := parseResults(t, m.Process(processBuf(1000, 0, group{key: `"a"`, state: []byte("s")}, group{key: `"b"`}, group{key: `"c"`, state: []byte("s")})))
		want := []result{
			{action: abi.ActionKeep, timeout: true, timeoutMs: 2000},
			{action: abi.ActionUpdate, state: "x"},
			{action: abi.ActionUpdate, state: "x"},
		}
		for i := range want {
			if res[i].action != want[i].action || res[i].timeout != want[i].timeout || res[i].timeoutMs != want[i].timeoutMs || res[i].state != want[i].state {
				t.Fatalf("call %d group %d: got %+v, want %+v", call, i, res[i], want[i])
			}
		}
	}
}
