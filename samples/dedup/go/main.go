// Command dedup drops duplicate events: the first row of an event_id is emitted unchanged,
// and later rows with that event_id are dropped until config.ttl of processing time has
// passed since it was first seen, when a timeout removes the key's state.
//
// It uses the raw layer: rows are emitted byte for byte, and nothing is decoded per row.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o dedup.wasm .
package main

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	groupstate "github.com/groupstate/groupstate/sdk/go"
)

// ttl is config.ttl.
var ttl = time.Minute

func init() {
	groupstate.OnInit(func(c groupstate.Config) error {
		d, ok, err := c.Duration("ttl")
		if err != nil {
			return err
		}
		if ok {
			if d.Milliseconds() <= 0 {
				return errors.New("dedup: config.ttl must be at least 1ms")
			}
			ttl = d
		}
		return nil
	})
	groupstate.HandleRaw(handle)
}

// seen is the state of an event_id: the processing time it was first seen at.
type seen struct {
	SeenAt int64 `json:"seen_at"`
}

func handle(g *groupstate.RawGroup) error {
	st := g.State()
	if st.HasTimedOut() {
		st.Remove()
		return nil
	}
	now := st.CurrentProcessingTimeMs()
	ttlMs := ttl.Milliseconds()
	if v, ok := st.GetOption(); ok {
		var s seen
		if err := json.Unmarshal(v, &s); err != nil {
			return err
		}
		if left := s.SeenAt + ttlMs - now; left > 0 {
			// A duplicate: drop the rows and re-arm the timeout, which every call clears.
			return st.SetTimeoutDuration(time.Duration(left) * time.Millisecond)
		}
		// Seen more than ttl ago (the timeout has not fired yet): a new occurrence.
	}
	for row := range g.Rows() {
		g.Emit(row)
		break
	}
	state := strconv.AppendInt([]byte(`{"seen_at":`), now, 10)
	if err := st.Update(append(state, '}')); err != nil {
		return err
	}
	return st.SetTimeoutDuration(ttl)
}

func main() {}
