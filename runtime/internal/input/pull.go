package input

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A pull request is sent by the Source itself rather than through nats.go's Fetch, because a
// replicated consumer (R3 on a cluster) sends a delivery only once its delivered state has a
// quorum, while some of the statuses that end a request ("409 Batch Completed", "409 Message
// Size Exceeds MaxBytes") are sent at once: the status can overtake the request's last
// deliveries. nats.go's Fetch ends at the status and drops its inbox, so those deliveries are
// lost in the client while the server counts them delivered; they come again only after
// AckWait, and only once something reveals the gap. Every status that ends a request says how
// many of its messages were not delivered (Nats-Pending-Messages), so a pull here knows how
// many deliveries to wait for, and waits for the overtaken ones on its own inbox.

// pullRequest is the body of a JetStream pull request.
type pullRequest struct {
	Batch    int           `json:"batch"`
	MaxBytes int           `json:"max_bytes,omitempty"`
	Expires  time.Duration `json:"expires,omitempty"`
	NoWait   bool          `json:"no_wait,omitempty"`
}

// pullStatusRoom is the room a pull's channel has beyond the request's batch, for the statuses
// that come with it (heartbeats, the one that ends it).
const pullStatusRoom = 16

// pullGrace is how much longer than a request's expiry (or, for a request without one, at
// all) the client waits for its end without a word from the server: a request lost on the way
// (a reconnect, a consumer leader change) ends then.
const pullGrace = 2 * time.Second

// overtakenWait bounds the wait for deliveries that a status overtook. They come as soon as
// the consumer's delivered state has a quorum (milliseconds); when they do not come within it
// (the consumer's leader changed meanwhile), the request reports them lost.
const overtakenWait = 5 * time.Second

// Pull-request status codes and the header that counts what a request did not deliver.
const (
	descriptionHeader     = "Description"
	pendingMessagesHeader = "Nats-Pending-Messages"
)

// pull is one pull request in progress, on an inbox of its own. It is used by one goroutine.
type pull struct {
	sub       *nats.Subscription
	ch        chan *nats.Msg // sub's deliveries
	batch     int
	maxBytes  int
	received  int       // deliveries received
	bytes     int       // their size as the server counts it against maxBytes
	delivered int       // what the server says it delivered; -1 until a status says so
	deadline  time.Time // the client's bound while no status came
	overtaken time.Time // the bound on waiting for deliveries a status overtook
	// lost is set when the server delivered messages that did not arrive: the caller must
	// treat the request's end as a gap.
	lost bool
	// The context next waits with: its parent's, bounded by bound. It is made again only when
	// either changes (a status arrived, drain's own parent), not for every delivery.
	wctx    context.Context
	wcancel context.CancelFunc
	wparent context.Context
	wbound  time.Time
}

// startPull subscribes a new inbox and sends req on subject (the consumer's
// CONSUMER.MSG.NEXT subject) with the inbox as its reply subject.
func startPull(nc *nats.Conn, subject string, req pullRequest) (*pull, error) {
	if req.Batch < 1 {
		req.Batch = 1
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	inbox := nc.NewInbox()
	// The request bounds what comes (batch, max_bytes), and a few statuses end it; the client
	// must not drop any of it as a slow consumer, so the channel holds all of it. A channel of
	// the request's size, not a sync subscription's 64k entries (512 KB allocated per request:
	// an idle deployment's long poll held one all the time).
	ch := make(chan *nats.Msg, req.Batch+pullStatusRoom)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: subject, Reply: inbox, Data: body}); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	return &pull{
		sub:       sub,
		ch:        ch,
		batch:     req.Batch,
		maxBytes:  req.MaxBytes,
		delivered: -1,
		deadline:  time.Now().Add(req.Expires + pullGrace),
	}, nil
}

// close drops the request's inbox: anything the server still sends to it is lost (and shows
// as a gap in the consumer's numbering at the next delivery).
func (p *pull) close() {
	if p.wcancel != nil {
		p.wcancel()
	}
	_ = p.sub.Unsubscribe()
}

// waitCtx returns ctx bounded by bound, made once for each pair.
func (p *pull) waitCtx(ctx context.Context, bound time.Time) context.Context {
	if p.wctx == nil || p.wparent != ctx || !p.wbound.Equal(bound) {
		if p.wcancel != nil {
			p.wcancel()
		}
		p.wctx, p.wcancel = context.WithDeadline(ctx, bound)
		p.wparent, p.wbound = ctx, bound
	}
	return p.wctx
}

// done tells whether every delivery of the request has been received.
func (p *pull) done() bool {
	if p.delivered >= 0 {
		return p.received >= p.delivered
	}
	// Filled by count or by bytes: the server ends such a request without a status when
	// nothing of it is left (a status, when it sends one, comes to an inbox no longer read).
	return p.received >= p.batch || (p.maxBytes > 0 && p.bytes >= p.maxBytes)
}

// next returns the request's next delivery, or nil when the request is over (then p.lost
// tells whether deliveries went missing). It returns ctx's error when ctx ends first, and an
// error when the server refused the request ([jetstream.ErrConsumerDeleted] and
// [nats.ErrNoResponders] among them, for [Gone]).
func (p *pull) next(ctx context.Context) (*nats.Msg, error) {
	for !p.done() {
		bound := p.deadline
		if p.delivered >= 0 {
			bound = p.overtaken
		}
		var m *nats.Msg
		var err error
		wctx := p.waitCtx(ctx, bound)
		select {
		case m = <-p.ch:
		case <-wctx.Done():
			err = wctx.Err()
		}
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return nil, cerr
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
				// Deliveries a status announced did not come; or, without a status, the request
				// went unanswered (a later delivery shows whether any of it went missing).
				p.lost = p.delivered >= 0
				return nil, nil
			}
			return nil, err
		}
		status := ""
		if len(m.Data) == 0 && m.Header != nil {
			status = m.Header.Get(natsio.StatusHeader)
		}
		if status == "" {
			p.received++
			// The size the server counts against max_bytes: subject, reply, headers and data.
			p.bytes += len(m.Subject) + len(m.Reply) + headerSize(m.Header) + len(m.Data)
			return m, nil
		}
		if err := p.status(m, status); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// status takes in a status message of the request.
func (p *pull) status(m *nats.Msg, status string) error {
	descr := m.Header.Get(descriptionHeader)
	lower := strings.ToLower(descr)
	if v := m.Header.Get(pendingMessagesHeader); v != "" {
		// The request ended: batch less this many were delivered.
		left, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("natsio: pull request status %s %q: bad %s %q", status, descr, pendingMessagesHeader, v)
		}
		p.delivered = max(p.received, p.batch-max(left, 0))
		p.overtaken = time.Now().Add(overtakenWait)
		return nil
	}
	switch {
	case status == "100": // an idle heartbeat or flow control, neither asked for
		return nil
	case status == "404": // no messages: sent only after the request's deliveries
		p.delivered = p.received
		return nil
	case status == "503":
		return nats.ErrNoResponders
	case status == "409" && strings.Contains(lower, "consumer deleted"):
		return jetstream.ErrConsumerDeleted
	case status == "409" && (strings.Contains(lower, "leadership change") || strings.Contains(lower, "server shutdown")):
		// Deliveries waiting for the old leader's quorum may never come.
		p.delivered = p.received
		p.lost = true
		return nil
	default:
		return fmt.Errorf("natsio: pull request refused: %s %s", status, descr)
	}
}

// drain discards the rest of p until the server has ended it, ctx ends or RewindTimeout
// passes. After a gap the Source rewinds, and a request still open then would be handed the
// re-deliveries: nobody would read them, and no later delivery might show that gap. The
// discarded messages are not acknowledged, so the rewind delivers them again.
func (p *pull) drain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, RewindTimeout)
	defer cancel()
	for {
		if m, err := p.next(ctx); m == nil || err != nil {
			return
		}
	}
}

// headerSize is the size of h as the NATS protocol encodes it ("NATS/1.0\r\n", a line per
// value, a blank line); zero without headers.
func headerSize(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// ackBody is the body of an acknowledgement.
var ackBody = []byte("+ACK")

// ackMsg acknowledges m (a delivery of a pull request) and waits for the server to confirm.
func ackMsg(ctx context.Context, nc *nats.Conn, m *nats.Msg) error {
	if m.Reply == "" {
		return errors.New("natsio: acknowledging a message without a reply subject")
	}
	_, err := nc.RequestWithContext(ctx, m.Reply, ackBody)
	return err
}
