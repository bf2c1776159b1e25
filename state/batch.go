package state

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects the writes of one micro-batch: state entries, timer
// index changes, the progress record and outbox entries. Nothing is visible
// until Commit, which writes them all in one Pebble batch (synced, or
// replicated; see Commit).
//
// A Batch is not safe for concurrent use. Its contents are held in memory
// (its own record of the Sets, and Pebble's batch buffers, one of them
// indexed for the state variables' writes) until Commit or Close.
type Batch struct {
	d       *Deployment
	id      uint64
	pb      *pebble.Batch
	err     error // set at NewBatch: closed, read-only or invalid name
	scratch []byte

	keysDelta, timersDelta int64

	hasProgress bool
	watermarkMs int64
	position    uint64
	open        OpenBatch // SetOpen's

	hasGeneration bool
	generation    uint64

	hasInputCreated bool
	inputCreated    int64

	hasMaxEvent bool
	maxEventMs  int64

	processingTimeMs int64    // SetProcessingTime's (0: carry over)
	counters         Counters // AddCounters'

	initialApplied bool // MarkInitialStateApplied's

	hasTimeMode bool // SetTimeMode's
	timeMode    uint8
	// inputWatermarks is SetInputWatermarks' record (nil: none to write).
	inputWatermarks []byte
	// clearAttempt: ClearAttempt was called.
	clearAttempt bool
	// quarantine is SetQuarantine's record, when hasQuarantine (nil: delete it).
	quarantine    []byte
	hasQuarantine bool

	seq uint32

	log *setLog // the Sets, written at Commit (nil once closed)

	// ABI v2 state (KeyTxn, DeclareVars, ExpireTTL): its writes go to vb, an indexed
	// batch created on first use, which reads through to the store; Commit appends
	// them to pb.
	vb  *pebble.Batch
	ov  varOverlay // vb's writes of the records the hot-state cache holds (varcache.go)
	cat *catalog   // the catalog as the batch left it, once read
	tx  *KeyTxn    // the open transaction
	// imgs is the batch's view of the images of the short lists it read or wrote, by
	// image key (listimage.go).
	imgs map[string]*listImage
	// reverts counts RevertKeys calls: a transaction committed before the last one can no
	// longer be reverted (its place in vb moved).
	reverts int

	// Of a fork (fork.go): the batch it was forked from, and where its own writes begin in
	// vb (after those of parent it started with).
	parent *Batch
	seed   txnMark
}

// NewBatch starts the batch batchID. batchID must be greater than the
// BatchID of the deployment's last committed Progress (the first batch is
// 1); Commit enforces it, because outbox ids (and the message ids derived
// from them) must never repeat. If the store is closed or read-only, or the
// name invalid, the batch's Commit returns that error.
func (d *Deployment) NewBatch(batchID uint64) *Batch {
	b := &Batch{d: d, id: batchID}
	if err := d.acquireWrite(); err != nil {
		b.err = err
		return b
	}
	defer d.s.release()
	b.pb = d.s.db.NewBatch()
	b.log, _ = d.s.logs.Get().(*setLog)
	if b.log == nil {
		b.log = &setLog{}
	}
	return b
}

// MarkInitialStateApplied records, with the batch, that the deployment's initial state was
// applied (Deployment.InitialStateApplied reports it from the commit on), so that it is
// applied once: not again after a restart, nor after a restore from the log or a snapshot.
func (b *Batch) MarkInitialStateApplied() { b.initialApplied = true }

// SetTimeMode records, with the batch, the timeout mode the deployment runs under (an opaque
// byte to the store; the engine writes its timeouts.Mode), for Deployment.TimeMode: a
// transformWithState deployment refuses a redeploy that changes it.
func (b *Batch) SetTimeMode(mode uint8) { b.hasTimeMode, b.timeMode = true, mode }

// ID returns the batch id given to NewBatch.
func (b *Batch) ID() uint64 { return b.id }

// Set records key's new entry next. prev must be the key's entry before
// this call: as committed, or as left by an earlier Set of the same key in
// this batch. It is used to delete the old timer-index key and to maintain
// Progress.Keys and Progress.TimerKeys without a read. If next has neither
// a value nor a timeout, the key is deleted. key and next.Value are copied;
// the caller may reuse them after Set returns.
func (b *Batch) Set(key []byte, prev, next Entry) {
	if b.pb == nil {
		return
	}
	b.log.add(key, prev.TimeoutMs, next)
	b.keysDelta += b2i(next.HasValue) - b2i(prev.HasValue)
	b.timersDelta += b2i(next.TimeoutMs != 0) - b2i(prev.TimeoutMs != 0)
}

// writeSets writes the recorded Sets to the Pebble batch: first the timer
// index changes ordered by timer key, then the entries ordered by key.
// Pebble applies a batch to its memtable (a skiplist) in batch order, and
// an insert right after the previous one reuses its position instead of
// searching from the top, so writing in key order makes the commit much
// cheaper than writing in the handler's order. Writes of one key keep
// their order (ties are broken by Set order), so the last one wins, as it
// would unsorted.
func (b *Batch) writeSets() {
	l, p := b.log, b.d.prefix
	ops := l.timers[:0]
	for i := range l.recs {
		r := &l.recs[i]
		if r.prevTimeout != 0 && r.prevTimeout != r.e.TimeoutMs {
			ops = append(ops, timerOp{ts: r.prevTimeout, rec: int32(i), seq: int32(len(ops)), del: true})
		}
		if r.e.TimeoutMs != 0 {
			ops = append(ops, timerOp{ts: r.e.TimeoutMs, rec: int32(i), seq: int32(len(ops))})
		}
	}
	slices.SortFunc(ops, func(x, y timerOp) int {
		if c := cmp.Compare(x.ts, y.ts); c != 0 {
			return c
		}
		if c := bytes.Compare(l.key(int(x.rec)), l.key(int(y.rec))); c != 0 {
			return c
		}
		return cmp.Compare(x.seq, y.seq)
	})
	for _, op := range ops {
		b.scratch = timerKey(b.scratch[:0], p, op.ts, l.key(int(op.rec)))
		if op.del {
			_ = b.pb.Delete(b.scratch, nil)
		} else {
			_ = b.pb.Set(b.scratch, nil, nil)
		}
	}
	l.timers = ops

	order := l.order[:0]
	for i := range l.recs {
		order = append(order, int32(i))
	}
	slices.SortFunc(order, func(x, y int32) int {
		if c := bytes.Compare(l.key(int(x)), l.key(int(y))); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	for _, i := range order {
		r := &l.recs[i]
		b.scratch = valueKey(b.scratch[:0], p, l.key(int(i)))
		if r.e.exists() {
			n := len(b.scratch)
			b.scratch = appendEntry(b.scratch, r.e) // the header: r.e has no Value
			b.setSplit(b.scratch[:n], b.scratch[n:], l.value(int(i)))
		} else {
			_ = b.pb.Delete(b.scratch, nil)
		}
	}
	l.order = order
}

func b2i(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// SetProgress sets the watermark and input position the batch commits.
// Without it, Commit carries over those of the previous Progress. The
// BatchID is the one given to NewBatch, and the key counters are the
// previous ones plus the deltas of this batch's Set calls.
func (b *Batch) SetProgress(watermarkMs int64, position uint64) {
	b.hasProgress = true
	b.watermarkMs = watermarkMs
	b.position = position
}

// SetGeneration makes the commit start generation gen (see
// Progress.Generation), this batch being its first: use it in a commit that
// rewinds the input position behind batches that may have been published.
// Without it, Commit carries over the previous generation.
func (b *Batch) SetGeneration(gen uint64) {
	b.hasGeneration = true
	b.generation = gen
}

// SetInputCreated records the identity of the input stream the batch's
// position counts in (see Progress.InputCreated). Without it, Commit carries
// over the previous one.
func (b *Batch) SetInputCreated(created int64) {
	b.hasInputCreated = true
	b.inputCreated = created
}

// SetMaxEvent records the largest event time the deployment has seen (see
// Progress.MaxEventMs); after the commit Progress.HasMaxEvent is set. Without
// it, Commit carries over the previous one (or none).
func (b *Batch) SetMaxEvent(maxEventMs int64) {
	b.hasMaxEvent = true
	b.maxEventMs = maxEventMs
}

// SetProcessingTime records the batch's processing time (see
// Progress.ProcessingTimeMs). The commit keeps the larger of it and the
// previous one, so the recorded processing time never decreases. Without
// it, Commit carries over the previous one.
func (b *Batch) SetProcessingTime(ms int64) {
	b.processingTimeMs = ms
}

// AddCounters adds d to the deployment's counters (Progress.Counters) at the
// commit.
func (b *Batch) AddCounters(d Counters) {
	b.counters = b.counters.add(d)
}

// SetOpen marks the batch as a chunk of the micro-batch open, which has
// chunks left: after the commit, Progress.Open is open (open.Active is set
// for the caller). A commit without SetOpen closes the open batch, if any:
// Progress.Open is zero and the keys of SkipTimeout are forgotten.
func (b *Batch) SetOpen(open OpenBatch) {
	open.Active = true
	b.open = open
}

// SkipTimeout records that the open batch must not call key's timeout, even
// if it is expired (as for a key that got rows in the batch, whose call
// failed and left its timeout as it was). Deployment.SkippedTimeouts lists
// these keys until the commit that closes the batch. key is copied.
func (b *Batch) SkipTimeout(key []byte) {
	if b.pb == nil {
		return
	}
	b.scratch = skipKey(b.scratch[:0], b.d.prefix, key)
	_ = b.pb.Set(b.scratch, nil, nil)
}

// AppendOutbox adds an outbox entry and returns its id (the batch id and a
// sequence number 0, 1, 2, ... in call order). e.ID is ignored; e's slices
// and strings are copied.
func (b *Batch) AppendOutbox(e *OutboxEntry) OutboxID {
	id := OutboxID{BatchID: b.id, Seq: b.seq}
	b.seq++
	if b.pb == nil {
		return id
	}
	b.scratch = outboxKey(b.scratch[:0], b.d.prefix, id)
	n := len(b.scratch)
	b.scratch = appendOutboxHead(b.scratch, e)
	b.setSplit(b.scratch[:n], b.scratch[n:], e.Payload)
	return id
}

// AppendOutboxes is AppendOutbox for each of entries, in order, and sets each one's ID. It
// sizes the batch's Pebble buffer once for them and for the batch's Sets, which Commit
// writes, so that a batch of big values is copied into it once, not again at every doubling
// of the buffer.
func (b *Batch) AppendOutboxes(entries []OutboxEntry) {
	if b.pb != nil {
		n := 0
		for i := range entries {
			e := &entries[i]
			n += outboxRecordBytes + len(b.d.prefix) + len(e.Key) + len(e.Reason) + len(e.Error) + len(e.Subject) + len(e.Payload)
		}
		b.reserve(n)
	}
	for i := range entries {
		entries[i].ID = b.AppendOutbox(&entries[i])
	}
}

// outboxRecordBytes bounds what a Pebble batch record of an outbox entry takes besides its
// deployment prefix and variable fields: the record's kind and lengths, the key's section
// and id, and the value's kind, flags, lengths and sequence.
const outboxRecordBytes = 1 + 2*binary.MaxVarintLen32 + 1 + 12 + 2 + 5*binary.MaxVarintLen64

// setRecordBytes bounds what the Pebble batch records of a Set take besides its deployment
// prefix (twice: the value and the timer index), its key (three times: the value, and a
// timer index deletion and insertion) and its value: the records' kinds and lengths, the
// sections, the timers and the entry's header.
const setRecordBytes = 3*(1+2*binary.MaxVarintLen32+1) + 2*8 + entryHeaderLen + 8

// reserve makes room in the Pebble batch for n more bytes of records besides the Sets that
// Commit writes, in one allocation: a batch whose buffer would grow is started again with
// the room, and what it held copied over (the Pebble buffer grows by doubling, which for a
// batch of big values allocates and copies its bytes about twice over).
func (b *Batch) reserve(n int) {
	l := b.log
	n += len(l.arena) + len(l.recs)*(setRecordBytes+2*len(b.d.prefix))
	for i := range l.recs {
		n += 2 * l.recs[i].keyLen // arena counts it once
	}
	if b.vb != nil {
		n += len(b.vb.Repr())
	}
	need := b.pb.Len() + n
	if need < minReserve || need <= cap(b.pb.Repr()) {
		return
	}
	nb := b.d.s.db.NewBatchWithSize(need)
	if !b.pb.Empty() {
		_ = nb.Apply(b.pb, nil)
	}
	_ = b.pb.Close()
	b.pb = nb
}

// minReserve is the smallest Pebble buffer reserve allocates: below it, growing by doubling
// costs next to nothing.
const minReserve = 1 << 20

// setSplit sets key to the value head followed by tail in the Pebble batch, copying tail (a
// state value or an outbox payload, which may be big) straight into the batch's buffer.
func (b *Batch) setSplit(key, head, tail []byte) {
	op := b.pb.SetDeferred(len(key), len(head)+len(tail))
	copy(op.Key, key)
	copy(op.Value[copy(op.Value, head):], tail)
	_ = op.Finish()
}

// Commit writes every Set, the progress record and the outbox entries in
// one Pebble batch committed with pebble.Sync: all or nothing. When the
// deployment has a Replicator (see Deployment.SetReplicator), the batch
// goes to it first and is committed with pebble.NoSync; if Replicate
// fails, Commit returns an error wrapping ErrReplication and nothing is
// applied, so a batch of the same id may be committed next. It returns
// the Progress it wrote (what Deployment.Progress reads afterwards), which
// spares a read of the progress record after a commit. On error the
// Progress is zero and nothing is visible (if the error wraps ErrFailed the
// store must be reopened; see the package documentation). Commit ends the
// batch whether or not it succeeds; a second Commit returns ErrBatchDone.
// The exception is ErrTxnOpen, returned while a KeyTxn of the batch is open:
// the batch goes on then.
//
// The batch's state-variable writes (DeclareVars, the committed KeyTxns,
// ExpireTTL) are part of the same Pebble batch, and Progress.Keys and
// TimerKeys include their changes to the key records.
func (b *Batch) Commit() (Progress, error) {
	if b.err != nil {
		return Progress{}, b.err
	}
	if b.pb == nil {
		return Progress{}, ErrBatchDone
	}
	if b.tx != nil {
		return Progress{}, ErrTxnOpen
	}
	defer b.Close()
	d := b.d
	if err := d.lockWrite(); err != nil {
		return Progress{}, err
	}
	defer d.unlockWrite()
	prev, err := d.progress()
	if err != nil {
		return Progress{}, err
	}
	if b.id <= prev.BatchID {
		return Progress{}, fmt.Errorf("%w: batch %d, last committed %d (deployment %s)", ErrBatchOrder, b.id, prev.BatchID, d.name)
	}
	next := Progress{
		BatchID:     b.id,
		WatermarkMs: prev.WatermarkMs,
		Position:    prev.Position,
		Keys:        prev.Keys + b.keysDelta,
		TimerKeys:   prev.TimerKeys + b.timersDelta,
	}
	if b.hasProgress {
		next.WatermarkMs, next.Position = b.watermarkMs, b.position
	}
	next.Open = b.open
	next.Generation, next.GenerationFrom = prev.Generation, prev.GenerationFrom
	if b.hasGeneration {
		next.Generation, next.GenerationFrom = b.generation, b.id
	}
	next.InputCreated = prev.InputCreated
	if b.hasInputCreated {
		next.InputCreated = b.inputCreated
	}
	next.MaxEventMs, next.HasMaxEvent = prev.MaxEventMs, prev.HasMaxEvent
	if b.hasMaxEvent {
		next.MaxEventMs, next.HasMaxEvent = b.maxEventMs, true
	}
	next.ProcessingTimeMs = max(prev.ProcessingTimeMs, b.processingTimeMs)
	next.Counters = prev.Counters.add(b.counters)
	if prev.Open.Active && !next.Open.Active {
		if err := b.clearSkips(); err != nil {
			return Progress{}, err
		}
	}
	if next.Keys < 0 || next.TimerKeys < 0 {
		d.s.opts.Logger.Warn("state: key counters went negative (inconsistent prev entries); clamping to 0",
			"deployment", d.name, "batch", b.id, "keys", next.Keys, "timer_keys", next.TimerKeys)
		next.Keys, next.TimerKeys = max(next.Keys, 0), max(next.TimerKeys, 0)
	}
	b.writeSets()
	if b.initialApplied {
		_ = b.pb.Set(sectionKey(nil, d.prefix, sectionInitial), nil, nil)
	}
	if b.hasTimeMode {
		_ = b.pb.Set(sectionKey(nil, d.prefix, sectionTimeMode), []byte{b.timeMode}, nil)
	}
	if b.inputWatermarks != nil {
		_ = b.pb.Set(sectionKey(nil, d.prefix, sectionInputs), b.inputWatermarks, nil)
	}
	if b.clearAttempt {
		_ = b.pb.Delete(sectionKey(nil, d.prefix, sectionAttempt), nil)
	}
	if b.hasQuarantine {
		if b.quarantine == nil {
			_ = b.pb.Delete(sectionKey(nil, d.prefix, sectionQuarantine), nil)
		} else {
			_ = b.pb.Set(sectionKey(nil, d.prefix, sectionQuarantine), b.quarantine, nil)
		}
	}
	if b.vb != nil {
		if err := b.pb.Apply(b.vb, nil); err != nil {
			return Progress{}, fmt.Errorf("state: commit batch %d (deployment %s): %w", b.id, d.name, err)
		}
	}
	b.scratch = sectionKey(b.scratch[:0], d.prefix, sectionProgress)
	n := len(b.scratch)
	b.scratch = appendProgress(b.scratch, next)
	_ = b.pb.Set(b.scratch[:n], b.scratch[n:], nil)
	// Replicated first: when that fails, nothing reached Pebble or the cache.
	opts, err := d.replicate(d.replicator(), WriteBatch, b.id, b.pb, pebble.Sync)
	if err != nil {
		return Progress{}, fmt.Errorf("state: commit batch %d (deployment %s): %w", b.id, d.name, err)
	}
	c := d.s.cache
	var vlog *setLog
	if c != nil {
		if b.vb != nil {
			vlog = d.s.getLog()
			defer d.s.putLog(vlog)
			vlog = b.overlayLog(vlog)
		} else {
			vlog = emptyLog // nothing of the variables
		}
		d.stripe.beginWrite()
	}
	err = d.s.write(func() error { return b.pb.Commit(opts) })
	if c != nil {
		// Only a commit that succeeded reaches the cache; a failed one
		// empties it, whatever Pebble's memory now holds.
		c.endWrite(d.stripe, err == nil, depLog{d.name, b.log}, depLog{d.varsDep(), vlog})
	}
	if err != nil {
		return Progress{}, fmt.Errorf("state: commit batch %d (deployment %s): %w", b.id, d.name, err)
	}
	return next, nil
}

// clearSkips deletes the keys of SkipTimeout, as the batch closes the open
// batch. They are few (keys that got rows in that batch) and point
// deletions, not a range deletion (see AckOutbox for why).
func (b *Batch) clearSkips() error {
	lower := sectionKey(nil, b.d.prefix, sectionSkip)
	iter, err := b.d.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return err
	}
	for ok := iter.First(); ok; ok = iter.Next() {
		_ = b.pb.Delete(iter.Key(), nil)
	}
	err = iter.Error()
	if cerr := iter.Close(); err == nil {
		err = cerr
	}
	return err
}

// Close discards the batch. It is safe to call more than once and after
// Commit.
func (b *Batch) Close() {
	if b.pb != nil {
		_ = b.pb.Close()
		b.pb = nil
	}
	if b.vb != nil {
		_ = b.vb.Close()
		b.vb = nil
	}
	b.cat, b.tx = nil, nil
	b.ov = varOverlay{}
	if b.parent != nil {
		b.err = ErrBatchDone // a fork's vb is not made again
	}
	b.scratch = nil
	if b.log != nil {
		if cap(b.log.arena) <= maxPooledLog {
			b.log.reset()
			b.d.s.logs.Put(b.log)
		}
		b.log = nil
	}
}

// maxPooledLog is the largest set log (in arena bytes) kept for reuse.
const maxPooledLog = 16 << 20
