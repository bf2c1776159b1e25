package engine

import (
	"context"
	"fmt"

	"github.com/groupstate/groupstate/state"
)

// Durable is the sync of a batch's commit (BatchReport.Durable, with
// Config.PipelineCommits), safe to wait on from any goroutine.
type Durable struct {
	done chan struct{} // closed when the sync ended
	err  error         // its error (wrapping state.ErrFailed), set before done closes
}

// Wait blocks until the batch is on disk (nil) or its sync failed: then the error wraps
// state.ErrFailed, the store is failed, and nothing of the batch was delivered. A nil
// Durable returns nil at once. Wait may be called any number of times.
func (d *Durable) Wait() error {
	if d == nil {
		return nil
	}
	<-d.done
	return d.err
}

// syncing is a pipelined commit's sync and, once it succeeded, the delivery of the batch's
// outbox (Config.PipelineCommits), run by a goroutine of its own. The engine's goroutine
// reads its results after done closed (settle), and touches neither the sink, the outbox nor
// the delivery in flight before then.
type syncing struct {
	dur  *Durable
	done chan struct{} // closed when the goroutine ended
	// Results, set before done closes:
	next  *inflight // the batch's delivery, started (nil: none)
	acked bool      // the previous delivery's entries were deleted from the outbox (unsynced)
	derr  error     // a delivery failed: its entries, and the batch's, wait in the outbox
}

// startSyncing waits for y on a goroutine of its own, then, when deliver, finishes the
// delivery prev and starts that of entries (see deliverStep). The engine gives up prev.
func (e *Engine) startSyncing(ctx context.Context, y *state.Sync, deliver bool, prev *inflight, entries []state.OutboxEntry) *syncing {
	s := &syncing{dur: &Durable{done: make(chan struct{})}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		err := y.Wait()
		s.dur.err = err
		close(s.dur.done)
		if err != nil || !deliver {
			return
		}
		s.next, s.acked, s.derr = e.deliverStep(ctx, prev, entries)
	}()
	return s
}

// settle waits for the pipelined commit in flight, if any, and takes its results over: err
// when its sync failed (the store is failed), derr when its delivery failed (the outbox is
// pending again, as after a failed delivery on the engine's goroutine).
func (e *Engine) settle() (derr, err error) {
	s := e.syncing
	if s == nil {
		return nil, nil
	}
	<-s.done
	e.syncing = nil
	if s.dur.err != nil {
		return nil, fmt.Errorf("engine: syncing the last commit: %w", s.dur.err)
	}
	if s.acked {
		e.acksUnsynced = true
	}
	e.inflight = s.next
	if s.derr != nil {
		e.pending = true
		e.logger.Warn("outbox delivery failed; will retry before the next batch", "err", s.derr)
		return s.derr, nil
	}
	return nil, nil
}
