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
	"github.com/groupstate/groupstate/sdk/go/jsonobj"
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

// The methods below encode and decode count and total without reflection (see
// groupstate.Typed); without them the handler works the same, through encoding/json, at
// several times the cost per key.

// UnmarshalJSON reads {"login_count": n}.
func (c *count) UnmarshalJSON(b []byte) error {
	return jsonobj.Each(b, func(name, value []byte) (err error) {
		if string(name) == "login_count" {
			c.LoginCount, err = jsonobj.Int(value)
		}
		return err
	})
}

// AppendJSON writes {"login_count": n}.
func (c count) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonobj.NewWriter(dst)
	w.Int("login_count", c.LoginCount)
	return w.End()
}

// AppendJSON writes the output row, like encoding/json would.
func (t total) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonobj.NewWriter(dst)
	w.Raw("user_id", t.UserID)
	w.Int("total_logins", t.TotalLogins)
	if t.SessionClosed {
		w.Bool("session_closed", true)
	}
	return w.End()
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

func handle(key groupstate.Key, _ iter.Seq[login], state *groupstate.GroupState[count], out *groupstate.Emitter[total]) error {
	c, _ := state.GetOption()
	if state.HasTimedOut() {
		out.Emit(total{UserID: key.JSON(), TotalLogins: c.LoginCount, SessionClosed: true})
		state.Remove()
		return nil
	}
	c.LoginCount += int64(state.RowCount()) // counting with a range loop would allocate
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
