package bench

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/nativehook"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// benchEngine is an engine started for a measurement over a store of its own, with a sink
// that drops every output.
type benchEngine struct {
	*engine.Engine
	store *state.Store
	rt    *engine.Runtime
	busy  *atomic.Int64 // Pebble's flushes and compactions running
}

// startEngine starts the engine of specYAML over a new store in dir, running the module wasm,
// or, when wasm is nil, natives in-process (several instances of the same handler). Close it
// with close.
func startEngine(ctx context.Context, dir string, specYAML []byte, wasm []byte, natives []handler.BufferModule, logger *slog.Logger) (*benchEngine, error) {
	sp, err := spec.ParseSpec(specYAML)
	if err != nil {
		return nil, err
	}
	busy := new(atomic.Int64)
	st, err := state.Open(dir, &state.Options{Logger: logger, Tune: func(o *pebble.Options) {
		o.EventListener = &pebble.EventListener{
			FlushBegin:      func(pebble.FlushInfo) { busy.Add(1) },
			FlushEnd:        func(pebble.FlushInfo) { busy.Add(-1) },
			CompactionBegin: func(pebble.CompactionInfo) { busy.Add(1) },
			CompactionEnd:   func(pebble.CompactionInfo) { busy.Add(-1) },
		}
	}})
	if err != nil {
		return nil, err
	}
	rt, err := engine.New(engine.Options{Logger: logger})
	if err != nil {
		st.Close()
		return nil, err
	}
	cfg := engine.Config{Spec: sp, Wasm: wasm, Store: st, Logger: logger,
		Sink: engine.SinkFunc(func(context.Context, string, []state.OutboxEntry) error { return nil })}
	if wasm == nil {
		nativehook.Use(&cfg, natives...)
	}
	eng, err := rt.NewEngine(ctx, cfg)
	if err != nil {
		return nil, errors.Join(err, rt.Close(ctx), st.Close())
	}
	return &benchEngine{Engine: eng, store: st, rt: rt, busy: busy}, nil
}

// close closes the engine, its runtime and its store.
func (b *benchEngine) close(ctx context.Context) {
	b.Engine.Close(ctx)
	b.rt.Close(ctx)
	b.store.Close()
}

// quiesce waits, up to a minute, until Pebble runs no flush or compaction: the debt of the
// writes before does not weigh on the measurement after.
func (b *benchEngine) quiesce() {
	for deadline := time.Now().Add(time.Minute); b.busy.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}
