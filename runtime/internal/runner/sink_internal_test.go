package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// TestPipelinedDeliveryKeepsOrder drives an engine with the NATS sink, whose deliveries are
// sent after a batch commits and awaited after the next one commits. When the output stream
// disappears, a batch's delivery fails only once the next batch has committed: that batch's
// outputs must then not be sent, no further batch may run until the outbox is delivered, and
// once the stream is back every output arrives exactly once, in order.
func TestPipelinedDeliveryKeepsOrder(t *testing.T) {
	env := testutil.StartJetStream(t)
	ctx := context.Background()
	outStream := jetstream.StreamConfig{Name: "PIPE_OUT", Subjects: []string{"pipe.out"}, Duplicates: time.Minute}
	_, err := env.JS.CreateStream(ctx, outStream)
	testutil.Require(t, err)
	st, err := state.Open(t.TempDir(), &state.Options{Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	defer st.Close()
	sp, err := spec.ParseSpec([]byte("name: probe\nkey: {field: k}\ntimeout: processing_time\n"))
	testutil.Require(t, err)
	rt, err := engine.New(engine.Options{CacheDir: testutil.CompileCacheDir(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	defer rt.Close(ctx)
	sink := publisherSink{output.NewPublisher(env.JS, output.Subjects{Output: "pipe.out", DeadLetter: "pipe.dlq"})}
	eng, err := rt.NewEngine(ctx, engine.Config{Spec: sp, Wasm: testutil.ReadFile(t, "../../engine/testdata/probe/probe.wasm"), Store: st, Sink: sink})
	testutil.Require(t, err)
	defer eng.Close(ctx)
	emit := func(pos uint64, v int) engine.BatchInput {
		return engine.BatchInput{ProcessingTimeMs: int64(pos) * 1000, Position: pos, Rows: []engine.Row{{Data: fmt.Appendf(nil, `{"k":"a","ops":[{"emit":%d}]}`, v)}}}
	}
	_, err = eng.RunBatch(ctx, emit(1, 1))
	testutil.Require(t, err)
	_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1500}) // skipped: finishes batch 1's delivery
	testutil.Require(t, err)
	testutil.Require(t, env.JS.DeleteStream(ctx, "PIPE_OUT"))

	_, err = eng.RunBatch(ctx, emit(2, 2)) // sent to no stream: its acknowledgements fail
	testutil.Require(t, err)
	_, err = eng.RunBatch(ctx, emit(3, 3)) // commits, finds batch 2 undelivered, sends nothing
	testutil.Require(t, err, "a failed delivery is not an error of the batch that finds it")
	before, _ := st.Deployment("probe").Progress()
	if _, err := eng.RunBatch(ctx, emit(4, 4)); !errors.Is(err, engine.ErrDeliveryPending) {
		t.Fatalf("batch 4 with batches 2 and 3 undelivered: err = %v, want ErrDeliveryPending", err)
	}
	if after, _ := st.Deployment("probe").Progress(); after != before {
		t.Fatalf("a batch ran while outputs were pending: %+v -> %+v", before, after)
	}

	_, err = env.JS.CreateStream(ctx, outStream)
	testutil.Require(t, err)
	_, err = eng.RunBatch(ctx, emit(4, 4)) // delivers 2 and 3, runs 4 and sends it
	testutil.Require(t, err)
	testutil.Require(t, eng.Close(ctx)) // awaits batch 4's delivery
	s, err := env.JS.Stream(ctx, "PIPE_OUT")
	testutil.Require(t, err)
	info, err := s.Info(ctx)
	testutil.Require(t, err)
	var got []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		testutil.Require(t, err)
		got = append(got, string(m.Data))
	}
	if strings.Join(got, ",") != "2,3,4" {
		t.Fatalf("output stream holds %v, want [2 3 4] (1 went with the deleted stream)", got)
	}
	var left int
	testutil.Require(t, st.Deployment("probe").Outbox(func(state.OutboxEntry) error { left++; return nil }))
	if left != 0 {
		t.Fatalf("%d entries left in the outbox", left)
	}
}
