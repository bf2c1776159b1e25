package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// TestDrainTakesNoRows: a drain batch with rows is refused and runs nothing; under timeout:
// none a drain has nothing to fire and commits nothing.
func TestDrainTakesNoRows(t *testing.T) {
	sp := specFromYAML(t, readSpec(t, "../../samples/counter/counter.yaml"))
	c := &collector{}
	eng := newEngine(t, sp, readFile(t, "../../samples/counter/go/counter.wasm"), nil, c)
	ctx := context.Background()
	if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(`{"key": "a"}`), Drain: true}); !errors.Is(err, engine.ErrDrainRows) {
		t.Fatalf("a drain with rows: %v, want ErrDrainRows", err)
	}
	if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(`{"key": "a"}`)}); err != nil {
		t.Fatal(err)
	}
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 2, Drain: true})
	require(t, err)
	if !rep.Skipped || rep.TimeoutCalls != 0 {
		t.Fatalf("a drain under timeout: none: %+v, want skipped, no call", rep)
	}
	if got := payloads(c.take(state.OutboxOutput)); len(got) != 1 {
		t.Fatalf("outputs %v, want the one row's", got)
	}
}
