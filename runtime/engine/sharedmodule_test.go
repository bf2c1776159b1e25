package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// TestShareModule: engines with the same Config.ShareModule (partitions of one deployment)
// run on one module, started once even when they start together; an engine closing leaves
// the others running; once the last closed, the next starts the module again; engines
// without ShareModule, or with another, have their own.
func TestShareModule(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	sp := specFromYAML(t, probeSpec)
	wasm := probeWasm(t)
	start := func(keyspace, share string) (*engine.Engine, *collector) {
		t.Helper()
		sink := &collector{}
		eng, err := sharedRuntime(t).NewEngine(ctx, engine.Config{Spec: sp, Wasm: wasm, Store: st, Sink: sink, Keyspace: keyspace, ShareModule: share})
		require(t, err)
		t.Cleanup(func() { eng.Close(ctx) })
		return eng, sink
	}
	works := func(eng *engine.Engine, sink *collector, at int64) {
		t.Helper()
		if got := stateOf(t, eng, sink, at, "a"); got == "" {
			t.Fatal("no probe output")
		}
	}

	engines := make([]*engine.Engine, 3)
	sinks := make([]*collector, 3)
	var wg sync.WaitGroup
	for i := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			engines[i], sinks[i] = start(state.PartitionName("probe", i), "probe@1")
		}()
	}
	wg.Wait()
	if !engine.SameModule(engines[0], engines[1]) || !engine.SameModule(engines[0], engines[2]) {
		t.Fatal("the engines of one ShareModule run on different modules")
	}
	other, _ := start("other", "probe@2")
	own, _ := start("own", "")
	if engine.SameModule(engines[0], other) || engine.SameModule(engines[0], own) {
		t.Fatal("engines of another ShareModule, or of none, share the module")
	}

	require(t, engines[0].Close(ctx))
	works(engines[1], sinks[1], 1000)
	require(t, engines[1].Close(ctx))
	require(t, engines[2].Close(ctx))
	again, sink := start(state.PartitionName("probe", 0), "probe@1")
	if engine.SameModule(again, other) {
		t.Fatal("a restarted module is another's")
	}
	works(again, sink, 2000)
}
