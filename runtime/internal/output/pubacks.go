package output

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A delivery's publishes are acknowledged on a subscription of its own rather than through
// nats.go's asynchronous JetStream publishing, which costs, for every message, a timer, a
// future with two channels, a map entry under a lock the whole connection shares and a JSON
// decoding of the acknowledgement. Here publish i of a delivery carries the reply subject
// <inbox>.<i>, its outcome is one byte in a slice, and a successful acknowledgement
// ({"stream":...}) is recognised without decoding it. What a delivery does with the outcomes
// (in order, a window, timeouts, disconnects) is in publisher.go.

// pubAckState is the outcome of one publish of a delivery.
type pubAckState uint8

const (
	ackPending pubAckState = iota
	ackOK
	ackFailed
)

// pubAcks collects the acknowledgements of one delivery's n publishes.
type pubAcks struct {
	sub    *nats.Subscription
	prefix string        // the reply subject of publish i is prefix + i
	signal chan struct{} // poked, without blocking, after every outcome

	mu     sync.Mutex
	states []pubAckState // by publish index
	errs   map[int]error // the errors of the failed publishes
	got    int           // outcomes received
}

// newPubAcks subscribes a new inbox for the acknowledgements of n publishes.
func newPubAcks(nc *nats.Conn, n int) (*pubAcks, error) {
	a := &pubAcks{prefix: nc.NewInbox() + ".", signal: make(chan struct{}, 1), states: make([]pubAckState, n)}
	sub, err := nc.Subscribe(a.prefix+"*", a.handle)
	if err != nil {
		return nil, err
	}
	// A delivery bounds what is in flight (PublishWindow): none of its acknowledgements may be
	// dropped as a slow consumer's.
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	a.sub = sub
	return a, nil
}

// reply returns the reply subject of publish i.
func (a *pubAcks) reply(i int) string { return a.prefix + strconv.Itoa(i) }

// handle records the acknowledgement m.
func (a *pubAcks) handle(m *nats.Msg) {
	i, err := strconv.Atoi(m.Subject[min(len(a.prefix), len(m.Subject)):])
	if err != nil || i < 0 || i >= len(a.states) {
		return
	}
	ackErr := pubAckError(m)
	a.mu.Lock()
	if a.states[i] == ackPending {
		a.states[i] = ackOK
		if ackErr != nil {
			a.states[i] = ackFailed
			if a.errs == nil {
				a.errs = map[int]error{}
			}
			a.errs[i] = ackErr
		}
		a.got++
	}
	a.mu.Unlock()
	select {
	case a.signal <- struct{}{}:
	default:
	}
}

// outcome returns the outcome of publish i and, when it failed, its error.
func (a *pubAcks) outcome(i int) (pubAckState, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.states[i], a.errs[i]
}

// received returns how many outcomes came.
func (a *pubAcks) received() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.got
}

// close drops the inbox: acknowledgements that come later are not read.
func (a *pubAcks) close() { _ = a.sub.Unsubscribe() }

// pubAckOK is how the server's acknowledgement of a stored message begins.
var pubAckOK = []byte(`{"stream":`)

// pubAckError returns nil when m acknowledges a stored message (a duplicate among them), or
// why the publish failed: [jetstream.ErrNoStreamResponse] when no stream captures its subject,
// the stream's [jetstream.APIError], or [jetstream.ErrInvalidJSAck].
func pubAckError(m *nats.Msg) error {
	if len(m.Data) == 0 {
		if m.Header.Get(natsio.StatusHeader) == "503" {
			return jetstream.ErrNoStreamResponse
		}
		return jetstream.ErrInvalidJSAck
	}
	if bytes.HasPrefix(m.Data, pubAckOK) && !bytes.Contains(m.Data, []byte(`"error"`)) {
		return nil
	}
	var r struct {
		Error  *jetstream.APIError `json:"error"`
		Stream string              `json:"stream"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return jetstream.ErrInvalidJSAck
	}
	if r.Error != nil {
		return r.Error
	}
	if r.Stream == "" {
		return jetstream.ErrInvalidJSAck
	}
	return nil
}
