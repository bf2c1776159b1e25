package bench

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// fastPub publishes to JetStream the way groupstate's output publisher does
// (runtime/internal/output): each message is a core NATS publish whose reply subject, under
// one wildcard inbox subscription, receives the stream's acknowledgement; no future, timer,
// channel or map entry per message as nats.go's PublishMsgAsync has. At most window
// publishes are unacknowledged at a time. It is what the raw baseline and the server's own
// publish ceiling publish with since round three (issue 32): a baseline that publishes with
// nats.go's per-message futures is slower than groupstate, and bounds nothing.
type fastPub struct {
	nc     *nats.Conn
	prefix string
	sub    *nats.Subscription
	window int

	mu    sync.Mutex
	cond  *sync.Cond
	acked []bool // by publish index
	tags  []any  // by publish index: what publish was given
	sent  int
	done  int // publishes acknowledged from the first on, without a gap
	err   error
	// stopped: stop was called.
	stopped bool
}

// newFastPub starts a publisher, sized for n publishes (it grows past them).
func newFastPub(nc *nats.Conn, n, window int) (*fastPub, error) {
	p := &fastPub{nc: nc, prefix: nc.NewInbox() + ".", window: window, acked: make([]bool, n), tags: make([]any, n)}
	p.cond = sync.NewCond(&p.mu)
	sub, err := nc.Subscribe(p.prefix+"*", p.handle)
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	p.sub = sub
	return p, nil
}

// pubAckOK is how the server's acknowledgement of a stored message begins.
var pubAckOK = []byte(`{"stream":`)

func (p *fastPub) handle(m *nats.Msg) {
	i, err := strconv.Atoi(m.Subject[min(len(p.prefix), len(m.Subject)):])
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.cond.Broadcast()
	switch {
	case err != nil || i < 0 || i >= p.sent:
		return
	case !bytes.HasPrefix(m.Data, pubAckOK) || bytes.Contains(m.Data, []byte(`"error"`)):
		if p.err == nil {
			p.err = fmt.Errorf("publish %d: %s", i, m.Data)
		}
		return
	}
	p.acked[i] = true
	for p.done < len(p.acked) && p.acked[p.done] {
		p.done++
	}
}

// publish publishes m (its Reply is set), after waiting for room in the window, keeping tag
// with it (see waitBeyond); it returns the publish's index.
func (p *fastPub) publish(m *nats.Msg, tag any) (int, error) {
	p.mu.Lock()
	for p.err == nil && p.sent-p.done >= p.window {
		p.cond.Wait()
	}
	i, err := p.sent, p.err
	if err == nil && i >= len(p.acked) {
		p.acked, p.tags = append(p.acked, false), append(p.tags, nil)
	}
	if err == nil {
		p.tags[i] = tag
		p.sent++
	}
	p.mu.Unlock()
	if err != nil {
		return 0, err
	}
	m.Reply = p.prefix + strconv.Itoa(i)
	return i, p.nc.PublishMsg(m)
}

// waitDone waits until the first n publishes are acknowledged (or one failed), up to timeout,
// and returns how many are.
func (p *fastPub) waitDone(n int, timeout time.Duration) (int, error) {
	t := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		if p.err == nil {
			p.err = fmt.Errorf("fastPub: acknowledgements not in after %s", timeout)
		}
		p.mu.Unlock()
		p.cond.Broadcast()
	})
	defer t.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.err == nil && p.done < n {
		p.cond.Wait()
	}
	return p.done, p.err
}

// waitBeyond waits until more than prev publishes are acknowledged from the first on, or
// until stop, and returns how many are and the tag of the last of them (nil for none).
func (p *fastPub) waitBeyond(prev int) (int, any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.err == nil && !p.stopped && p.done <= prev {
		p.cond.Wait()
	}
	var tag any
	if p.done > 0 {
		tag = p.tags[p.done-1]
	}
	return p.done, tag, p.err
}

// stop ends the waits of waitBeyond.
func (p *fastPub) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cond.Broadcast()
}

// close drops the inbox subscription.
func (p *fastPub) close() { _ = p.sub.Unsubscribe() }
