// Command logincount is the running example of Spark's applyInPandasWithState: it counts each
// user's logins and closes the session after config.idle_timeout of processing time without
// logins.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o logincount.wasm .
package main

import (
	"encoding/json"
	"iter"
	"time"

	groupstate "github.com/groupstate/groupstate/sdk/go"
)

// login is an input row; only its key (user_id) matters, which the host has already read.
type login struct{}

// count is the state of a user.
type count struct {
	LoginCount int64 `json:"login_count"`
}

// total is an output row.
type total struct {
	UserID        json.RawMessage `json:"user_id"`
	TotalLogins   int64           `json:"total_logins"`
	SessionClosed bool            `json:"session_closed,omitempty"`
}

// idleTimeout is config.idle_timeout; 0 means no timeout.
var idleTimeout time.Duration

func init() {
	groupstate.OnInit(func(c groupstate.Config) error {
		d, _, err := c.Duration("idle_timeout")
		idleTimeout = d
		return err
	})
	groupstate.Handle(handle)
}

func handle(key groupstate.Key, rows iter.Seq[login], state *groupstate.GroupState[count], out *groupstate.Emitter[total]) error {
	c, _ := state.GetOption()
	if state.HasTimedOut() {
		out.Emit(total{UserID: key.JSON(), TotalLogins: c.LoginCount, SessionClosed: true})
		state.Remove()
		return nil
	}
	for range rows {
		c.LoginCount++
	}
	if err := state.Update(c); err != nil {
		return err
	}
	out.Emit(total{UserID: key.JSON(), TotalLogins: c.LoginCount})
	if idleTimeout > 0 {
		return state.SetTimeoutDuration(idleTimeout)
	}
	return nil
}

func main() {}
