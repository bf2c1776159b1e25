package engine

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/state"
)

// IsolateAfter is how many engines may start with the same batch next without committing it
// before the next one runs that batch's keys one at a time (see [Engine.Isolating]).
const IsolateAfter = 2

// attempts is the engine's safety net against crashes that no error reports: a process killed
// for its memory, a native fault, a freeze ended by kill -9. Each engine records, synced,
// before its first batch calls the handler, that it attempts that batch (state.Attempt); the
// commit clears the record. An engine that finds the batch attempted IsolateAfter times
// already runs it with every key alone, one at a time, recording each key before its call:
// should the process die again, the next engine finds that key in the record and quarantines
// it, and the batch goes on without it. It costs one synced write per engine, at its first
// batch, and nothing after; restarts without a batch are not counted.
type attempts struct {
	ks       *state.Deployment
	revision string        // Config.Revision
	prev     state.Attempt // the record found at open
	batch    uint64        // the batch attempted, once begun
	starts   int           // engines that attempted it, this one included
	begun    bool          // this engine recorded its attempt
	pending  bool          // the record is written and no commit cleared it yet
	logger   *slog.Logger
}

// openAttempts reads the record; it returns the key that was running alone when the last
// engine stopped during an isolated batch next (nil: none), which the caller quarantines.
func openAttempts(ks *state.Deployment, revision string, next uint64, logger *slog.Logger) (*attempts, []byte, error) {
	prev, err := ks.Attempt()
	if err != nil {
		return nil, nil, fmt.Errorf("engine: reading the attempt record: %w", err)
	}
	if prev.Revision != revision {
		prev = state.Attempt{} // another revision's attempts: a redeploy starts afresh
	}
	a := &attempts{ks: ks, revision: revision, prev: prev, logger: logger}
	if prev.Batch == next {
		return a, prev.Suspect, nil
	}
	return a, nil, nil
}

// begin records the engine's first attempt, of batch id, before the handler is called; it
// returns ctx, made to run the batch's keys one at a time when the batch is to be isolated.
func (a *attempts) begin(ctx context.Context, id uint64) (context.Context, error) {
	if !a.begun {
		a.batch, a.starts = id, 1
		if a.prev.Batch == id {
			a.starts = a.prev.Starts + 1
		}
		if err := a.ks.RecordAttempt(state.Attempt{Revision: a.revision, Batch: id, Starts: a.starts}); err != nil {
			return ctx, err
		}
		a.begun, a.pending = true, true
		if a.isolating() {
			a.logger.Warn("the batch was attempted before without committing; running its keys one at a time", "batch", id, "attempts", a.starts)
		}
	}
	if !a.isolating() || id != a.batch {
		return ctx, nil
	}
	return handler.WithIsolation(ctx, func(key []byte) error {
		return a.ks.RecordAttempt(state.Attempt{Revision: a.revision, Batch: a.batch, Starts: a.starts, Suspect: key})
	}), nil
}

// close deletes the record of an attempt that did not commit when the engine stops cleanly
// (a redeploy, a stop, a handover): a clean stop is no crash, so it neither counts nor blames
// the key that was running.
func (a *attempts) close() error {
	if !a.pending {
		return nil
	}
	a.pending = false
	return a.ks.DeleteAttempt()
}

// isolating tells whether the batch begun is run one key at a time.
func (a *attempts) isolating() bool { return a.pending && a.starts > IsolateAfter }

// record clears the record with the commit that follows the attempt.
func (a *attempts) record(sb *state.Batch) {
	if a.pending {
		sb.ClearAttempt()
	}
}

// committed says the batch record wrote into committed.
func (a *attempts) committed() { a.pending = false }

// Isolating reports, while it runs a batch that engines before it attempted without
// committing (IsolateAfter times or more), that it runs that batch's keys one at a time, and
// why; "" otherwise. A key that was running alone when an engine stopped is quarantined.
func (e *Engine) Isolating() string {
	if !e.att.isolating() {
		return ""
	}
	return fmt.Sprintf("batch %d was attempted %d times without committing (the runtime stopped during it): running its keys one at a time to find the one that brings it down", e.att.batch, e.att.starts-1)
}
