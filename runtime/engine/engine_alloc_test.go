//go:build !race

// The race detector changes allocation counts (sync.Pool drops items at random), so this
// test runs without it.

package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/nativehook"
	"github.com/groupstate/groupstate/state"
)

const keepSpec = `
name: keep
module: unused.wasm
key:
  field: k
event_time:
  field: ts
timeout: processing_time
output:
  subject: keep.out
`

// TestRunBatchAllocsPerRow: a batch allocates a bounded number of times whatever its number
// of rows and keys (the engine reuses its buffers and the state cache serves the reads), so
// a regression to per-row or per-key allocations fails here.
func TestRunBatchAllocsPerRow(t *testing.T) {
	const nRows, nKeys = 2000, 500
	cfg := engine.Config{
		Spec: specFromYAML(t, keepSpec), Store: openStore(t, ""),
		Sink: engine.SinkFunc(func(context.Context, string, []state.OutboxEntry) error { return nil }),
	}
	nativehook.Use(&cfg, &keepModule{})
	eng, err := sharedRuntime(t).NewEngine(context.Background(), cfg)
	require(t, err)
	defer eng.Close(context.Background())
	batch := make([]engine.Row, nRows)
	for i := range batch {
		batch[i].Data = fmt.Appendf(nil, `{"k":"user-%04d","ts":%d}`, i%nKeys, 1_700_000_000_000+i)
	}
	at := int64(1000)
	run := func() {
		at++
		if _, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: at, Rows: batch}); err != nil {
			t.Fatal(err)
		}
	}
	run() // the first batch creates the keys and sizes the engine's buffers
	run()
	allocs := testing.AllocsPerRun(5, run)
	t.Logf("%.0f allocations per batch of %d rows over %d keys", allocs, nRows, nKeys)
	if allocs > nKeys/5 {
		t.Fatalf("%.0f allocations per batch of %d rows over %d keys: the engine allocates per row or per key", allocs, nRows, nKeys)
	}
}
