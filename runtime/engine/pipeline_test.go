package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// walGate holds the syncs of a store's write-ahead log while closed, and fails them while
// failing: a commit's fsync made to last as long as a test needs.
type walGate struct {
	mu      sync.Mutex
	closed  chan struct{} // nil: open
	failing bool
	held    chan struct{} // a sync reached the closed gate (capacity 1)
}

func newWALGate() *walGate { return &walGate{held: make(chan struct{}, 1)} }

func (g *walGate) close() {
	g.mu.Lock()
	g.closed = make(chan struct{})
	g.mu.Unlock()
}

func (g *walGate) open(fail bool) {
	g.mu.Lock()
	c := g.closed
	g.closed, g.failing = nil, fail
	g.mu.Unlock()
	if c != nil {
		close(c)
	}
}

func (g *walGate) inject(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	g.mu.Lock()
	c := g.closed
	g.mu.Unlock()
	if c != nil {
		select {
		case g.held <- struct{}{}:
		default:
		}
		<-c
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failing {
		return errorfs.ErrInjected
	}
	return nil
}

// pipelinedEngine starts a probe engine with Config.PipelineCommits over st.
func pipelinedEngine(t *testing.T, st *state.Store, sink engine.Sink) *engine.Engine {
	t.Helper()
	eng, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: specFromYAML(t, probeSpec), Wasm: probeWasm(t),
		Store: st, Sink: sink, PipelineCommits: true})
	require(t, err)
	return eng
}

// waitDelivered polls sink until it delivered want (in order), and fails after a deadline.
func waitDelivered(t *testing.T, sink *collector, want string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = append(got, payloads(sink.take(state.OutboxOutput))...)
		if strings.Join(got, ",") == want {
			return
		}
		if time.Now().After(deadline) || len(strings.Join(got, ",")) > len(want) {
			t.Fatalf("delivered %v, want %s", got, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPipelinedCommitDeliversWhenDurable: with Config.PipelineCommits, RunBatch returns once
// the batch is applied, the next batch reads its state, and the batch's outputs are delivered
// only after its fsync, which BatchReport.Durable awaits.
func TestPipelinedCommitDeliversWhenDurable(t *testing.T) {
	gate := newWALGate()
	st, err := state.Open("db", &state.Options{FS: errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(gate.inject)), Logger: discardLogger()})
	require(t, err)
	defer st.Close()
	sink := &collector{}
	eng := pipelinedEngine(t, st, sink)
	defer eng.Close(context.Background())
	ctx := context.Background()

	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Position: 1, Rows: rows(`{"k":"a","ops":[{"update":1},{"emit":"one"}]}`)})
	require(t, err)
	require(t, rep.Durable.Wait())
	waitDelivered(t, sink, `"one"`)

	gate.close()
	rep, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 2000, Position: 2, Rows: rows(`{"k":"a","ops":[{"update":2},{"emit":"two"}]}`)})
	require(t, err)
	<-gate.held // batch 2's sync is in flight, and stays
	if rep.Durable == nil {
		t.Fatal("a pipelined commit reports no sync to wait for")
	}
	if got := payloads(sink.take(state.OutboxOutput)); len(got) != 0 {
		t.Fatalf("delivered %v before the batch was durable", got)
	}
	if p := eng.Progress(); p.BatchID != 2 || p.Position != 2 {
		t.Fatalf("progress while the sync is in flight: %+v, want batch 2 at position 2", p)
	}
	en, _, err := st.Deployment("probe").Get([]byte(`"a"`))
	require(t, err)
	if !strings.Contains(string(en.Value), "2") {
		t.Fatalf("state while the sync is in flight: %s, want batch 2's", en.Value)
	}
	// The next batch runs on batch 2's state; its commit waits for batch 2's sync.
	next := make(chan error, 1)
	go func() {
		_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 3000, Position: 3, Rows: rows(`{"k":"a","ops":[{"emit":"three"}]}`)})
		next <- err
	}()
	gate.open(false)
	require(t, rep.Durable.Wait())
	require(t, <-next)
	require(t, eng.Close(ctx))
	waitDelivered(t, sink, `"two","three"`)
	if got := stateOf(t, newEngine(t, specFromYAML(t, probeSpec), probeWasm(t), st, sink), sink, 4000, "a"); !strings.Contains(got, `"state":2`) {
		t.Fatalf("state after the batches: %s", got)
	}
}

// TestPipelinedCommitFailedSync: when a pipelined commit's fsync fails, its outputs are never
// delivered, its Durable says so, and the next batch fails with state.ErrFailed before it
// commits anything; the store reopened (as after a crash) is at the last durable batch, and
// the same input runs again and is delivered once.
func TestPipelinedCommitFailedSync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	gate := newWALGate()
	st, err := state.Open("db", &state.Options{FS: errorfs.Wrap(mem, errorfs.InjectorFunc(gate.inject)), Logger: discardLogger()})
	require(t, err)
	sink := &collector{}
	eng := pipelinedEngine(t, st, sink)
	ctx := context.Background()
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Position: 1, Rows: rows(`{"k":"a","ops":[{"update":1},{"emit":"one"}]}`)})
	require(t, err)
	require(t, rep.Durable.Wait())
	waitDelivered(t, sink, `"one"`)
	before := eng.Progress()

	gate.close()
	in := engine.BatchInput{ProcessingTimeMs: 2000, Position: 2, Rows: rows(`{"k":"a","ops":[{"update":2},{"emit":"two"}]}`)}
	rep, err = eng.RunBatch(ctx, in)
	require(t, err)
	<-gate.held
	crashed := mem.CrashClone(vfs.CrashCloneCfg{}) // a crash before the sync ended
	gate.open(true)
	if err := rep.Durable.Wait(); !errors.Is(err, state.ErrFailed) {
		t.Fatalf("Durable.Wait after a failed sync: %v, want state.ErrFailed", err)
	}
	_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 3000, Position: 3, Rows: rows(`{"k":"a","ops":[{"emit":"three"}]}`)})
	if !errors.Is(err, state.ErrFailed) {
		t.Fatalf("the batch after a failed sync: %v, want state.ErrFailed", err)
	}
	if err := eng.Close(ctx); !errors.Is(err, state.ErrFailed) {
		t.Fatalf("Close after a failed sync: %v, want state.ErrFailed", err)
	}
	if got := payloads(sink.take(state.OutboxOutput)); len(got) != 0 {
		t.Fatalf("delivered %v after a failed sync", got)
	}
	_ = st.Close()

	st, err = state.Open("db", &state.Options{FS: crashed, Logger: discardLogger()})
	require(t, err)
	defer st.Close()
	if got, err := st.Deployment("probe").Progress(); err != nil || got != before {
		t.Fatalf("progress after the crash: %+v, %v; want %+v", got, err, before)
	}
	eng = pipelinedEngine(t, st, sink)
	defer eng.Close(ctx)
	rep, err = eng.RunBatch(ctx, in)
	require(t, err, "the batch again after reopening")
	require(t, rep.Durable.Wait())
	require(t, eng.Close(ctx))
	// "one" again too: its deletion from the outbox was not synced before the crash (at
	// least once, as after any crash; the output stream drops the duplicate by its id).
	waitDelivered(t, sink, `"one","two"`)
}
