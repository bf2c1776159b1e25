package engine_test

import (
	"context"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// TestCountersCommitted: every batch commits its counts with it (state.Progress.Counters):
// after batches, one of them committed in chunks, the committed counters are the sums of the
// reports (a batch counted once however many chunks it took), and an engine reopened on the
// same store reads them back, so they survive restarts and failovers.
func TestCountersCommitted(t *testing.T) {
	for _, c := range []struct {
		name      string
		chunkKeys int
	}{{"one commit a batch", 0}, {"chunks of 10 timeouts", 10}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t, t.TempDir())
			eng := chunkEngine(t, st, newLog(), c.chunkKeys)
			var want state.Counters
			in := append(chunkBatches(), engine.BatchInput{ProcessingTimeMs: 6000}, engine.BatchInput{ProcessingTimeMs: 6001})
			for _, b := range in {
				rep, err := eng.RunBatch(ctx, b)
				require(t, err)
				if rep.Skipped {
					continue
				}
				want.Batches++
				want.RowsIn += uint64(rep.RowsIn)
				want.LateRows += uint64(rep.LateRows)
				want.DeadLetters += uint64(rep.DeadLetters)
				want.TimeoutsFired += uint64(rep.TimeoutCalls)
				want.Emitted += uint64(rep.Emitted)
			}
			if want.Batches < 3 || want.TimeoutsFired == 0 || want.DeadLetters == 0 {
				t.Fatalf("the batches counted too little to tell: %+v", want)
			}
			if got := eng.Progress().Counters; got != want {
				t.Fatalf("committed counters %+v, want %+v", got, want)
			}
			require(t, eng.Close(ctx))
			if got := chunkEngine(t, st, newLog(), c.chunkKeys).Progress().Counters; got != want {
				t.Fatalf("counters after reopening %+v, want %+v", got, want)
			}
		})
	}
}
