package state

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Batch collects the writes of one micro-batch: state entries, timer
// index changes, the progress record and outbox entries. Nothing is visible
// until Commit, which writes them all in one synced Pebble batch.
//
// A Batch is not safe for concurrent use. Its contents are held in memory
// (Pebble's batch buffer) until Commit or Close.
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

	seq uint32
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
	return b
}

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
	p := b.d.prefix
	if prev.TimeoutMs != 0 && prev.TimeoutMs != next.TimeoutMs {
		b.scratch = timerKey(b.scratch[:0], p, prev.TimeoutMs, key)
		_ = b.pb.Delete(b.scratch, nil)
	}
	if next.TimeoutMs != 0 {
		b.scratch = timerKey(b.scratch[:0], p, next.TimeoutMs, key)
		_ = b.pb.Set(b.scratch, nil, nil)
	}
	b.scratch = valueKey(b.scratch[:0], p, key)
	if next.exists() {
		n := len(b.scratch)
		b.scratch = appendEntry(b.scratch, next)
		_ = b.pb.Set(b.scratch[:n], b.scratch[n:], nil)
	} else {
		_ = b.pb.Delete(b.scratch, nil)
	}
	b.keysDelta += b2i(next.HasValue) - b2i(prev.HasValue)
	b.timersDelta += b2i(next.TimeoutMs != 0) - b2i(prev.TimeoutMs != 0)
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

// AppendOutbox adds an outbox entry and returns its id: the batch id and a
// sequence number 0, 1, 2, ... in call order. key, payload and headers are
// copied (headers are stored sorted by name).
func (b *Batch) AppendOutbox(kind OutboxKind, key, payload []byte, headers map[string]string) OutboxID {
	id := OutboxID{BatchID: b.id, Seq: b.seq}
	b.seq++
	if b.pb == nil {
		return id
	}
	b.scratch = outboxKey(b.scratch[:0], b.d.prefix, id)
	n := len(b.scratch)
	b.scratch = appendOutboxValue(b.scratch, kind, key, payload, headers)
	_ = b.pb.Set(b.scratch[:n], b.scratch[n:], nil)
	return id
}

// Commit writes every Set, the progress record and the outbox entries in
// one Pebble batch committed with pebble.Sync: all or nothing. On error
// nothing is visible (if the error wraps ErrFailed the store must be
// reopened; see the package documentation). Commit ends the batch whether
// or not it succeeds; a second Commit returns ErrBatchDone.
func (b *Batch) Commit() error {
	if b.err != nil {
		return b.err
	}
	if b.pb == nil {
		return ErrBatchDone
	}
	defer b.Close()
	d := b.d
	if err := d.acquireWrite(); err != nil {
		return err
	}
	defer d.s.release()
	prev, err := d.progress()
	if err != nil {
		return err
	}
	if b.id <= prev.BatchID {
		return fmt.Errorf("%w: batch %d, last committed %d (deployment %s)", ErrBatchOrder, b.id, prev.BatchID, d.name)
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
	if next.Keys < 0 || next.TimerKeys < 0 {
		d.s.opts.Logger.Warn("state: key counters went negative (inconsistent prev entries); clamping to 0",
			"deployment", d.name, "batch", b.id, "keys", next.Keys, "timer_keys", next.TimerKeys)
		next.Keys, next.TimerKeys = max(next.Keys, 0), max(next.TimerKeys, 0)
	}
	b.scratch = sectionKey(b.scratch[:0], d.prefix, sectionProgress)
	n := len(b.scratch)
	b.scratch = appendProgress(b.scratch, next)
	_ = b.pb.Set(b.scratch[:n], b.scratch[n:], nil)
	if err := d.s.write(func() error { return b.pb.Commit(pebble.Sync) }); err != nil {
		return fmt.Errorf("state: commit batch %d (deployment %s): %w", b.id, d.name, err)
	}
	return nil
}

// Close discards the batch. It is safe to call more than once and after
// Commit.
func (b *Batch) Close() {
	if b.pb != nil {
		_ = b.pb.Close()
		b.pb = nil
	}
	b.scratch = nil
}
