package runner

import (
	"context"
	"sync"

	"github.com/groupstate/groupstate/runtime/internal/input"
)

// acker acknowledges a live source's input in the background, so that the loop does not wait
// for the server's confirmation (a round trip, about a quarter of the loop's time per batch
// under a steady flow of rows) before it takes the next batch. Only committed batches are acknowledged, as before:
// the loop asks once the commit returned, and an acknowledgement only moves the consumer's ack
// floor up to rows whose effects are committed. A message asked for replaces an earlier one not
// sent yet (an acknowledgement covers every row before it). A failure is logged and costs only
// redelivery, as the loop's own acknowledgement did: rows at or before the committed position
// are skipped. flush waits until what was asked for is sent; the source flushes before its
// consumer is replaced (heal) and when it closes, so a runner that stopped has acknowledged
// every batch it committed, and no acknowledgement reaches a consumer that replaced the one
// its message came from.
type acker struct {
	r *Runner

	mu      sync.Mutex
	idle    sync.Cond // signalled when nothing is asked for or being sent
	src     *input.Source
	m       input.Msg
	asked   bool // m waits to be sent, to src
	sending bool
	wake    chan struct{} // capacity 1
	quit    chan struct{}
	done    chan struct{}
}

// startAcker starts the acker of r's live source.
func (r *Runner) startAcker() *acker {
	a := &acker{r: r, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	a.idle.L = &a.mu
	go a.run()
	return a
}

// ack asks for m, read from the runner's current consumer, and every message before it to be
// acknowledged.
func (a *acker) ack(m input.Msg) {
	a.mu.Lock()
	a.src, a.m, a.asked = a.r.src, m, true
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// flush waits until every acknowledgement asked for was sent and answered (or failed).
func (a *acker) flush() {
	a.mu.Lock()
	for a.asked || a.sending {
		a.idle.Wait()
	}
	a.mu.Unlock()
}

// stop flushes and ends the acker.
func (a *acker) stop() {
	a.flush()
	close(a.quit)
	<-a.done
}

func (a *acker) run() {
	defer close(a.done)
	for {
		select {
		case <-a.wake:
		case <-a.quit:
			return
		}
		a.mu.Lock()
		if !a.asked {
			a.mu.Unlock()
			continue
		}
		src, m := a.src, a.m
		a.asked, a.sending = false, true
		a.mu.Unlock()
		a.send(src, m)
		a.mu.Lock()
		a.sending = false
		a.idle.Broadcast()
		a.mu.Unlock()
	}
}

// send acknowledges m on src, waiting at most ackTimeout (see Runner.ack).
func (a *acker) send(src *input.Source, m input.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := src.Ack(ctx, m); err != nil {
		a.r.logger.Warn("acknowledging input failed; it will be redelivered and skipped", "err", err)
	}
}
