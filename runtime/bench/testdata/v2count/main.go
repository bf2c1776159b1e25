// Command v2count is the ABI v2 side of `groupstate bench`'s v1/v2 figure: the logic of the Go
// logincount sample without a timeout (count each user's rows, emit the total once a batch)
// as a transformWithState processor, with the count in a value state variable and the same
// JSON types, encoded without reflection as logincount's are. The two differ only by the
// ABI: v1 hands the state in and out with the group, v2 reads it with a state request.
//
// Build (make fixtures):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o v2count.wasm .
package main

import (
	"encoding/json"
	"iter"

	groupstate "github.com/groupstate/groupstate/sdk/go"
	"github.com/groupstate/groupstate/sdk/go/jsonobj"
)

func init() { groupstate.Process(&counter{}) }

func main() {}

// login is an input row; only its key matters.
type login struct{}

// UnmarshalJSON reads nothing: the key is all the processor needs.
func (*login) UnmarshalJSON([]byte) error { return nil }

// count is a user's state: {"login_count": n}.
type count struct{ LoginCount int64 }

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

// total is an output row: {"user_id": K, "total_logins": n}.
type total struct {
	UserID      json.RawMessage
	TotalLogins int64
}

// AppendJSON writes the output row.
func (t total) AppendJSON(dst []byte) ([]byte, error) {
	w := jsonobj.NewWriter(dst)
	w.Raw("user_id", t.UserID)
	w.Int("total_logins", t.TotalLogins)
	return w.End()
}

type counter struct{ n *groupstate.ValueState[count] }

func (p *counter) Init(h *groupstate.ProcessorHandle) error {
	p.n = groupstate.NewValueState[count](h, "count")
	return nil
}

func (p *counter) HandleInputRows(key groupstate.Key, rows iter.Seq[login], _ *groupstate.Timers, out *groupstate.Emitter[total]) error {
	c, _ := p.n.GetOption()
	c.LoginCount += int64(groupstate.RowCount(rows)) // counting with a range loop would allocate
	if err := p.n.Update(c); err != nil {
		return err
	}
	out.Emit(total{UserID: key.JSON(), TotalLogins: c.LoginCount})
	return nil
}

func (p *counter) HandleExpiredTimer(groupstate.Key, int64, *groupstate.Timers, *groupstate.Emitter[total]) error {
	return nil
}
