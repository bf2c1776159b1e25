package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// chunkSpec: processing-time timeouts with a watermark, so the probe reports both T and W.
const chunkSpec = `
name: chunks
module: unused.wasm
key: {field: k}
event_time: {field: ts, watermark_delay: 0s}
timeout: processing_time
output: {subject: chunks.out}
`

const chunkTimers = 95 // keys whose timeouts expire in batch 2

// chunkBatches are the steps of the chunk tests. Batch 1 gives 95 keys a state and a timeout
// at 1100 and moves the watermark to 100. Batch 2 runs at T = 5000, W = 100: five of those
// keys and a new one get rows (they are not timed out), k050 gets a row whose call fails (its
// timeout stays as it was, and fires in the next batch, not in this one), and the other 89
// keys time out; its rows move the watermark to 400.
func chunkBatches() []engine.BatchInput {
	var first []string
	for i := range chunkTimers {
		first = append(first, fmt.Sprintf(`{"k":"k%03d","ts":100,"ops":[{"update":"v"},{"dur":100}]}`, i))
	}
	second := []string{`{"k":"n1","ts":400,"ops":[{"probe":"data"}]}`}
	for i := range 5 {
		second = append(second, fmt.Sprintf(`{"k":"k%03d","ts":200,"ops":[{"probe":"data"}]}`, i))
	}
	second = append(second, `{"k":"k050","ts":300,"ops":[{"fail":"boom"}]}`)
	return []engine.BatchInput{
		{ProcessingTimeMs: 1000, Position: 1, Rows: rows(first...)},
		{ProcessingTimeMs: 5000, Position: 2, Rows: rows(second...)},
	}
}

// deliveryLog is a Sink that keeps every entry delivered (by id, once: a crash delivers some
// again) and the size of each delivery; onDeliver, when set, runs after each.
type deliveryLog struct {
	collector
	seen      map[state.OutboxID]bool
	sizes     []int
	onDeliver func()
	failAt    int // the delivery (1, 2, ...) that fails; 0: none
}

func (l *deliveryLog) Deliver(ctx context.Context, d string, entries []state.OutboxEntry) error {
	l.sizes = append(l.sizes, len(entries))
	if len(l.sizes) == l.failAt {
		return errors.New("sink is down")
	}
	var fresh []state.OutboxEntry
	for _, e := range entries {
		if !l.seen[e.ID] {
			fresh = append(fresh, e)
			l.seen[e.ID] = true
		}
	}
	err := l.collector.Deliver(ctx, d, fresh)
	if l.onDeliver != nil {
		l.onDeliver()
	}
	return err
}

func newLog() *deliveryLog { return &deliveryLog{seen: map[state.OutboxID]bool{}} }

// chunkEngine starts an engine over st whose commits carry at most chunkKeys timeout calls
// (0: the default bounds).
func chunkEngine(t *testing.T, st *state.Store, sink engine.Sink, chunkKeys int) *engine.Engine {
	t.Helper()
	cfg := engine.Config{Spec: specFromYAML(t, chunkSpec), Wasm: probeWasm(t), Store: st, Sink: sink}
	if chunkKeys > 0 {
		engine.SetChunkLimits(&cfg, chunkKeys, 1<<20)
	}
	eng, err := sharedRuntime(t).NewEngine(context.Background(), cfg)
	require(t, err)
	t.Cleanup(func() { eng.Close(context.Background()) })
	return eng
}

type probeOut struct {
	Tag, Key string
	T, WM    int64
}

func probes(t *testing.T, entries []state.OutboxEntry) []probeOut {
	t.Helper()
	out := make([]probeOut, len(entries))
	for i, e := range entries {
		require(t, json.Unmarshal(e.Payload, &out[i]), string(e.Payload))
	}
	return out
}

// checkBatch2 checks the outputs of batch 2: the data calls, then one timeout call for each
// key with an expired timeout and no rows, each once, all at T = 5000 and W = 100.
func checkBatch2(t *testing.T, out []probeOut) {
	t.Helper()
	var timedOut []string
	for _, p := range out {
		if p.T != 5000 || p.WM != 100 {
			t.Errorf("%+v: want t 5000 and wm 100, those of batch 2", p)
		}
		if p.Tag == "timeout" {
			timedOut = append(timedOut, p.Key)
		}
	}
	var want []string
	for i := 5; i < chunkTimers; i++ {
		if i != 50 {
			want = append(want, fmt.Sprintf("k%03d", i))
		}
	}
	if !slices.Equal(timedOut, want) {
		t.Fatalf("batch 2 timed out %d keys %v, want each of the %d keys without rows once, in timer order", len(timedOut), timedOut, len(want))
	}
	if len(out) != 6+len(want) {
		t.Fatalf("batch 2 emitted %d rows, want 6 data probes and %d timeouts", len(out), len(want))
	}
}

// TestTimeoutsInChunks: a batch whose expired timeouts do not fit in one commit commits them
// in chunks of at most the bound, each with its outputs (one delivery each), and its outputs
// are those of one batch: the same as with one commit, at the batch's T and W, with no key
// called twice and none that got rows timed out. The report covers the whole batch.
func TestTimeoutsInChunks(t *testing.T) {
	ctx := context.Background()
	run := func(chunkKeys int) ([]state.OutboxEntry, *engine.BatchReport, *deliveryLog, *engine.Engine) {
		sink := newLog()
		eng := chunkEngine(t, openStore(t, ""), sink, chunkKeys)
		in := chunkBatches()
		_, err := eng.RunBatch(ctx, in[0])
		require(t, err)
		sink.take(state.OutboxOutput)
		sink.sizes = nil
		rep, err := eng.RunBatch(ctx, in[1])
		require(t, err)
		return sink.take(state.OutboxOutput), rep, sink, eng
	}
	whole, wholeRep, _, _ := run(0)
	chunked, rep, sink, eng := run(10)

	if got, want := payloads(chunked), payloads(whole); !slices.Equal(got, want) {
		t.Fatalf("chunked outputs differ from those of one commit:\nchunked: %v\nwhole:   %v", got, want)
	}
	checkBatch2(t, probes(t, chunked))
	// 7 data calls and 3 timeout calls, then the other 86 timeouts by 10.
	if rep.Commits != 10 || wholeRep.Commits != 1 || rep.BatchID != 11 || rep.DataCalls != 7 || rep.TimeoutCalls != 89 ||
		rep.FailedKeys != 1 || rep.DeadLetters != 1 || rep.Emitted != 95 || rep.WatermarkMs != 400 || !rep.WatermarkAdvanced {
		t.Fatalf("report %+v", rep)
	}
	if len(sink.sizes) != 10 || slices.Max(sink.sizes) > 10 {
		t.Fatalf("deliveries of %v entries, want 10 deliveries of at most 10 (one a commit)", sink.sizes)
	}
	if p := eng.Progress(); p.Open.Active || p.WatermarkMs != 400 || p.Position != 2 {
		t.Fatalf("progress after the batch: %+v", p)
	}
	// k050's timeout, left as it was by its failed call, fires in the next batch.
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 6000})
	require(t, err)
	if out := probes(t, sink.take(state.OutboxOutput)); rep.TimeoutCalls != 1 || len(out) != 1 || out[0].Key != "k050" || out[0].T != 6000 {
		t.Fatalf("batch 3: %+v, outputs %+v", rep, out)
	}
}

// TestChunkedBatchResumesAfterCrash: a crash between the chunks of a batch (a power loss
// right after its third commit) leaves it open in the store; the next engine's first RunBatch
// finishes it at its own T and W, with the keys left (none called twice, and k050, which got
// rows, not timed out), before it runs its own input.
func TestChunkedBatchResumesAfterCrash(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewCrashableMem()
	opts := &state.Options{FS: fs, Logger: discardLogger()}
	st, err := state.Open("db", opts)
	require(t, err)
	defer st.Close()
	sink := newLog()
	eng := chunkEngine(t, st, sink, 10)
	in := chunkBatches()
	_, err = eng.RunBatch(ctx, in[0])
	require(t, err)
	sink.take(state.OutboxOutput)

	var crashed vfs.FS
	sink.onDeliver = func() {
		if len(sink.sizes) == 3 { // in the delivery of the third commit of batch 2
			crashed = fs.CrashClone(vfs.CrashCloneCfg{})
		}
	}
	_, err = eng.RunBatch(ctx, in[1])
	require(t, err)
	full := sink.take(state.OutboxOutput)
	eng.Close(ctx)

	// The crashed store, as the power loss left it: batch 2 is open after three commits.
	opts.FS = crashed
	st2, err := state.Open("db", opts)
	require(t, err)
	defer st2.Close()
	p, err := st2.Deployment("chunks").Progress()
	require(t, err)
	if !p.Open.Active || p.Open.ProcessingTimeMs != 5000 || p.Open.NextWatermarkMs != 400 || p.WatermarkMs != 100 || p.BatchID != 4 || p.Position != 2 {
		t.Fatalf("progress after the crash: %+v", p)
	}
	seen := map[state.OutboxID]bool{}
	before := map[state.OutboxID]bool{}
	var outs []state.OutboxEntry
	for _, e := range full {
		if e.ID.BatchID <= 4 {
			before[e.ID] = true
			seen[e.ID] = true
			outs = append(outs, e) // delivered before the crash
		}
	}
	sink2 := newLog()
	sink2.seen = seen // what reached the sink before the crash comes again (at least once)
	eng2 := chunkEngine(t, st2, sink2, 10)
	rep, err := eng2.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 9000})
	require(t, err)
	if rep.Resumed == nil || rep.Resumed.BatchID != 11 || rep.Resumed.Commits != 7 || rep.Resumed.TimeoutCalls != 89-23 || rep.Resumed.WatermarkMs != 400 {
		t.Fatalf("report %+v, resumed %+v; want batch 2 finished in 7 more commits", rep, rep.Resumed)
	}
	after := sink2.take(state.OutboxOutput)
	var resumed, batch3 []state.OutboxEntry
	for _, e := range after {
		if e.ID.BatchID <= 11 {
			resumed = append(resumed, e)
		} else {
			batch3 = append(batch3, e)
		}
	}
	outs = append(outs, resumed...)
	if got, want := payloads(outs), payloads(full[:len(outs)]); len(full) != len(outs) || !slices.Equal(got, want) {
		t.Fatalf("outputs with the crash differ from those without:\nwith:    %v\nwithout: %v", got, payloads(full))
	}
	checkBatch2(t, probes(t, outs))
	// Then the RunBatch's own batch (T = 9000, W = 400): k050's timeout fires.
	if out := probes(t, batch3); len(out) != 1 || out[0].Key != "k050" || out[0].T != 9000 || out[0].WM != 400 || rep.TimeoutCalls != 1 {
		t.Fatalf("the batch after the resumed one: %+v, outputs %+v", rep, out)
	}
	if p := eng2.Progress(); p.Open.Active || p.WatermarkMs != 400 {
		t.Fatalf("progress: %+v", p)
	}
	if !before[state.OutboxID{BatchID: 4}] {
		t.Fatalf("no output of the third commit was delivered before the crash: %v", before)
	}
}

// TestTimeoutChunkBytes: a chunk also stops taking timeouts when its keys and states reach the
// byte bound, so large states make smaller chunks.
func TestTimeoutChunkBytes(t *testing.T) {
	ctx := context.Background()
	sink := newLog()
	cfg := engine.Config{Spec: specFromYAML(t, chunkSpec), Wasm: probeWasm(t), Store: openStore(t, ""), Sink: sink}
	engine.SetChunkLimits(&cfg, 1000, 4096)
	eng, err := sharedRuntime(t).NewEngine(ctx, cfg)
	require(t, err)
	defer eng.Close(ctx)
	var first []string
	for i := range 30 {
		first = append(first, fmt.Sprintf(`{"k":"k%03d","ts":1,"ops":[{"update":"%s"},{"dur":100}]}`, i, strings.Repeat("x", 1000)))
	}
	_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(first...)})
	require(t, err)
	sink.sizes = nil
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 5000})
	require(t, err)
	// Each key and state is about 1008 bytes: a chunk takes timeouts until it holds 4096
	// bytes, so five of them.
	if rep.TimeoutCalls != 30 || rep.Commits != 6 || len(sink.sizes) != 6 || slices.Max(sink.sizes) != 5 {
		t.Fatalf("report %+v, deliveries %v; want 30 timeouts in 6 commits of 5", rep, sink.sizes)
	}
}

// TestChunkedBatchWaitsForDelivery: when a delivery fails between the chunks of a batch, the
// batch stops there (its input is committed; the report says it is open) rather than pile the
// rest of its outputs into the outbox; the next RunBatch delivers the outbox, finishes the
// batch at its T and W, and then runs its own input.
func TestChunkedBatchWaitsForDelivery(t *testing.T) {
	ctx := context.Background()
	sink := newLog()
	eng := chunkEngine(t, openStore(t, ""), sink, 10)
	in := chunkBatches()
	_, err := eng.RunBatch(ctx, in[0])
	require(t, err)
	sink.take(state.OutboxOutput)
	sink.sizes, sink.failAt = nil, 3
	rep, err := eng.RunBatch(ctx, in[1])
	require(t, err, "a failed delivery is not an error of the batch")
	if !rep.Open || rep.Commits != 3 || !eng.Progress().Open.Active || eng.Progress().Position != 2 {
		t.Fatalf("report %+v, progress %+v; want batch 2 open after 3 commits, its input committed", rep, eng.Progress())
	}
	rep, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 6000, Position: 3, Rows: rows(`{"k":"n2","ts":500,"ops":[{"probe":"data"}]}`)})
	require(t, err)
	if rep.Resumed == nil || rep.Resumed.Commits != 7 || rep.Resumed.BatchID != 11 || rep.BatchID != 12 || rep.DataCalls != 1 || rep.TimeoutCalls != 1 {
		t.Fatalf("report %+v, resumed %+v", rep, rep.Resumed)
	}
	out := probes(t, sink.take(state.OutboxOutput))
	checkBatch2(t, out[:len(out)-2])
	if last := out[len(out)-2:]; last[0].Key != "n2" || last[1].Key != "k050" || last[1].T != 6000 || last[1].WM != 400 {
		t.Fatalf("the batch after: %+v", last)
	}
}

// TestChunkedBatchFailsInALaterChunk: under on_error: fail, a call that fails in a later chunk
// of a batch fails the batch from that chunk on: the chunks before it stay committed (each
// commit is atomic, not the whole batch), the batch stays open with its input committed, and
// the next RunBatch goes on from the failing chunk (and fails there again, committing
// nothing, while the module fails).
func TestChunkedBatchFailsInALaterChunk(t *testing.T) {
	ctx := context.Background()
	sink := newLog()
	cfg := engine.Config{Spec: specFromYAML(t, chunkSpec+"on_error: fail\n"), Wasm: probeWasm(t), Store: openStore(t, ""), Sink: sink}
	engine.SetChunkLimits(&cfg, 10, 1<<20)
	eng, err := sharedRuntime(t).NewEngine(ctx, cfg)
	require(t, err)
	defer eng.Close(ctx)
	var first []string
	for i := range 30 {
		v := `"v"`
		if i == 20 {
			v = `{"on_timeout":[{"fail":"late boom"}]}`
		}
		first = append(first, fmt.Sprintf(`{"k":"k%02d","ts":1,"ops":[{"update":%s},{"dur":100}]}`, i, v))
	}
	_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Position: 1, Rows: rows(first...)})
	require(t, err)
	for attempt := range 2 {
		_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 5000 + int64(attempt), Position: 2, Rows: rows(`{"k":"n","ts":2,"ops":[{"emit":"n"}]}`)})
		var kerr *engine.KeyError
		if !errors.Is(err, engine.ErrKeyFailed) || !errors.As(err, &kerr) || kerr.Key != `"k20"` {
			t.Fatalf("attempt %d: err = %v, want ErrKeyFailed for k20", attempt, err)
		}
		if p := eng.Progress(); !p.Open.Active || p.BatchID != 3 || p.Position != 2 || p.Open.ProcessingTimeMs != 5000 {
			t.Fatalf("attempt %d: progress %+v; want batch 2 open after its first two chunks, its input committed", attempt, p)
		}
	}
	// The first chunk held n's data call and 9 timeout calls, the second 10.
	if out := sink.take(state.OutboxOutput); len(out) != 20 {
		t.Fatalf("%d outputs, want n's and the 19 timeouts of the two committed chunks", len(out))
	}
}
