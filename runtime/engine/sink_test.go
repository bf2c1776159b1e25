package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// pipeSink is a PipelinedSink that is not NATS: it keeps a log of the engine's calls, each
// with the batch the store had committed at that moment, so the test sees when the engine
// calls what. Start returns a delivery whose Wait returns the outcome the test released it
// with (release), and fails the test if the engine waits on one the test has not released:
// the engine calls Wait on the goroutine that runs RunBatch or Close, so no Wait can block.
type pipeSink struct {
	t          *testing.T
	dep        *state.Deployment
	log        []string
	deliveries []*pipeDelivery // in Start order
	deliverErr error           // what Deliver returns
}

type pipeDelivery struct {
	s       *pipeSink
	batch   uint64
	outcome chan error
}

// committed is the id of the store's last committed batch.
func (s *pipeSink) committed() uint64 {
	p, err := s.dep.Progress()
	require(s.t, err)
	return p.BatchID
}

func describe(entries []state.OutboxEntry) string {
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", e.ID, e.Payload)
	}
	return b.String()
}

func (s *pipeSink) Deliver(_ context.Context, _ string, entries []state.OutboxEntry) error {
	line := fmt.Sprintf("deliver %s (committed %d)", describe(entries), s.committed())
	if s.deliverErr != nil {
		line += " fails"
	}
	s.log = append(s.log, line)
	return s.deliverErr
}

func (s *pipeSink) Start(_ context.Context, _ string, entries []state.OutboxEntry) engine.Delivery {
	d := &pipeDelivery{s: s, batch: entries[0].ID.BatchID, outcome: make(chan error, 1)}
	s.log = append(s.log, fmt.Sprintf("start %s (committed %d)", describe(entries), s.committed()))
	s.deliveries = append(s.deliveries, d)
	return d
}

func (d *pipeDelivery) Wait(context.Context) error {
	s := d.s
	select {
	case err := <-d.outcome:
		line := fmt.Sprintf("wait %d (committed %d)", d.batch, s.committed())
		if err != nil {
			line += " fails"
		}
		s.log = append(s.log, line)
		return err
	default:
		s.t.Errorf("the engine waits for the delivery of batch %d, which the test did not release", d.batch)
		return errors.New("not released")
	}
}

// release sets the outcome of the last delivery started.
func (s *pipeSink) release(err error) {
	s.t.Helper()
	if len(s.deliveries) == 0 {
		s.t.Fatal("no delivery started")
	}
	s.deliveries[len(s.deliveries)-1].outcome <- err
}

// take returns and forgets the log.
func (s *pipeSink) take() string {
	l := strings.Join(s.log, "\n")
	s.log = nil
	return l
}

// TestPipelinedSink: the engine's delivery contract with a PipelinedSink of its own (not
// NATS). A batch's entries are started after its commit, and their delivery is awaited after
// the next batch committed, when a no-data batch is skipped, or at Close. Order is kept: after
// a failed Wait nothing more is started; the next RunBatch first delivers the whole outbox
// again with Deliver, returning ErrDeliveryPending and running no batch while that fails.
func TestPipelinedSink(t *testing.T) {
	st := openStore(t, "")
	sp := specFromYAML(t, probeSpec)
	sink := &pipeSink{t: t, dep: st.Deployment(sp.Name)}
	eng, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: probeWasm(t), Store: st, Sink: sink})
	require(t, err)
	defer eng.Close(context.Background())
	ctx := context.Background()
	emit := func(at int64, vals ...int) (*engine.BatchReport, error) {
		var in []string
		for _, v := range vals {
			in = append(in, fmt.Sprintf(`{"k":"k%d","ops":[{"emit":%d}]}`, v, v))
		}
		return eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: at, Rows: rows(in...)})
	}
	step := func(what, want string) {
		t.Helper()
		if got := sink.take(); got != want {
			t.Fatalf("%s: the sink saw\n%s\nwant\n%s", what, got, want)
		}
	}

	_, err = emit(1000, 1, 2)
	require(t, err)
	step("batch 1", "start 1.0=1 1.1=2 (committed 1)")

	sink.release(errors.New("stream unavailable"))
	_, err = emit(2000, 3)
	require(t, err, "a failed delivery after the commit is not an error of the batch")
	step("batch 2 after batch 1's delivery failed", "wait 1 (committed 2) fails")

	sink.deliverErr = errors.New("still unavailable")
	for range 2 {
		if _, err := emit(3000, 4); !errors.Is(err, engine.ErrDeliveryPending) {
			t.Fatalf("batch 3 while the outbox cannot be delivered: err = %v, want ErrDeliveryPending", err)
		}
		step("batch 3 while Deliver fails", "deliver 1.0=1 1.1=2 2.0=3 (committed 2) fails")
	}

	sink.deliverErr = nil
	_, err = emit(3000, 4)
	require(t, err)
	step("batch 3", "deliver 1.0=1 1.1=2 2.0=3 (committed 2)\nstart 3.0=4 (committed 3)")

	sink.release(nil)
	_, err = emit(4000, 5)
	require(t, err)
	step("batch 4", "wait 3 (committed 4)\nstart 4.0=5 (committed 4)")

	sink.release(nil)
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 5000})
	require(t, err)
	if !rep.Skipped {
		t.Fatalf("no-data batch with nothing to do: %+v", rep)
	}
	step("skipped no-data batch", "wait 4 (committed 4)")

	_, err = emit(6000, 6)
	require(t, err)
	step("batch 5", "start 5.0=6 (committed 5)")
	sink.release(nil)
	require(t, eng.Close(ctx))
	step("Close", "wait 5 (committed 5)")

	var left []state.OutboxEntry
	require(t, sink.dep.Outbox(func(e state.OutboxEntry) error { left = append(left, e); return nil }))
	if len(left) != 0 {
		t.Fatalf("outbox after every delivery succeeded: %s", describe(left))
	}
}
