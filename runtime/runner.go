package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// runner drives one deployment: it fetches rows from the input stream, runs micro-batches,
// acknowledges the input once a batch committed, and publishes the deployment's status.
type runner struct {
	s      *Service
	rec    natsio.Record
	spec   *Spec
	eng    *Engine
	ks     *state.Deployment
	src    *natsio.Source
	logger *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	status     Status
	lastStatus time.Time
}

// prepare builds everything a deployment needs before it starts: spec, module, streams,
// consumer and engine. Nothing of a running revision is touched, so a refused redeploy leaves
// it running.
func (s *Service) prepare(ctx context.Context, rec natsio.Record) (*runner, error) {
	spec, err := specFromRecord(rec)
	if err != nil {
		return nil, err
	}
	wasm, err := s.reg.GetModule(ctx, rec.ModuleDigest) // verifies the bytes' SHA-256
	if err != nil {
		return nil, fmt.Errorf("loading module %s: %w", rec.ModuleDigest, err)
	}
	inStream, err := natsio.EnsureStream(ctx, s.js, spec.Input.Stream, natsio.StreamName(spec.Name+"_IN"), spec.Input.Subjects, 0)
	if err != nil {
		return nil, fmt.Errorf("input stream: %w", err)
	}
	if _, err := natsio.EnsureStream(ctx, s.js, spec.Output.Stream, natsio.StreamName(spec.Name+"_OUT"), []string{spec.Output.Subject}, outputDupWindow); err != nil {
		return nil, fmt.Errorf("output stream: %w", err)
	}
	if _, err := natsio.EnsureStream(ctx, s.js, spec.DeadLetter.Stream, natsio.StreamName(spec.Name+"_DLQ"), []string{spec.DeadLetter.Subject}, outputDupWindow); err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	if spec.Late.Subject != "" {
		if _, err := natsio.EnsureStream(ctx, s.js, spec.Late.Stream, natsio.StreamName(spec.Name+"_LATE"), []string{spec.Late.Subject}, outputDupWindow); err != nil {
			return nil, fmt.Errorf("late stream: %w", err)
		}
	}
	src, err := natsio.NewSource(ctx, s.js, inStream, consumerName(spec.Name), spec.Input.Subjects)
	if err != nil {
		return nil, fmt.Errorf("input consumer: %w", err)
	}
	logger := s.logger.With("deployment", spec.Name)
	s.mu.Lock()
	store := s.store
	s.mu.Unlock()
	pub := natsio.NewPublisher(s.js, natsio.Subjects{Output: spec.Output.Subject, DeadLetter: spec.DeadLetter.Subject, Late: spec.Late.Subject}).
		WithInstance(store.ID())
	eng, err := s.rt.NewEngine(ctx, EngineConfig{Spec: spec, Wasm: wasm, Store: store, Sink: pub, Logger: s.logger})
	if err != nil {
		return nil, err
	}
	r := &runner{s: s, rec: rec, spec: spec, eng: eng, src: src, logger: logger, done: make(chan struct{})}
	r.status = Status{Name: spec.Name, State: StatusRunning, ModuleDigest: rec.ModuleDigest, DeployedAt: rec.DeployedAt, StartedAt: time.Now(), Owner: store.ID()}
	r.ks = store.Deployment(spec.Name)
	return r, nil
}

// outputDupWindow is the duplicate window of the streams groupstate publishes to: a
// redelivery of the outbox within it is dropped by JetStream (exactly-once for consumers).
const outputDupWindow = 10 * time.Minute

func consumerName(deployment string) string { return "groupstate-" + deployment }

func specFromRecord(rec natsio.Record) (*Spec, error) {
	var spec Spec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return nil, fmt.Errorf("%w: stored spec: %v", ErrInvalidSpec, err)
	}
	spec.EnsureDefaults()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &spec, nil
}

func (r *runner) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	go r.loop(ctx)
}

// stop ends the loop after the batch in flight and closes the engine.
func (r *runner) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	r.eng.Close(context.Background())
}

// failed tells whether the deployment stopped by an error (on_error: fail, a failed store).
func (r *runner) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status.State == StatusFailed
}

func (r *runner) setError(err error) {
	r.mu.Lock()
	r.status.Error = err.Error()
	r.status.LastError, r.status.LastErrorAt = err.Error(), time.Now()
	r.mu.Unlock()
	r.publishStatus(context.Background(), true)
}

// loop is the deployment's micro-batch loop. Fetching runs ahead of it (see prefetch), so the
// next batch's rows arrive while the current batch runs, and acknowledging input runs beside
// it (see acker).
func (r *runner) loop(ctx context.Context) {
	defer close(r.done)
	defer r.publishStatus(context.Background(), true)
	work := context.WithoutCancel(ctx) // a batch in flight finishes even when stopping
	acks := startAcker(r.src, r.logger)
	defer acks.stop() // after the fetcher stopped (deferred below, so it runs first)
	fctx, stopFetching := context.WithCancel(ctx)
	fetched, fetcherDone := r.prefetch(fctx)
	defer func() {
		// The fetcher ends before the runner counts as stopped, so a redeploy's new runner
		// never shares the consumer with it.
		stopFetching()
		<-fetcherDone
	}()
	var pending []natsio.Msg // fetched, not yet committed
	noData := false
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if len(pending) == 0 && !noData {
			var f fetchResult
			select {
			case f = <-fetched:
			case <-ctx.Done():
				return
			}
			if f.err != nil {
				if ctx.Err() != nil {
					return
				}
				r.fault(ctx, fmt.Errorf("fetching input: %w", f.err), &backoff)
				continue
			}
			pending = f.msgs
		}
		rep, last, err := r.runBatch(work, pending)
		if err != nil {
			if errors.Is(err, state.ErrFailed) {
				r.fail(err)
				r.s.signalStoreFailed()
				return
			}
			if errors.Is(err, ErrKeyFailed) {
				r.fail(err) // on_error: fail stops the deployment; nothing of the batch committed
				return
			}
			r.fault(ctx, err, &backoff)
			continue // the same rows again
		}
		if last != nil {
			acks.ack(*last)
		}
		pending = nil
		noData = rep.NeedsNoDataBatch
		backoff = 100 * time.Millisecond
		r.record(rep)
		r.s.cfg.Metrics.batch(r.spec.Name, rep)
		r.publishStatus(work, false)
	}
}

// fetchResult is one fetch of the input: up to Trigger.MaxRows messages, or an error.
type fetchResult struct {
	msgs []natsio.Msg
	err  error
}

// prefetch fetches input ahead of the batch loop, one fetch at a time, until ctx ends: while
// a batch runs, the next fetch is in flight or waiting in the channel (at most two batches of
// rows are held, the running one and the next). Order is kept (one goroutine fetches, the
// channel is FIFO), and nothing is acknowledged here: rows fetched but never run are
// redelivered after a restart, and rows at or before the committed position are skipped.
// After a fetch error it fetches again once the loop has taken the error, so it retries at
// most once ahead of the loop's backoff.
func (r *runner) prefetch(ctx context.Context) (<-chan fetchResult, <-chan struct{}) {
	out := make(chan fetchResult)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			msgs, err := r.src.Fetch(ctx, r.spec.Trigger.MaxRows, r.spec.Trigger.Interval.Std())
			select {
			case out <- fetchResult{msgs: msgs, err: err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, done
}

// runBatch runs one batch of msgs (possibly none), skipping rows at or before the committed
// position (redeliveries after a crash). It returns the last message, to acknowledge.
func (r *runner) runBatch(ctx context.Context, msgs []natsio.Msg) (*BatchReport, *natsio.Msg, error) {
	pos := r.eng.Progress().Position
	rows := make([]Row, 0, len(msgs))
	var last *natsio.Msg
	var maxSeq uint64
	for i := range msgs {
		m := &msgs[i]
		last = m
		if m.Sequence <= pos {
			continue
		}
		rows = append(rows, Row{Data: m.Data, Subject: m.Subject, Sequence: m.Sequence})
		maxSeq = max(maxSeq, m.Sequence)
	}
	in := BatchInput{ProcessingTimeMs: timeouts.UnixMs(r.s.cfg.Clock.Now()), Rows: rows, Position: maxSeq}
	rep, err := r.eng.RunBatch(ctx, in)
	return rep, last, err
}

func (r *runner) fault(ctx context.Context, err error, backoff *time.Duration) {
	r.logger.Error("batch failed; retrying", "err", err, "in", *backoff)
	r.setError(err)
	select {
	case <-ctx.Done():
	case <-time.After(*backoff):
	}
	*backoff = min(2**backoff, 10*time.Second)
}

func (r *runner) fail(err error) {
	r.logger.Error("deployment stopped by an error", "err", err)
	r.mu.Lock()
	r.status.State = StatusFailed
	r.status.Error = err.Error()
	r.status.LastError, r.status.LastErrorAt = err.Error(), time.Now()
	r.mu.Unlock()
}

// record adds a batch report to the status counters.
func (r *runner) record(rep *BatchReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.status
	st.Error = ""
	if rep.Skipped {
		return
	}
	st.Batches++
	st.RowsIn += int64(rep.RowsIn)
	st.LateRows += int64(rep.LateRows)
	st.DeadLetters += int64(rep.DeadLetters)
	st.TimeoutsFired += int64(rep.TimeoutCalls)
	st.Emitted += int64(rep.Emitted)
	st.LastBatchID = rep.BatchID
	st.LastBatchMs = float64(rep.Duration.Microseconds()) / 1000
	st.WatermarkMs = rep.WatermarkMs
	st.LastBatchAt = time.Now()
}

// publishStatus writes the status document, at most once a second unless forced.
func (r *runner) publishStatus(ctx context.Context, force bool) {
	r.mu.Lock()
	if !force && time.Since(r.lastStatus) < time.Second {
		r.mu.Unlock()
		return
	}
	r.lastStatus = time.Now()
	st := r.status
	r.mu.Unlock()
	p := r.eng.Progress()
	st.StateKeys, st.TimerKeys, st.Position = p.Keys, p.TimerKeys, p.Position
	if r.spec.EventTime != nil {
		st.WatermarkMs = p.WatermarkMs
	}
	if n, err := r.src.Pending(ctx); err == nil {
		st.InputLag = int64(n)
	}
	if n, err := r.ks.DiskUsage(); err == nil {
		st.StateBytes = int64(n)
	}
	st.UpdatedAt = time.Now()
	r.s.cfg.Metrics.status(&st, r.spec.EventTime != nil)
	r.s.putStatus(ctx, &st)
}
