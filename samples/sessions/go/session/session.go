// Package session is the handler of the sessions sample, in a package of its own so that the
// host's benchmarks can run the very same code natively (see [Register]) and compare it with
// the WebAssembly build of ../main.go.
//
// A user's events belong to one session until a gap of more than config.gap of event time
// without events; a session is emitted when a later event opens the next one, or when the
// watermark passes its end plus the gap.
package session

import (
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"time"

	groupstate "github.com/groupstate/groupstate/sdk/go"
	"github.com/groupstate/groupstate/sdk/go/jsonobj"
)

// click is an input row: its event time ts.
type click struct {
	TS eventTime `json:"ts"`
}

// session is the state of a user: the open session.
type session struct {
	Start  int64 `json:"start"`
	End    int64 `json:"end"`
	Events int64 `json:"events"`
}

// closed is an output row: a finished session.
type closed struct {
	UserID json.RawMessage `json:"user_id"`
	session
}

// Register registers the sessions handler and its config on m. Pass nil for the module the
// WebAssembly exports drive.
func Register(m *groupstate.Module) {
	h := &handler{gapMs: 5000}
	if m == nil {
		groupstate.OnInit(h.configure)
		groupstate.Handle(h.handle)
		return
	}
	m.OnInit(h.configure)
	groupstate.HandleTyped(m, h.handle)
}

// handler holds the config of one module.
type handler struct {
	gapMs int64   // config.gap in milliseconds
	ts    []int64 // the event times of the call in progress
}

func (h *handler) configure(c groupstate.Config) error {
	d, ok, err := c.Duration("gap")
	if err != nil {
		return err
	}
	if ok {
		if d.Milliseconds() <= 0 {
			return errors.New("sessions: config.gap must be at least 1ms")
		}
		h.gapMs = d.Milliseconds()
	}
	return nil
}

func (h *handler) handle(key groupstate.Key, rows iter.Seq[click], state *groupstate.GroupState[session], out *groupstate.Emitter[closed]) error {
	s, open := state.GetOption()
	if state.HasTimedOut() {
		if open {
			out.Emit(closed{UserID: key.JSON(), session: s})
		}
		state.Remove()
		return nil
	}
	h.ts = h.ts[:0] // reused from call to call: a module runs one call at a time
	for r := range rows {
		h.ts = append(h.ts, int64(r.TS))
	}
	slices.Sort(h.ts)
	for _, t := range h.ts {
		switch {
		case !open:
			s, open = session{Start: t, End: t, Events: 1}, true
		case t > s.End+h.gapMs:
			out.Emit(closed{UserID: key.JSON(), session: s})
			s = session{Start: t, End: t, Events: 1}
		default:
			s.Start, s.End, s.Events = min(s.Start, t), max(s.End, t), s.Events+1
		}
	}
	if !open {
		return nil // no rows (cannot happen on a data call) and no session
	}
	if err := state.Update(s); err != nil {
		return err
	}
	// Every row that reaches the handler is later than the watermark, so End+gap is too; the
	// clamp only guards a deployment without late-row filtering.
	timeout := s.End + h.gapMs
	if w, err := state.CurrentWatermarkMs(); err == nil && timeout < w {
		timeout = w
	}
	return state.SetTimeoutTimestamp(timeout)
}

// The methods below encode and decode rows, state and outputs without reflection (see
// groupstate.Typed); without them the handler works the same, through encoding/json, at
// several times the cost per row.

// UnmarshalJSON reads the ts member of a row, ignoring the others.
func (c *click) UnmarshalJSON(b []byte) error {
	return jsonobj.Each(b, func(name, value []byte) error {
		if string(name) == "ts" {
			return c.TS.UnmarshalJSON(value)
		}
		return nil
	})
}

// UnmarshalJSON reads {"start":…,"end":…,"events":…}.
func (s *session) UnmarshalJSON(b []byte) error {
	return jsonobj.Each(b, func(name, value []byte) (err error) {
		switch string(name) {
		case "start":
			s.Start, err = jsonobj.Int(value)
		case "end":
			s.End, err = jsonobj.Int(value)
		case "events":
			s.Events, err = jsonobj.Int(value)
		}
		return err
	})
}

// AppendJSON writes {"start":…,"end":…,"events":…}.
func (s session) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonobj.NewWriter(dst)
	s.members(&w)
	return w.End()
}

func (s session) members(w *jsonobj.Writer) {
	w.Int("start", s.Start)
	w.Int("end", s.End)
	w.Int("events", s.Events)
}

// AppendJSON writes {"user_id":…,"start":…,"end":…,"events":…}, like encoding/json would.
func (c closed) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonobj.NewWriter(dst)
	w.Raw("user_id", c.UserID)
	c.session.members(&w)
	return w.End()
}

// eventTime is an event time in epoch milliseconds, read from a JSON number or an RFC 3339
// string.
type eventTime int64

func (t *eventTime) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		s, err := jsonobj.String(b)
		if err != nil {
			return err
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return err
		}
		*t = eventTime(tm.UnixMilli())
		return nil
	}
	f, err := jsonobj.Float(b)
	if err != nil {
		return errors.New("ts: want epoch milliseconds or an RFC 3339 string, got " + string(b))
	}
	*t = eventTime(f)
	return nil
}
