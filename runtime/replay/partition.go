package replay

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/history"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/state"
)

// replayer runs the partitions' histories in one store.
type replayer struct {
	opts  Options
	rt    *engine.Runtime
	store *state.Store
	rep   *Report
	total int // batches of all partitions
	done  int
	old   *published
}

// emitted collects the outputs of a replayed batch, by key, in emission order.
type emitted struct {
	mu    sync.Mutex
	byKey map[string][][]byte
}

// Deliver implements engine.Sink.
func (e *emitted) Deliver(_ context.Context, _ string, entries []state.OutboxEntry) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, en := range entries {
		if en.Kind == state.OutboxOutput {
			e.byKey[string(en.Key)] = append(e.byKey[string(en.Key)], slices.Clone(en.Payload))
		}
	}
	return nil
}

// partition replays partition p's history.
func (r *replayer) partition(ctx context.Context, p int, hist []batch) error {
	if len(hist) == 0 {
		return nil
	}
	sp := r.opts.Spec
	fromSnapshot := false
	if hist[0].HadState || !hist[0].compared {
		// From a snapshot: needed when the history does not start from empty state, and
		// quicker when the comparison does not start at its beginning.
		start, found, err := r.snapshotStart(ctx, p, hist)
		if err != nil {
			return err
		}
		if !found && hist[0].HadState {
			return fmt.Errorf("%w: partition %d's oldest recorded batch (%d, at %s) ran on state made by batches no longer recorded, and no snapshot of the state (a replicated deployment's) starts where the recorded history does",
				ErrHistoryGone, p, hist[0].Batch, timeOf(hist[0].ProcessingTimeMs))
		}
		fromSnapshot = found
		r.done += start
		hist = hist[start:]
		if len(hist) == 0 {
			return nil
		}
	}
	stream, filters, err := history.Input(ctx, r.opts.JS, sp, r.opts.InputOf, p)
	if err != nil {
		return err
	}
	from := uint64(0)
	for _, b := range hist {
		if b.Rows > 0 {
			from = b.FirstSequence
			break
		}
	}
	st, err := r.opts.JS.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("replay: input stream %s: %w", stream, err)
	}
	if first := st.CachedInfo().State.FirstSeq; from > 0 && first > from {
		return fmt.Errorf("%w: input stream %s no longer holds sequence %d (its first is %d), which batch %d read", ErrHistoryGone, stream, from, first, firstBatchAt(hist, from))
	}
	rd, err := input.OpenStreamReader(ctx, r.opts.JS, stream, filters, from)
	if err != nil {
		return err
	}
	defer rd.Close()
	var eng *engine.Engine
	defer func() {
		if eng != nil {
			eng.Close(context.Background())
		}
	}()
	sink := &emitted{}
	for _, b := range hist {
		if eng == nil {
			cfg := engine.Config{Spec: sp, Wasm: r.opts.Module, Store: r.store, Keyspace: topology.Keyspace(sp.Name, p, sp.Partitions), Sink: sink, Logger: r.opts.Logger}
			if is := r.opts.InitialState; is != nil && !fromSnapshot {
				// Applied in the first batch, as the deployment's first batch did (a
				// snapshot holds what it applied).
				if parts := max(sp.Partitions, 1); parts > 1 {
					is = is.Partition(p, parts)
				}
				cfg.InitialState = is
			}
			if eng, err = r.rt.NewEngine(ctx, cfg); err != nil {
				return err
			}
		}
		rows, err := history.Rows(ctx, rd, stream, sp, r.opts.InputOf, b.Manifest)
		if err != nil {
			return err
		}
		sink.byKey = map[string][][]byte{}
		nextW := b.nextW
		in := engine.BatchInput{ProcessingTimeMs: b.ProcessingTimeMs, Rows: rows, Position: b.Position, Drain: b.Drain, NextWatermarkMs: &nextW}
		if _, err := eng.RunBatch(ctx, in); err != nil {
			return fmt.Errorf("replay: partition %d, batch %d: %w", p, b.Batch, err)
		}
		r.rep.Batches++
		r.rep.Rows += len(rows)
		if b.compared {
			if err := r.compare(p, b, sink.byKey); err != nil {
				return err
			}
		}
		r.done++
		if r.opts.Progress != nil {
			r.opts.Progress(r.done, r.total)
		}
	}
	return nil
}

// firstBatchAt is the id of the batch of hist that read sequence seq (0: none).
func firstBatchAt(hist []batch, seq uint64) uint64 {
	for _, b := range hist {
		if b.Rows > 0 && b.FirstSequence <= seq && seq <= b.LastSequence {
			return b.Batch
		}
	}
	return 0
}

// compare compares a replayed batch's outputs with the recorded batch's.
func (r *replayer) compare(p int, b batch, got map[string][][]byte) error {
	old, err := r.old.of(sideOld, p, b.ids)
	if err != nil {
		return err
	}
	r.rep.Compared++
	r.rep.compareBatch(p, b.Batch, r.opts.Keys, old, got)
	return nil
}
