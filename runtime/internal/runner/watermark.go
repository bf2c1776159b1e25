package runner

import (
	"cmp"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/timeouts"
)

// The watermark of a deployment split into partitions under event_time (docs/semantics.md,
// "Event time across partitions"): each partition's runner publishes the partition's max
// event time to the groupstate-watermarks bucket (at most once a second, in the background),
// and bounds its engine's watermark by the other partitions' records, which one watch per
// runtime keeps in memory (cluster.Watermarks). A partition that gets no rows still runs a
// no-data batch when that bound moves its watermark (see loop), so its event-time timeouts
// fire.

// sharesWatermark tells whether r's partition shares its watermark with other partitions:
// not a shadow's, which runs its primary's recorded watermarks.
func (r *Runner) sharesWatermark() bool {
	return r.parts > 1 && r.spec.EventTime != nil && !r.shadowing()
}

// watermarkBound is r's engine.WatermarkBound: the smallest max event time of the partitions
// that are not idle, this one included (by its last row, r.lastRowAt) and the others that
// published.
func (r *Runner) watermarkBound(ownMaxMs int64) int64 {
	idle := cmp.Or(r.spec.EventTime.Idle.Std(), spec.DefaultEventTimeIdle)
	return r.wm.Min(r.spec.Name, r.part, r.parts, cluster.WatermarkRecord{MaxEventMs: ownMaxMs, LastRowAt: r.lastRowAt}, idle)
}

// engineBound is the SharedWatermark of r's engine (nil: r's partition shares none).
func (r *Runner) engineBound() engine.WatermarkBound {
	if r.wm == nil {
		return nil
	}
	return r.watermarkBound
}

// publishWatermark publishes the partition's max event time after a batch (cluster.Watermarks
// throttles the puts), with the wall time of its last row.
func (r *Runner) publishWatermark(rep *engine.BatchReport) {
	if r.wm == nil {
		return
	}
	if rep.RowsIn > 0 {
		r.lastRowAt = r.env.Clock.Now()
	}
	if rep.MaxEventMs == timeouts.NoEventTime {
		return // nothing seen yet: nothing to bound the others with
	}
	rec := cluster.WatermarkRecord{MaxEventMs: rep.MaxEventMs, LastRowAt: r.lastRowAt}
	r.published = &rec
	r.wm.Publish(r.spec.Name, r.part, rec)
}

// republishWatermark gives the partition's last record to the watermarks again, while no batch
// runs: Publish throttles its puts, and puts a record it held back only when called again.
func (r *Runner) republishWatermark() {
	if r.wm != nil && r.published != nil {
		r.wm.Publish(r.spec.Name, r.part, *r.published)
	}
}

// watermarkMoved is closed when another partition's record may have moved r's watermark (nil,
// which never fires, when r's partition shares none).
func (r *Runner) watermarkMoved() <-chan struct{} {
	if r.wm == nil {
		return nil
	}
	return r.wm.Changed()
}

// watermarkAhead tells whether the bound of the other partitions would move r's watermark now:
// then a no-data batch commits it (and fires the timeouts it passes). Only the loop calls it.
func (r *Runner) watermarkAhead() bool {
	p := r.eng.Progress()
	if r.wm == nil || !p.HasMaxEvent {
		return false
	}
	delay := r.spec.EventTime.WatermarkDelay.Std().Milliseconds()
	return timeouts.NextWatermark(p.WatermarkMs, r.watermarkBound(p.MaxEventMs), delay) > p.WatermarkMs
}
