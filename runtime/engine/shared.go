package engine

import "github.com/groupstate/groupstate/timeouts"

// WatermarkBound is how a partition of a deployment split into partitions learns how far the
// other partitions are in event time (docs/semantics.md, "Event time across partitions").
// Given ownMaxMs, the largest event time the partition has seen (this batch's rows included,
// late ones too), it returns the smallest largest event time of the partitions that count:
// this one (ownMaxMs) unless it is idle, and the others that published one and are not idle;
// [timeouts.NoEventTime] when none counts, which moves no watermark. The engine then commits
//
//	W_next = max(W, bound - watermark_delay)
//
// ([timeouts.NextWatermark] of the bound) and records ownMaxMs with the batch's progress
// (state.Progress.MaxEventMs), so a restart, a failover and a replay go on from it. A result
// above ownMaxMs is the watermark of an idle partition following the others.
//
// The engine calls it on the goroutine that calls RunBatch, once per batch when the partition
// has seen an event time, no-data batches included: it must not block (read a cache kept up to
// date elsewhere, never the network).
type WatermarkBound func(ownMaxMs int64) int64

// ownMax is the largest event time the partition has seen, this batch's maxEvt included:
// [timeouts.NoEventTime] when none.
func (e *Engine) ownMax(maxEvt int64) int64 {
	if e.progress.HasMaxEvent {
		return max(maxEvt, e.progress.MaxEventMs)
	}
	return maxEvt
}

// nextWatermark is the watermark batch b, which runs at b.W and saw b.maxEvt
// ([timeouts.NoEventTime] when none), commits: today's rule without a WatermarkBound (W_next =
// max(W, batch max - delay)), else the bound's; for several inputs, their policy's (which
// also fills b.nextIn). It also returns the partition's max event time to record
// (record false: nothing new to record).
func (e *Engine) nextWatermark(b *batch) (next, own int64, record bool) {
	w, maxEvt := b.W, b.maxEvt
	if e.multi != nil {
		return e.multi.next(w, e.inputs, b.inMax, b.nextIn), timeouts.NoEventTime, false
	}
	delayMs := e.inputs[0].delayMs
	if e.bound == nil {
		return timeouts.NextWatermark(w, maxEvt, delayMs), timeouts.NoEventTime, false
	}
	own = e.ownMax(maxEvt)
	if own == timeouts.NoEventTime {
		return max(w, 0), own, false // nothing seen: nothing bounds, nothing moves
	}
	record = !e.progress.HasMaxEvent || own != e.progress.MaxEventMs
	return timeouts.NextWatermark(w, e.bound(own), delayMs), own, record
}

// reportedMax is BatchReport.MaxEventMs of the last commit.
func (e *Engine) reportedMax() int64 {
	if e.bound == nil || !e.progress.HasMaxEvent {
		return timeouts.NoEventTime
	}
	return e.progress.MaxEventMs
}
