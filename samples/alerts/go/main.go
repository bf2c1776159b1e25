// Command alerts is a small state machine over event time: config.threshold failed logins of
// a user within config.window raise an alert; a successful login resets the count.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o alerts.wasm .
package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"iter"
	"slices"

	groupstate "github.com/groupstate/groupstate/sdk/go"
)

// login is an input row.
type login struct {
	TS      int64 `json:"ts"`
	Success bool  `json:"success"`
}

// failures is the state of a user: the event times of the failed logins still inside the
// window, in event-time order.
type failures struct {
	Failures []int64 `json:"failures"`
}

// alert is an output row.
type alert struct {
	UserID   json.RawMessage `json:"user_id"`
	Alert    string          `json:"alert"`
	Failures int             `json:"failures"`
	FirstTS  int64           `json:"first_ts"`
	LastTS   int64           `json:"last_ts"`
}

var (
	windowMs  int64 = 60000 // config.window
	threshold       = 3     // config.threshold
)

func init() {
	groupstate.OnInit(func(c groupstate.Config) error {
		d, ok, err := c.Duration("window")
		if err != nil {
			return err
		}
		if ok {
			windowMs = d.Milliseconds()
		}
		var cfg struct {
			Threshold *int `json:"threshold"`
		}
		if err := c.Decode(&cfg); err != nil {
			return err
		}
		if cfg.Threshold != nil {
			threshold = *cfg.Threshold
		}
		if windowMs <= 0 || threshold < 1 {
			return errors.New("alerts: config.window must be at least 1ms and config.threshold at least 1")
		}
		return nil
	})
	groupstate.Handle(handle)
}

func handle(key groupstate.Key, rows iter.Seq[login], state *groupstate.GroupState[failures], out *groupstate.Emitter[alert]) error {
	if state.HasTimedOut() {
		// The watermark passed the last failure plus the window: no later row can fall in the
		// window of the failures kept, so forget them.
		state.Remove()
		return nil
	}
	var batch []login
	for r := range rows {
		batch = append(batch, r)
	}
	slices.SortStableFunc(batch, func(a, b login) int { return cmp.Compare(a.TS, b.TS) })

	f, _ := state.GetOption()
	fs := f.Failures
	for _, r := range batch {
		if r.Success {
			// A success resets: drop the failures up to it.
			fs = slices.DeleteFunc(fs, func(t int64) bool { return t <= r.TS })
			continue
		}
		i, _ := slices.BinarySearch(fs, r.TS)
		fs = slices.Insert(fs, i, r.TS)
		// Keep the failures within the window of the latest one.
		last := fs[len(fs)-1]
		fs = slices.DeleteFunc(fs, func(t int64) bool { return last-t >= windowMs })
		if len(fs) >= threshold {
			out.Emit(alert{UserID: key.JSON(), Alert: "failed_logins", Failures: len(fs), FirstTS: fs[0], LastTS: last})
			fs = fs[:0]
		}
	}
	if len(fs) == 0 {
		if state.Exists() {
			state.Remove()
		}
		return nil
	}
	if err := state.Update(failures{Failures: fs}); err != nil {
		return err
	}
	timeout := fs[len(fs)-1] + windowMs
	if w, err := state.CurrentWatermarkMs(); err == nil && timeout < w {
		timeout = w
	}
	return state.SetTimeoutTimestamp(timeout)
}

func main() {}
