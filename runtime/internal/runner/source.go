package runner

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/history"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/timeouts"
)

// batchSource is where a runner's loop takes its batches from: the live input (liveSource)
// or, for a shadow, its primary's recorded batches (shadowSource). The loop runs what next
// returns, tells committed once it committed, and closes the source when it ends; publishStatus
// asks pending from any goroutine. A source is made with its runner (newRunner, for Build) and, except
// pending, used by the runner's loop only.
type batchSource interface {
	// next waits for the next batch to run and returns it, or another outcome for the loop
	// (see outcome). backoff is the loop's retry delay, which a failed fetch doubles (see
	// runner.fault). A batch that failed is returned again by the next call.
	next(ctx, batchCtx context.Context, backoff *time.Duration) (batch, outcome)
	// committed tells that the last batch next returned committed with report rep: the
	// source acknowledges its input (the live input in the background, see acker; a shadow's
	// on ctx) and moves past it.
	committed(ctx context.Context, rep *engine.BatchReport)
	// pending is how many messages the source's consumer holds after its ack floor and the
	// source has not committed: not delivered yet, or fetched and not run (the status's input
	// lag).
	pending(ctx context.Context) (uint64, error)
	// close ends the source's prefetch and closes what it reads; the loop calls it as it ends.
	close()
}

// outcome is what the loop does after next returned.
type outcome int

const (
	runIt      outcome = iota // run the batch returned
	stopLoop                  // the loop ends: its context ended, or the runner stopped (the status tells why)
	drainAsked                // a drain was requested (batch.drain takes the reply): the source's prefetch stopped
	promoted                  // the shadow was promoted: the service runs the deployment again as a primary
)

// batch is a batch next returned: the engine's input, and the message to acknowledge once it
// committed; or err, when the input could not be read (the loop takes it as the batch's
// failure). drain is the reply of a drain request (outcome drainAsked).
type batch struct {
	in    engine.BatchInput
	last  *input.Msg
	err   error
	drain chan<- drainResult
}

// feed is a source's prefetch of its runner's consumer (r.src), which it starts, stops and
// heals. Used by the loop only.
type feed struct {
	r    *Runner
	f    *fetcher      // nil: stopped
	poll time.Duration // how long a fetch waits for its first row (see idlePoll)
	// topUp has a result fetched while the loop ran a batch topped up with the rows that
	// arrived since, when the loop takes it (see prefetch): the live input's.
	topUp bool
	// acks acknowledges the live input in the background (nil until its first batch
	// committed, and for a shadow, which acknowledges on the loop).
	acks *acker
}

// flushAcks waits for the acknowledgements asked for, if any: before the consumer is
// replaced, and as the source closes.
func (fd *feed) flushAcks() {
	if fd.acks != nil {
		fd.acks.flush()
	}
}

// Start starts the prefetch, unless it runs.
func (fd *feed) start(ctx context.Context) {
	if fd.f == nil {
		fd.f = fd.r.startFetcher(ctx, fd.poll, fd.topUp)
	}
}

// Stop ends the prefetch and waits for it: afterwards nothing uses r.src.
func (fd *feed) stop() {
	if fd.f != nil {
		fd.f.stop()
		fd.f = nil
	}
}

// event is what woke a loop waiting for rows (see feed.wait).
type event int

const (
	gotRows      event = iota // a fetch returned rows (maybe none)
	gotDrain                  // a drain request: the prefetch stopped
	gotWatermark              // another partition's record may have moved the watermark
	gotRetry                  // a fetch failed (reported, healed when the input was gone): wait again
	gotStop                   // ctx ended
	gotWake                   // the wake-up asked for came: something may be due without input
)

// wait waits for the prefetch's next fetch, a drain request, a move of the shared
// watermark, or wake (nil: none). A failed fetch goes to the status with backoff (see
// runner.fault); after a fetch that found the consumer or the input stream gone it stops the
// prefetch, re-creates them (see runner.heal) and starts again on the new consumer.
func (fd *feed) wait(ctx context.Context, backoff *time.Duration, wake <-chan time.Time) (event, []input.Msg, chan drainResult) {
	r := fd.r
	var res fetchResult
	fd.f.ready()
	select {
	case res = <-fd.f.out:
	case reply := <-r.drainReq:
		fd.stop() // no more input: the rows not run yet stay in the stream
		return gotDrain, nil, reply
	case <-r.watermarkMoved():
		fd.f.unready()
		return gotWatermark, nil, nil
	case <-wake:
		fd.f.unready()
		return gotWake, nil, nil
	case <-ctx.Done():
		return gotStop, nil, nil
	}
	if res.err == nil {
		return gotRows, res.msgs, nil
	}
	if ctx.Err() != nil {
		return gotStop, nil, nil
	}
	if input.Gone(res.err) {
		// The consumer or the input stream was deleted: no fetch can succeed again. Stop
		// the fetcher, re-create them, and fetch from the new consumer.
		fd.stop()
		fd.flushAcks() // none reaches the consumer that replaces this one
		r.heal(ctx, fmt.Errorf("fetching input: %w", res.err), backoff)
		fd.start(ctx)
		return gotRetry, nil, nil
	}
	r.fault(ctx, fmt.Errorf("fetching input: %w", res.err), backoff)
	return gotRetry, nil, nil
}

// liveSource is the batchSource of a deployment reading its input: batches of the fetched
// rows, at most trigger.max_bytes each, and no-data batches only when one has something to
// do: a processing-time timeout or a TTL is due (engine.Engine.Due), the partitions' shared
// watermark moves this one's (see watermark.go), or the engine asks for one. An idle
// deployment runs no batch: its fetch waits (idlePoll) and its loop sleeps until the next
// due time. Used by the loop only.
type liveSource struct {
	feed
	fetched []input.Msg // fetched, not yet committed
	rest    []input.Msg // pending after the batch returned last
	last    *input.Msg  // the batch returned last's last message (nil: none)
	noData  bool        // run a batch without waiting for rows
	// unrun is len(fetched), for pending, which any goroutine may ask: rows fetched (out of
	// the consumer's NumPending) that no committed batch ran yet.
	unrun atomic.Int64
	// quiet tells that the last fetch waited idlePoll and brought nothing: the consumer had
	// no row for the runner then, and pending answers without asking the server.
	quiet atomic.Bool
	timer *time.Timer // the wake-up of due (nil until first needed)
	// busyAt is when the source last started or a batch last did something (not skipped);
	// released tells that the engine's module instances were released since (see
	// releaseIdle).
	busyAt   time.Time
	released bool
}

var _ batchSource = (*liveSource)(nil)

func (l *liveSource) next(ctx, batchCtx context.Context, backoff *time.Duration) (batch, outcome) {
	l.start(ctx)
	if l.busyAt.IsZero() {
		l.busyAt = time.Now()
	}
	for ctx.Err() == nil {
		if len(l.fetched) == 0 && !l.noData {
			now, wake := l.due()
			ev, msgs, reply := l.wait(ctx, backoff, wake)
			switch ev {
			case gotDrain:
				return batch{drain: reply}, drainAsked
			case gotStop:
				return batch{}, stopLoop
			case gotWatermark:
				// When another partition's max event time moves this partition's watermark,
				// a no-data batch commits it (and the next fires the timeouts it passed),
				// though no row comes. The fetch in flight is taken next time.
				l.noData = l.r.watermarkAhead()
				continue
			case gotWake:
				if _, owed := l.r.report.owedIn(); owed {
					l.r.publishStatus(ctx, false) // the put the throttle refused (see due)
				}
				l.noData = now // else the time due came: due looks again
				continue
			case gotRetry:
				continue
			}
			l.quiet.Store(len(msgs) == 0)
			if len(msgs) == 0 {
				l.r.idle(ctx) // a fetch that waited idlePoll for nothing: no batch
				l.releaseIdle(ctx)
				continue
			}
			l.fetched = append(l.fetched, msgs...)
			l.unrun.Store(int64(len(l.fetched)))
		}
		var msgs []input.Msg
		msgs, l.rest = cutBatch(l.fetched, int(l.r.spec.Trigger.MaxBytes))
		return l.batch(msgs), runIt
	}
	return batch{}, stopLoop
}

// batch makes the batch of msgs (possibly none), skipping rows at or before the committed
// position (redeliveries after a crash).
func (l *liveSource) batch(msgs []input.Msg) batch {
	r := l.r
	pos := r.eng.Progress().Position
	rows := make([]engine.Row, 0, len(msgs))
	var last *input.Msg
	var maxSeq uint64
	for i := range msgs {
		m := &msgs[i]
		last = m
		if m.Sequence <= pos {
			continue
		}
		// The subject it was published on, and its input (history.Row makes replay's rows too).
		row, err := history.Row(r.spec, r.inputOf, input.StoredMsg{Subject: m.Subject, Sequence: m.Sequence, Header: m.Header, Data: m.Data})
		if err != nil {
			return batch{err: err} // the inputs stream sources nothing else (input.EnsureInputsStream)
		}
		rows = append(rows, row)
		maxSeq = max(maxSeq, m.Sequence)
	}
	now := r.env.Clock.Now()
	if len(rows) > 0 {
		r.lastRowAt = now // the partition is not idle for the batch's own watermark
	}
	l.last = last
	return batch{in: engine.BatchInput{ProcessingTimeMs: timeouts.UnixMs(now), Rows: rows, Position: maxSeq}, last: last}
}

// idlePoll is how long a fetch waits for the first row when none is there (its pull
// request's expiry; a row arriving meanwhile ends the wait at once), and with it how often an
// idle runner wakes to take a due snapshot (see Runner.idle). It is
// the trigger interval when that is longer. A status heartbeat (client.StatusHeartbeat): a
// pull request costs the server and the client a subscription, a request and its expiry, and
// 100 idle deployments polling every 2 s took 2.4% of a core against 1.7% every 5 s
// (docs/performance.md, "Idle cost"); a request lost on the way (a reconnect) ends after it
// and pullGrace, and the next takes the rows.
const idlePoll = 5 * time.Second

// instanceIdle is how long a deployment goes without a batch that does something before its
// engine releases its module instances (engine.Engine.ReleaseInstances): the next batch with
// calls starts one again, which costs it the module's initialization.
const instanceIdle = 30 * time.Second

// releaseIdle releases the engine's module instances once the deployment has idled
// instanceIdle, once per idle period.
func (l *liveSource) releaseIdle(ctx context.Context) {
	if l.released || time.Since(l.busyAt) < instanceIdle {
		return
	}
	l.released = true
	if n := l.r.eng.ReleaseInstances(ctx); n > 0 {
		l.r.logger.Debug("idle: module instances released", "instances", n, "idle_for", time.Since(l.busyAt).Round(time.Second))
	}
}

// due tells whether a batch without input has something to do now (now: then wake comes
// after the trigger interval, and the batch runs unless rows came first, as a batch closes
// after the interval) and, if not, what wakes the loop to ask again (nil: only input, a drain
// or the shared watermark): the time the engine's next processing-time timeout or TTL is due
// (by the runner's clock), and for a partition that shares its watermark the trigger
// interval, since the others' records count as idle after a while, which moves the bound
// without any record changing; and when a status put refused by the throttle is owed, the
// time the throttle lets it be made (next makes it).
func (l *liveSource) due() (now bool, wake <-chan time.Time) {
	r := l.r
	interval := r.spec.Trigger.Interval.Std()
	if r.wm != nil {
		r.republishWatermark()
		if r.watermarkAhead() {
			return true, l.wakeIn(interval)
		}
	}
	at, ok, err := r.eng.Due()
	if err != nil {
		r.logger.Debug("reading when the next timeout is due; running a batch", "err", err)
		return true, l.wakeIn(interval) // the batch meets the error, or does what is due
	}
	wait := time.Duration(-1)
	if ok {
		t := timeouts.UnixMs(r.env.Clock.Now())
		if at <= t {
			return true, l.wakeIn(interval)
		}
		wait = time.Duration(min(at-t, int64(time.Duration(1<<62)/time.Millisecond))) * time.Millisecond
	}
	if r.wm != nil && (wait < 0 || interval < wait) {
		wait = interval
	}
	if d, owed := r.report.owedIn(); owed && (wait < 0 || d < wait) {
		wait = d // a status put the throttle refused: made when it lets (see next)
	}
	if wait < 0 {
		return false, nil
	}
	return false, l.wakeIn(wait)
}

// wakeIn sets the source's timer to d and returns its channel.
func (l *liveSource) wakeIn(d time.Duration) <-chan time.Time {
	if l.timer == nil {
		l.timer = time.NewTimer(d)
	} else {
		l.timer.Reset(d)
	}
	return l.timer.C
}

func (l *liveSource) committed(_ context.Context, rep *engine.BatchReport) {
	if l.last != nil {
		if l.acks == nil {
			l.acks = l.r.startAcker()
		}
		l.acks.ack(*l.last) // in the background: the loop goes on to the next batch
	}
	l.fetched, l.last = l.rest, nil // what did not fit trigger.max_bytes runs next, before another fetch
	l.unrun.Store(int64(len(l.fetched)))
	l.noData = rep.NeedsNoDataBatch
	if !rep.Skipped {
		l.busyAt, l.released = time.Now(), false
	}
}

// pending counts the consumer's messages not delivered yet and those fetched but not run by
// a committed batch: fetched rows wait too, and a lag of 0 while they do would hide them.
func (l *liveSource) pending(ctx context.Context) (uint64, error) {
	if l.quiet.Load() && l.unrun.Load() == 0 {
		// Idle: its last fetch found nothing, and a row arriving since ends the fetch in
		// flight at once. An idle deployment's heartbeat asks the server nothing.
		return 0, nil
	}
	n, err := l.r.src.Pending(ctx)
	if err != nil {
		return 0, err
	}
	return n + uint64(l.unrun.Load()), nil
}

func (l *liveSource) close() {
	l.stop()
	if l.acks != nil {
		l.acks.stop() // every committed batch acknowledged before the runner counts as stopped
		l.acks = nil
	}
	if l.timer != nil {
		l.timer.Stop()
	}
}
