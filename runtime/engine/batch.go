package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// RunBatch runs one micro-batch (docs/semantics.md, "A micro-batch"): it drops late rows,
// calls the handler once per key with rows, then once per key whose timeout expired and that
// got no rows, and commits state, timers, watermark, position and outbox in one synced Pebble
// batch. Then it hands the batch's outbox to the sink: a plain [Sink] gets Deliver, a
// [PipelinedSink] only Start, and the next RunBatch (or Close) awaits that delivery after its
// own commit. ctx bounds the handler's calls and the deliveries; when it is canceled, the
// guest call running is interrupted and RunBatch returns an error wrapping ctx.Err().
//
// A batch in which more timeouts expired than one commit carries ([TimeoutChunkKeys] keys,
// [TimeoutChunkBytes] bytes of keys and states) commits in chunks, each with its outputs (and
// its own batch id): the first has the data calls, the input position and the first timeout
// calls; each later one the next timeout calls, found again in the timer index, which the
// committed chunks moved them out of (every call starts with no timeout, and a timeout it sets
// does not expire in the same batch). The batch stays open in the store (Progress().Open)
// until its last chunk committed its watermark; all chunks run at its processing time and
// watermark, so its outputs are those of one batch, and the report covers them all. A batch
// left open (by a crash, an error or a failed delivery between its chunks) is finished by the
// next RunBatch, of this engine or of the next one on the store, before it runs its own input
// (BatchReport.Resumed).
//
// The batch runs at the watermark of the last commit; the watermark it computes from its
// rows' event times takes effect when it commits (docs/semantics.md, "A micro-batch":
// Watermark). On error nothing of the batch is committed and the engine is as before the
// call, watermark included, so the same input may be run again; except when the error came
// after a batch's first chunk committed: then Progress().Open is set and the input is
// committed (Progress().Position), and the next RunBatch finishes the batch, so do not run
// those rows again. A failed delivery after a commit is not an error of the batch: the entries
// stay in the outbox, and the next RunBatch delivers them before anything else, failing with
// [ErrDeliveryPending] (and running no batch) while it cannot; a chunked batch then stops
// after that chunk (BatchReport.Open) and its next chunks wait. Input over the spec's
// trigger.max_rows or trigger.max_bytes (but a single row) is refused with
// [ErrInputTooLarge].
//
// A batch of an ABI v2 (transformWithState) module runs in phases instead (docs/semantics.md,
// "transformWithState handlers"): the initial-state calls (first batch only), the data calls,
// then the timer calls of the timers expired after them, then the TTL expiry, in one commit;
// when the timers of more than [TimeoutChunkKeys] keys are expired, the report's
// NeedsNoDataBatch asks for the next batch at once.
func (e *Engine) RunBatch(ctx context.Context, in BatchInput) (*BatchReport, error) {
	if e.closed {
		return nil, ErrEngineClosed
	}
	if err := e.checkInput(in); err != nil {
		return nil, err
	}
	if in.Drain && len(in.Rows) > 0 {
		return nil, fmt.Errorf("%w: %d rows given", ErrDrainRows, len(in.Rows))
	}
	start := time.Now()
	if err := e.deliverPending(ctx); err != nil {
		// Outputs of earlier batches are still undelivered: run no new batch until they are
		// out, which keeps outputs in order and holds input back (it stays in the stream).
		return nil, fmt.Errorf("%w: %w", ErrDeliveryPending, err)
	}
	var resumed *BatchReport
	if e.progress.Open.Active {
		rep, err := e.finish(ctx, start)
		if err != nil {
			return nil, err
		}
		if rep.Open {
			return nil, fmt.Errorf("%w: batch %d (open) stopped after a failed delivery", ErrDeliveryPending, rep.BatchID)
		}
		resumed, start = rep, time.Now()
	}
	rep, err := e.run(ctx, in, start)
	if err != nil {
		return nil, err
	}
	rep.Resumed = resumed
	return rep, nil
}

// run runs in as a new batch.
func (e *Engine) run(ctx context.Context, in BatchInput, start time.Time) (*BatchReport, error) {
	if e.v2 != nil {
		return e.runV2(ctx, in, start)
	}
	b := &e.batch
	b.begin(in)
	defer b.end()

	if in.Drain {
		if err := b.drainBound(); err != nil {
			return nil, err
		}
	}
	b.groupRows(in.Rows)
	b.nextW, b.ownMax, b.recordMax = e.nextWatermark(b)
	if in.NextWatermarkMs != nil {
		b.nextW = *in.NextWatermarkMs
	}
	if err := b.addData(); err != nil {
		return nil, err
	}
	b.addInitial()
	more, err := b.addTimeouts()
	if err != nil {
		return nil, err
	}
	if len(in.Rows) == 0 && len(b.groups) == 0 && (in.Position == 0 || in.Position == e.progress.Position) && b.nextW == b.W {
		// A no-data batch with no timeout to fire changes nothing. (One whose watermark moves,
		// because the other partitions moved the shared bound, commits it: see
		// WatermarkBound.)
		return b.skipCommit(ctx, start)
	}
	return b.runChunks(ctx, in.Position, more, start)
}

// committed moves the engine on after a commit of the batch that wrote p, and delivers the
// chunk's outbox; it reports whether the delivery succeeded. Only now does the engine move
// on: its progress, and with it the watermark the next batch runs at, is what the commit
// wrote. A batch that failed before this point changed nothing of the engine, so there is
// nothing to roll back.
func (b *batch) committed(ctx context.Context, p state.Progress) (delivered bool) {
	e := b.e
	e.progress = p
	if b.inputsPending && b.nextIn != nil {
		copy(e.multi.w, b.nextIn)
		b.nextIn = nil // recorded once, by the first chunk
	}
	if b.initialApplied {
		e.initial, b.initialApplied = nil, false
	}
	e.acksUnsynced = false // the commit synced the log, acknowledgements before it included
	b.rep.BatchID = p.BatchID
	b.rep.Commits++
	if err := e.deliverCommitted(ctx, b.outbox); err != nil {
		// Committed: the entries stay in the outbox and go out before the next batch runs.
		e.pending = true
		b.rep.Undelivered = err.Error()
		e.logger.Warn("outbox delivery failed; will retry before the next batch", "batch", b.id, "err", err)
		return false
	}
	return true
}

// skipCommit ends a batch that has nothing to commit without a commit, so an idle deployment does
// not sync Pebble every trigger interval. The last batch's delivery finishes here, so an idle
// deployment's outbox empties, and its acknowledgement is synced (once: later skipped batches
// have nothing to sync).
func (b *batch) skipCommit(ctx context.Context, start time.Time) (*BatchReport, error) {
	e := b.e
	if err := e.finishInflight(ctx); err != nil {
		e.pending = true
		b.rep.Undelivered = err.Error()
		e.logger.Warn("outbox delivery failed; will retry before the next batch", "err", err)
	}
	if err := e.syncAcks(); err != nil {
		return nil, err
	}
	b.rep.BatchID, b.rep.Skipped = e.progress.BatchID, true
	return b.report(start, false), nil
}

// report completes the batch's report with what the engine's last commit left (the
// watermark the next batch runs at, the partition's max event time, the inputs' watermarks,
// whether the watermark moved) and the time since start, and returns a copy the caller owns.
// NeedsNoDataBatch is set when the watermark moved under event-time timeouts, or when more
// (timers left for another batch).
func (b *batch) report(start time.Time, more bool) *BatchReport {
	e := b.e
	b.rep.WatermarkMs = e.progress.WatermarkMs
	b.rep.MaxEventMs = e.reportedMax()
	b.reportInputs()
	b.rep.WatermarkAdvanced = e.progress.WatermarkMs > b.W
	b.rep.NeedsNoDataBatch = more || (b.rep.WatermarkAdvanced && e.rules.Mode == timeouts.EventTime)
	b.rep.Duration = time.Since(start)
	rep := b.rep
	return &rep
}

// finish runs the rest of the open batch (Progress().Open): its timeout calls left, at its
// processing time and watermark, in chunks.
func (e *Engine) finish(ctx context.Context, start time.Time) (*BatchReport, error) {
	b := &e.batch
	err := b.resume()
	defer b.end()
	if err != nil {
		return nil, err
	}
	e.logger.Info("finishing a batch left open", "batch", b.id, "processing_time_ms", b.T, "watermark_ms", b.W)
	more, err := b.addTimeouts()
	if err != nil {
		return nil, err
	}
	return b.runChunks(ctx, 0, more, start)
}

// runChunks calls the handler on the batch's groups and commits them, then, while more
// timeouts are left (more), the next chunk's. position is the first chunk's input position.
func (b *batch) runChunks(ctx context.Context, position uint64, more bool, start time.Time) (*BatchReport, error) {
	for {
		if err := b.call(ctx); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("engine: batch %d: %w", b.id, err)
		}
		p, err := b.commit(position, more)
		if err != nil {
			return nil, err
		}
		delivered := b.committed(ctx, p)
		if !more {
			break
		}
		if !delivered {
			// The next chunks wait for the outbox to be delivered (the next RunBatch), so that
			// outputs stay in order and the outbox does not grow with the rest of the batch.
			b.rep.Open = true
			break
		}
		b.next()
		if more, err = b.addTimeouts(); err != nil {
			return nil, err
		}
	}
	return b.report(start, false), nil
}

// checkInput refuses input over trigger.max_rows or trigger.max_bytes (a single row may be
// larger: no row is too large to be taken, and one over limits.max_row_bytes is
// dead-lettered).
func (e *Engine) checkInput(in BatchInput) error {
	t := e.spec.Trigger
	for i := range in.Rows {
		if r := in.Rows[i].Input; r < 0 || r >= len(e.inputs) {
			return fmt.Errorf("%w: row %d has input %d, the spec has %d", ErrUnknownInput, i, r, len(e.inputs))
		}
	}
	if len(in.Rows) > t.MaxRows {
		return fmt.Errorf("%w: %d rows, trigger.max_rows is %d", ErrInputTooLarge, len(in.Rows), t.MaxRows)
	}
	if len(in.Rows) < 2 {
		return nil
	}
	var n uint64
	for i := range in.Rows {
		n += uint64(len(in.Rows[i].Data))
	}
	if n > uint64(t.MaxBytes) {
		return fmt.Errorf("%w: %d bytes in %d rows, trigger.max_bytes is %d", ErrInputTooLarge, n, len(in.Rows), t.MaxBytes)
	}
	return nil
}

// batch is the engine's micro-batch: the work of the RunBatch in progress and the working
// memory that every RunBatch reuses, so that a batch allocates nothing per row or per group
// (the engine runs one batch at a time). It is the one owner of that memory: begin starts a
// batch on it and end drops every reference to the batch's rows, states and results while
// keeping the arrays. What outlives the batch or reaches the sink (the group keys and the
// outbox) is allocated per batch instead, in one piece each, sized from the previous batch.
type batch struct {
	e *Engine

	// Of the batch in progress (set by begin or resume):
	T, W     int64 // processing time and watermark (docs/semantics.md, "A micro-batch")
	counted  tally // what the batch's committed chunks added to the deployment's counters
	bound    int64 // timeouts before it expire (timeouts.Rules.ExpiryBound), if hasBound
	hasBound bool
	nextW    int64    // the watermark the batch commits when it closes
	maxEvt   int64    // largest event time read, late rows included; timeouts.NoEventTime if none
	man      Manifest // the chunk's manifest, when Config.Manifests (see manifest.go)
	// inMax is, for a deployment with several inputs (nil otherwise), the largest event time
	// read of each input (timeouts.NoEventTime if none), and nextIn each input's watermark
	// after the batch; inputsPending: the chunk's commit records nextIn.
	inMax, nextIn []int64
	inputsPending bool
	// ownMax is the partition's max event time with this batch's rows (Config.SharedWatermark
	// only), which the first commit records when recordMax.
	ownMax    int64
	recordMax bool
	rep       BatchReport
	// from is where in the timer index the next chunk's timeout calls start; skip holds the
	// keys that got rows in the batch and whose failed call left an expired timeout, which
	// must not be timed out in it (nil when none); newSkips those of this chunk.
	from     state.TimerPos
	skip     map[string]struct{}
	newSkips [][]byte
	scan     chunkScan
	takeFn   func(key []byte, ts int64) error // b.take

	// Of the chunk in progress (the whole batch, unless it commits in chunks):
	id    uint64 // its batch id in the store
	sb    *state.Batch
	in    []Row
	nData int // groups[:nData] are the data groups, the rest initial-state and timeout calls
	nInit int // groups[nData:nData+nInit] are initial-state calls of keys without rows (first batch only)
	// initialApplied: the chunk applies the initial state (addInitial); once it committed,
	// the engine has none left to apply.
	initialApplied bool
	keys           []byte // the chunk's group keys (Group.Key and outbox keys point into it)
	// outbox is the batch's outbox entries, recorded once, here. They copy nothing: their
	// slices point into keys, the handler's results and the input rows. commit has the
	// state batch encode them into the Pebble batch (the one copy, which is what commits),
	// and the same slice then goes to the sink, which may keep it until the next batch (a
	// PipelinedSink's delivery); hence a new slice per batch.
	outbox []state.OutboxEntry

	// Reused by every batch:
	seed     maphash.Seed
	table    []int32  // open-addressing hash of the data groups' keys: group index+1, 0 = empty
	rowGroup []int32  // per input row: its group, or -1 (dead-lettered or late)
	rowStart []int32  // per data group i: its rows are rowData[rowStart[i]:rowStart[i+1]]
	cursor   []int32  // per data group: row count, then fill position
	rowData  [][]byte // every grouped row's data, grouped (Group.Rows are sub-slices)
	rowIdx   []int32  // the input index of each rowData entry, for dead letters
	rowInput []uint32 // the Row.Input of each rowData entry (several inputs only)
	groups   []handler.Group
	prev     []state.Entry // per group, its entry before the batch
	results  []handler.Result
	vals     []byte // state values read by the batch (Group.State and prev point into it)
	keyBuf   []byte // the key of the row being read
	keyCap   int    // key bytes of the previous batch, to size the next one's
	outCap   int    // outbox entries of the previous batch
}

// begin starts the batch after the engine's last committed one.
func (b *batch) begin(in BatchInput) {
	e := b.e
	// Processing time never decreases: the batch runs at the later of the caller's clock and
	// the last committed batch's processing time (a clock stepped back, a takeover by a
	// runtime whose clock is behind).
	b.T, b.W = max(in.ProcessingTimeMs, e.progress.ProcessingTimeMs), max(e.progress.WatermarkMs, 0) // a watermark is never below 0
	b.bound, b.hasBound = e.rules.ExpiryBound(b.T, b.W)
	b.id = e.progress.BatchID + 1
	b.maxEvt = timeouts.NoEventTime
	b.ownMax, b.recordMax = timeouts.NoEventTime, false
	b.from = state.TimerPos{TimeoutMs: math.MinInt64}
	b.rep = BatchReport{BatchID: b.id, RowsIn: len(in.Rows)}
	b.counted = tally{}
	e.checkClock(in.ProcessingTimeMs, &b.rep)
	b.sb = e.ks.NewBatch(b.id)
	b.initialApplied = false
	b.inMax, b.nextIn, b.inputsPending = nil, nil, false
	if e.manifests {
		b.man = newManifest(in, e.progress) // a pass over the rows, only when recorded
	}
	if e.multi != nil {
		n := len(e.inputs)
		b.inMax, b.nextIn = make([]int64, n), make([]int64, n)
		b.rep.Inputs = make([]InputReport, n)
		for i := range b.inMax {
			b.inMax[i] = timeouts.NoEventTime
			b.rep.Inputs[i].Name = e.inputs[i].name
		}
		for _, r := range in.Rows {
			b.rep.Inputs[r.Input].RowsIn++
		}
	}
}

// checkClock compares the caller's processing time clock with the last committed batch's
// processing time and the clock of the previous RunBatch, and reports a step back in rep: how
// far behind the committed processing time the clock is (ClockBehindMs), and whether it stepped
// back since the previous batch (ClockStepBack; logged once per step, at Warn). A clock that
// stays behind after a step, moving forward, is no new step.
func (e *Engine) checkClock(clockMs int64, rep *BatchReport) {
	committed := e.progress.ProcessingTimeMs
	prev := e.lastClockMs
	e.lastClockMs = clockMs
	if clockMs < committed {
		rep.ClockBehindMs = committed - clockMs
	}
	var back int64
	switch {
	case prev != 0 && clockMs < prev:
		back = prev - clockMs // stepped back since the previous batch
	case prev == 0 && clockMs < committed:
		back = committed - clockMs // behind the last commit at the first batch (a takeover, a restart)
	}
	if back <= 0 {
		return
	}
	rep.ClockStepBack = true
	e.logger.Warn("the processing time clock stepped back; batches run at the last committed processing time until it catches up",
		"back_ms", back, "clock_ms", clockMs, "committed_processing_time_ms", committed, "behind_ms", rep.ClockBehindMs)
}

// resume starts the next chunk of the open batch (Progress().Open), with its processing time,
// watermark and the keys it must not time out.
func (b *batch) resume() error {
	e := b.e
	o := e.progress.Open
	b.T, b.W, b.nextW = o.ProcessingTimeMs, max(e.progress.WatermarkMs, 0), o.NextWatermarkMs
	b.bound, b.hasBound = e.rules.ExpiryBound(b.T, b.W)
	b.id = e.progress.BatchID + 1
	b.maxEvt = timeouts.NoEventTime
	b.ownMax, b.recordMax = timeouts.NoEventTime, false // the first chunk recorded it
	b.from = o.Next
	b.rep = BatchReport{BatchID: b.id}
	b.counted = tally{}
	b.inMax, b.nextIn, b.inputsPending = nil, nil, false
	b.man = Manifest{Continued: true, HadState: true}
	b.groups, b.nData, b.nInit, b.vals = b.groups[:0], 0, 0, b.vals[:0]
	b.sb = e.ks.NewBatch(b.id)
	err := e.ks.SkippedTimeouts(func(key []byte) error {
		if b.skip == nil {
			b.skip = map[string]struct{}{}
		}
		b.skip[string(key)] = struct{}{}
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: reading the open batch: %w", err)
	}
	return nil
}

// next starts the batch's next chunk, after the previous one committed.
func (b *batch) next() {
	b.release()
	b.id++
	b.sb = b.e.ks.NewBatch(b.id)
	b.man = Manifest{Continued: true, HadState: true, Drain: b.man.Drain}
	b.groups, b.nData, b.nInit, b.vals = b.groups[:0], 0, 0, b.vals[:0]
}

// end releases the batch: it closes the state batch and drops the references the reused
// buffers hold, so that no row, state or result is kept alive after RunBatch returns.
func (b *batch) end() {
	b.release()
	b.rep = BatchReport{}
	b.skip, b.newSkips = nil, nil
}

// release ends the chunk in progress: it closes its state batch and drops the references the
// reused buffers hold. What the sink may keep (the keys and the outbox) is dropped, not
// reused.
func (b *batch) release() {
	b.sb.Close()
	b.keyCap, b.outCap = len(b.keys), len(b.outbox)
	if cap(b.vals) > maxKeptValues {
		b.vals = nil
	}
	clear(b.rowData[:cap(b.rowData)])
	clear(b.groups[:cap(b.groups)])
	clear(b.prev[:cap(b.prev)])
	clear(b.results[:cap(b.results)])
	clear(b.newSkips)
	b.sb, b.in, b.keys, b.outbox, b.newSkips = nil, nil, nil, nil, b.newSkips[:0]
}

// commit writes the chunk's outbox and progress into its state batch and commits it: with
// more chunks to come (more) it keeps the batch open at its watermark, else it closes it with
// its next watermark. It changes nothing of the engine: the caller adopts the Progress it
// returns.
func (b *batch) commit(position uint64, more bool) (state.Progress, error) {
	if b.e.manifests {
		b.appendManifest(position, more)
	}
	b.sb.AppendOutboxes(b.outbox)
	if position == 0 {
		position = b.e.progress.Position
	}
	if b.recordMax {
		// The partition's rows are committed by the first chunk, their max event time with them.
		b.sb.SetMaxEvent(b.ownMax)
		b.recordMax = false
	}
	if b.nextIn != nil && !b.inputsPending {
		// Likewise the inputs' watermarks, which the batch's rows moved.
		b.e.multi.record(b.sb, b.e.inputs, b.nextIn)
		b.inputsPending = true
	}
	if more {
		b.sb.SetProgress(b.W, position)
		b.sb.SetOpen(state.OpenBatch{ProcessingTimeMs: b.T, NextWatermarkMs: b.nextW, Next: b.from})
		for _, k := range b.newSkips {
			b.sb.SkipTimeout(k)
		}
	} else {
		b.sb.SetProgress(b.nextW, position)
	}
	b.sb.SetProcessingTime(b.T)
	now := b.tally()
	b.sb.AddCounters(now.since(b.counted, !more))
	b.e.quar.record(b.sb)
	b.e.att.record(b.sb)
	p, err := b.sb.Commit()
	if err != nil {
		return state.Progress{}, fmt.Errorf("engine: committing batch %d: %w", b.id, err)
	}
	b.counted = now
	b.e.quar.committed()
	b.e.att.committed()
	if more {
		for _, k := range b.newSkips {
			if b.skip == nil {
				b.skip = map[string]struct{}{}
			}
			b.skip[string(k)] = struct{}{}
		}
	}
	return p, nil
}

// maxKeptValues is the most state-value bytes the engine keeps for the next batch.
const maxKeptValues = 64 << 20

// resize returns s with length n, reusing its array when it is large enough and keeping
// its first min(len(s), n) elements.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		ns := make([]T, n, n+n/4)
		copy(ns, s)
		return ns
	}
	return s[:n]
}

// keep copies key into the batch's key arena and returns the copy.
func (b *batch) keep(key []byte) []byte {
	if b.keys == nil {
		b.keys = make([]byte, 0, max(b.keyCap+b.keyCap/4, 256))
	}
	n := len(b.keys)
	b.keys = append(b.keys, key...)
	return b.keys[n:len(b.keys):len(b.keys)]
}

// find returns the index of the data group of key, or -1 and the table slot where it goes.
func (b *batch) find(key []byte) (group int, slot int) {
	t := b.table
	mask := len(t) - 1
	for p := int(maphash.Bytes(b.seed, key)) & mask; ; p = (p + 1) & mask {
		v := t[p]
		if v == 0 {
			return -1, p
		}
		if bytes.Equal(b.groups[v-1].Key, key) {
			return int(v - 1), p
		}
	}
}

// groupRows validates and groups the rows, dead-lettering those it cannot use and dropping
// late ones. It allocates nothing per row: a first pass finds each row's group (a hash table
// over the engine's buffers), a second lays the rows out group by group in one slice, of
// which each Group.Rows is a part.
func (b *batch) groupRows(rows []Row) {
	e := b.e
	b.in = rows
	dropsLate := e.rules.DropsLate()
	n := 1
	for n < 2*len(rows) {
		n <<= 1 // at most half full: a group per row at worst
	}
	b.table = resize(b.table, n)
	clear(b.table)
	b.rowGroup = resize(b.rowGroup, len(rows))
	b.groups = b.groups[:0]
	counts := b.cursor[:0]
	grouped := 0
	for j, r := range rows {
		b.rowGroup[j] = -1
		in := &e.inputs[r.Input]
		key, evt, reason, err := e.extract(r.Data, in, b.keyBuf[:0])
		if err != nil {
			b.deadLetter(nil, r, reason, err)
			continue
		}
		b.keyBuf = key
		if e.wrongPartition != nil {
			if err := e.wrongPartition(key); err != nil {
				b.deadLetter(b.keep(key), r, ReasonWrongPartition, err)
				continue
			}
		}
		if err := e.quar.check(key); err != nil {
			b.deadLetter(b.keep(key), r, ReasonQuarantined, err)
			continue
		}
		if in.timePath != nil {
			if in.aheadMs > 0 && evt > b.T && uint64(evt)-uint64(b.T) > uint64(in.aheadMs) {
				b.deadLetter(b.keep(key), r, ReasonEventTimeAhead, fmt.Errorf(
					"event time %d is %d ms ahead of the batch's processing time %d, more than event_time.max_ahead %s",
					evt, uint64(evt)-uint64(b.T), b.T, in.maxAhead))
				continue // and does not move the watermark
			}
			b.maxEvt = max(b.maxEvt, evt) // late rows count too
			if b.inMax != nil {
				b.inMax[r.Input] = max(b.inMax[r.Input], evt)
			}
			if dropsLate && timeouts.IsLate(evt, b.W) {
				b.rep.LateRows++
				if b.rep.Inputs != nil {
					b.rep.Inputs[r.Input].LateRows++
				}
				if e.spec.Late.Subject != "" {
					b.append(rowEntry(state.OutboxLate, b.keep(key), r, ReasonLate,
						fmt.Sprintf("event time %d is at or before the watermark %d", evt, b.W)))
				}
				continue
			}
		}
		i, slot := b.find(key)
		if i < 0 {
			i = len(b.groups)
			b.table[slot] = int32(i + 1)
			b.groups = append(b.groups, handler.Group{Key: b.keep(key)})
			counts = append(counts, 0)
		}
		counts[i]++
		b.rowGroup[j] = int32(i)
		grouped++
	}
	b.cursor = counts
	b.nData, b.nInit = len(b.groups), 0
	b.rowStart = resize(b.rowStart, b.nData+1)
	b.rowStart[0] = 0
	for i, c := range counts {
		b.rowStart[i+1] = b.rowStart[i] + c
		counts[i] = b.rowStart[i] // from here on, the next position of group i
	}
	b.rowData = resize(b.rowData, grouped)
	b.rowIdx = resize(b.rowIdx, grouped)
	multi := e.multi != nil
	if multi {
		b.rowInput = resize(b.rowInput, grouped)
	}
	for j, i := range b.rowGroup {
		if i >= 0 {
			p := counts[i]
			counts[i]++
			b.rowData[p] = rows[j].Data
			b.rowIdx[p] = int32(j)
			if multi {
				b.rowInput[p] = uint32(rows[j].Input)
			}
		}
	}
	for i := range b.groups {
		lo, hi := b.rowStart[i], b.rowStart[i+1]
		b.groups[i].Rows = b.rowData[lo:hi:hi]
		if multi {
			b.groups[i].Inputs = b.rowInput[lo:hi:hi]
		}
	}
}

// extract finds the canonical key and event time of a row of input in.
func (e *Engine) extract(data []byte, in *inputRule, keyBuf []byte) (key []byte, evt int64, reason string, err error) {
	if max := e.spec.Limits.MaxRowBytes; max > 0 && uint64(len(data)) > uint64(max) {
		return nil, 0, ReasonTooLarge, fmt.Errorf("row of %d bytes is over the limit of %d bytes", len(data), max)
	}
	if err := rowjson.Validate(data); err != nil {
		switch {
		case errors.Is(err, rowjson.ErrNotUTF8):
			return nil, 0, ReasonNotUTF8, errors.New("row is not valid UTF-8")
		case errors.Is(err, rowjson.ErrNotObject):
			return nil, 0, ReasonNotObject, errors.New("row is not a JSON object")
		}
		return nil, 0, ReasonInvalidJSON, errors.New("row is not valid JSON")
	}
	tok, err := rowjson.Lookup(data, in.keyPath)
	if err != nil {
		return nil, 0, ReasonMissingKey, fmt.Errorf("key field %q is missing or null", in.keyField)
	}
	key, err = rowjson.AppendCanonicalKey(keyBuf, tok)
	if err != nil {
		if k := rowjson.Kind(tok); k != rowjson.KindNumberOutOfRange {
			return nil, 0, ReasonBadKey, fmt.Errorf("key field %q is %s, not a string or number", in.keyField, k)
		}
		return nil, 0, ReasonBadKey, fmt.Errorf("key field %q is a number whose exponent is out of range", in.keyField)
	}
	if in.timePath == nil {
		return key, 0, "", nil
	}
	tok, err = rowjson.Lookup(data, in.timePath)
	if err != nil {
		return nil, 0, ReasonMissingEventTime, fmt.Errorf("event time field %q is missing or null", in.timeField)
	}
	evt, ok := rowjson.PlainInt(tok)
	if !ok {
		evt, err = timeouts.ParseEventTime(tok)
	}
	if err != nil {
		return nil, 0, ReasonBadEventTime, fmt.Errorf("event time field %q: %v", in.timeField, err)
	}
	return key, evt, "", nil
}

// addData reads the state of every key with rows.
func (b *batch) addData() error {
	b.prev = resize(b.prev, len(b.groups))
	b.vals = b.vals[:0]
	for i := range b.groups {
		if err := b.load(i); err != nil {
			return err
		}
	}
	return nil
}

// load reads group i's state into the batch's value buffer.
func (b *batch) load(i int) error {
	g := &b.groups[i]
	en, _, vals, err := b.e.ks.GetAppend(b.vals, g.Key)
	if err != nil {
		return fmt.Errorf("engine: reading state of key %s: %w", g.Key, err)
	}
	b.vals = vals
	b.prev[i] = en
	if en.HasValue {
		g.Flags |= abi.GroupStateExists
		g.State = en.Value
	}
	return nil
}

// addTimeouts adds a timeout call for the keys whose timeout expired (strictly before the
// bound of its mode) and that got no rows in this batch (docs/semantics.md, "A micro-batch":
// Timeout calls), in timer order from b.from, as many as the chunk's bounds let in: the
// chunk's keys and the bytes of their keys and states (data groups included) stay within
// chunkKeys and chunkBytes, but a chunk without data calls takes at least one. more tells
// that expired timeouts are left for a next chunk.
func (b *batch) addTimeouts() (more bool, err error) {
	if !b.hasBound {
		return false, nil
	}
	b.prev = resize(b.prev, len(b.groups))
	b.scan = chunkScan{used: len(b.keys) + len(b.vals), last: -1}
	if b.takeFn == nil {
		b.takeFn = b.take // once: a method value passed on would be allocated every batch
	}
	err = b.e.ks.ExpiredFrom(b.from, b.bound, b.takeFn)
	if err != nil && err != errChunkFull {
		return false, fmt.Errorf("engine: scanning timers: %w", err)
	}
	if b.scan.more && b.scan.last >= 0 {
		b.from = state.TimerAfter(b.scan.lastTs, b.groups[b.scan.last].Key)
	}
	return b.scan.more, nil
}

// chunkScan is the state of addTimeouts' scan of the timer index.
type chunkScan struct {
	used   int   // bytes of the chunk's keys and states
	last   int   // the group of the last timeout taken (-1: none yet)
	lastTs int64 // and its timeout
	more   bool  // the scan stopped at a timeout the chunk had no room for
}

// take is addTimeouts' scan function: it adds a timeout call for key, expired at ts, unless
// the key got rows in the batch, or stops the scan when the chunk is full.
func (b *batch) take(key []byte, ts int64) error {
	if b.nData > 0 {
		if i, _ := b.find(key); i >= 0 {
			return nil // it got rows: not timed out
		}
	}
	if b.skip != nil {
		if _, ok := b.skip[string(key)]; ok {
			return nil
		}
	}
	sc := &b.scan
	if len(b.groups) >= b.e.chunkKeys || (sc.used >= b.e.chunkBytes && len(b.groups) > 0) {
		sc.more = true
		return errChunkFull
	}
	i := len(b.groups)
	b.groups = append(b.groups, handler.Group{Key: b.keep(key), Flags: abi.GroupTimedOut})
	b.prev = resize(b.prev, i+1)
	n := len(b.vals)
	if err := b.load(i); err != nil {
		return err
	}
	sc.used += len(key) + len(b.vals) - n
	sc.last, sc.lastTs = i, ts
	return nil
}

// drainBound makes the batch fire every timeout the keys hold now (BatchInput.Drain): its
// bound passes the latest one, so that the timeouts the drained calls set again (later than
// the latest one, or behind the scan) do not fire, and the drain ends. Without a timeout mode
// there is none to fire. (A timeout at the largest int64 cannot be passed, and does not fire.)
func (b *batch) drainBound() error {
	if b.e.rules.Mode == timeouts.None {
		return nil
	}
	last, ok, err := b.e.ks.LastTimeout()
	if err != nil {
		return fmt.Errorf("engine: reading timers: %w", err)
	}
	if !ok {
		b.hasBound = false
		return nil
	}
	if last < math.MaxInt64 {
		last++
	}
	if !b.hasBound || last > b.bound {
		b.bound = last
	}
	b.hasBound = true
	return nil
}

// errChunkFull stops the timer scan of a chunk that is full.
var errChunkFull = errors.New("engine: chunk full")

// call runs the handler on every group and records the results: state changes in the state
// batch, outputs and dead letters in the batch's outbox.
func (b *batch) call(ctx context.Context) error {
	if len(b.groups) == 0 {
		return nil
	}
	b.results = resize(b.results, len(b.groups))
	results := b.results
	c := &handler.Call{ProcessingTimeMs: b.T, WatermarkMs: b.W, Groups: b.groups}
	ctx, err := b.e.att.begin(ctx, b.id)
	if err != nil {
		return err
	}
	if err := b.e.h.Process(ctx, c, results); err != nil {
		return fmt.Errorf("engine: running the handler: %w", err)
	}
	b.rep.DataCalls += b.nData
	b.rep.InitialCalls += b.nInit
	b.rep.TimeoutCalls += len(b.groups) - b.nData - b.nInit
	for i := range results {
		if err := b.apply(i, &results[i]); err != nil {
			return err
		}
	}
	return nil
}

// apply records one group's result, or handles its failure by the deployment's policy.
func (b *batch) apply(i int, r *handler.Result) error {
	g, prev := &b.groups[i], b.prev[i]
	err := r.Err
	b.e.quar.outcome(g.Key, err, b.T, b.id)
	if err == nil && r.TimeoutSet {
		if cerr := b.e.rules.CheckTimeoutResult(r.TimeoutMs, b.T, b.W); cerr != nil {
			err = fmt.Errorf("module returned an invalid timeout: %w", cerr)
		}
	}
	if err == nil {
		for j, row := range r.Emits {
			if !json.Valid(row) {
				err = fmt.Errorf("emitted row %d is not valid JSON", j)
				break
			}
		}
	}
	if err != nil {
		return b.fail(i, err)
	}
	next := state.Entry{} // only what this call set: every call starts with no timeout
	if r.TimeoutSet {
		next.TimeoutMs = r.TimeoutMs
	}
	switch r.Action {
	case abi.ActionKeep:
		next.Value, next.HasValue, next.UpdatedMs = prev.Value, prev.HasValue, prev.UpdatedMs
	case abi.ActionUpdate:
		next.Value, next.HasValue, next.UpdatedMs = r.State, true, b.T
	case abi.ActionRemove:
	}
	b.sb.Set(g.Key, prev, next)
	for _, row := range r.Emits {
		b.append(state.OutboxEntry{Kind: state.OutboxOutput, Key: g.Key, Payload: row})
	}
	b.rep.Emitted += len(r.Emits)
	return nil
}

// fail handles a failed call for group i: under on_error: fail the batch fails; under
// dead_letter the key's rows go to the dead-letter sink with the error and its state stays as
// it was. A failed timeout call has no rows: its dead letter carries the key, and the timeout
// is consumed (as after any timeout call) so it does not fire again every batch.
func (b *batch) fail(i int, err error) error {
	g := &b.groups[i]
	kerr := &KeyError{Key: string(g.Key), Err: err}
	if b.e.spec.OnError == spec.OnErrorFail {
		return fmt.Errorf("%w: %w", ErrKeyFailed, kerr)
	}
	b.rep.FailedKeys++
	b.e.logger.Warn("handler failed for a key; dead-lettering its rows", "key", string(g.Key), "err", err)
	if g.Flags&abi.GroupTimedOut != 0 {
		prev := b.prev[i]
		next := prev
		next.TimeoutMs = abi.NoTimeout
		b.sb.Set(g.Key, prev, next)
		b.append(state.OutboxEntry{Kind: state.OutboxDeadLetter, Key: g.Key, Reason: ReasonHandlerError, Error: err.Error(), TimeoutCall: true})
		b.rep.DeadLetters++
		return nil
	}
	if i >= b.nData {
		// An initial-state call of a key without rows: its dead letter names the key, and the
		// key keeps its initial state (its state before the call).
		b.append(state.OutboxEntry{Kind: state.OutboxDeadLetter, Key: g.Key, Reason: ReasonHandlerError, Error: err.Error()})
		b.rep.DeadLetters++
		return nil
	}
	for _, j := range b.rowIdx[b.rowStart[i]:b.rowStart[i+1]] {
		b.deadLetter(g.Key, b.in[j], ReasonHandlerError, err)
	}
	if t := b.prev[i].TimeoutMs; t != abi.NoTimeout && b.hasBound && timeouts.Fires(t, b.bound) {
		// Its timeout stays as it was, expired: should the batch commit in chunks, the next
		// chunks must not time it out (it got rows); the next batch does.
		b.newSkips = append(b.newSkips, g.Key)
	}
	return nil
}

func (b *batch) deadLetter(key []byte, r Row, reason string, err error) {
	b.append(rowEntry(state.OutboxDeadLetter, key, r, reason, err.Error()))
	b.rep.DeadLetters++
}

// rowEntry is the outbox entry of input row r, dead-lettered or late for reason.
func rowEntry(kind state.OutboxKind, key []byte, r Row, reason, msg string) state.OutboxEntry {
	return state.OutboxEntry{Kind: kind, Key: key, Payload: r.Data, Reason: reason, Error: msg, Subject: r.Subject, Sequence: r.Sequence}
}

// append adds en to the batch's outbox (see batch.outbox).
func (b *batch) append(en state.OutboxEntry) {
	if b.outbox == nil {
		b.outbox = make([]state.OutboxEntry, 0, max(b.outCap+b.outCap/4, 16))
	}
	b.outbox = append(b.outbox, en)
}

// tally is what a batch's report counts of the deployment's counters (state.Progress.Counters):
// the batch's chunks each commit what the report added since the previous chunk.
type tally struct{ rowsIn, late, dead, timeouts, emitted, ttl int }

// tally returns what the batch's report counts so far.
func (b *batch) tally() tally {
	r := &b.rep
	return tally{rowsIn: r.RowsIn, late: r.LateRows, dead: r.DeadLetters, timeouts: r.TimeoutCalls, emitted: r.Emitted, ttl: r.TTLExpired}
}

// since returns the counters to add for t after the chunks that counted prev; closing counts
// the batch itself (its last commit).
func (t tally) since(prev tally, closing bool) state.Counters {
	d := func(now, was int) uint64 { return uint64(max(now-was, 0)) }
	c := state.Counters{RowsIn: d(t.rowsIn, prev.rowsIn), LateRows: d(t.late, prev.late), DeadLetters: d(t.dead, prev.dead),
		TimeoutsFired: d(t.timeouts, prev.timeouts), Emitted: d(t.emitted, prev.emitted), TTLExpired: d(t.ttl, prev.ttl)}
	if closing {
		c.Batches = 1
	}
	return c
}
