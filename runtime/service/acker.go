package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
)

// acker acknowledges input for a runner's batch loop on a goroutine of its own. The loop
// must not wait for it: a Source serialises its calls, and the prefetcher nearly always has a
// fetch in progress, which waits up to trigger.interval for input; acknowledging in the loop
// delayed every batch (a no-data batch by up to a whole interval). The consumer acknowledges
// all (AckAll), so acknowledging the newest committed message covers every earlier one:
// requests that pile up while an acknowledgement is in progress merge into the newest.
//
// An acknowledgement that is late or lost costs nothing but redelivery: rows at or before the
// committed position are skipped.
type acker struct {
	src    *natsio.Source
	logger *slog.Logger

	mu     sync.Mutex
	latest *natsio.Msg // the newest message to acknowledge, nil when none is waiting
	wake   chan struct{}
	done   chan struct{}
}

// ackTimeout bounds one acknowledgement.
const ackTimeout = 5 * time.Second

func startAcker(src *natsio.Source, logger *slog.Logger) *acker {
	a := &acker{src: src, logger: logger, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go a.run()
	return a
}

// ack asks for m (and everything before it) to be acknowledged, without waiting.
func (a *acker) ack(m natsio.Msg) {
	a.mu.Lock()
	a.latest = &m
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default: // a wake-up is pending already; it will see m
	}
}

func (a *acker) run() {
	defer close(a.done)
	for range a.wake {
		a.flush()
	}
	a.flush()
}

func (a *acker) flush() {
	a.mu.Lock()
	m := a.latest
	a.latest = nil
	a.mu.Unlock()
	if m == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	if err := a.src.Ack(ctx, *m); err != nil {
		a.logger.Warn("acknowledging input failed; it will be redelivered and skipped", "err", err)
	}
}

// stop acknowledges what is still waiting and ends the goroutine. ack must not be called
// after it.
func (a *acker) stop() {
	close(a.wake)
	<-a.done
}
