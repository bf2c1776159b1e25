package timeouts

import "math"

// Watermark tracks a deployment's event-time watermark across micro-batches (DESIGN 3
// rule 6, Spark's WatermarkTracker):
//
//	W_next = max(W, max event time seen in the batch - delay)
//
// The maximum is taken over every row with an event time, before late rows are filtered
// (Spark's EventTimeWatermarkExec collects event-time stats upstream of the stateful
// operator's late-row filter). The watermark is monotonic, never below 0, and starts at 0,
// so the first batch has W = 0.
//
// A batch calls [Watermark.Observe] for each row, then [Watermark.Advance] when it commits
// or [Watermark.Discard] when it fails. A Watermark is not safe for concurrent use.
type Watermark struct {
	delay    int64 // >= 0
	current  int64 // >= 0, W of the batch in progress
	batchMax int64 // max event time observed in the batch, when seen
	seen     bool  // whether the batch observed any event time
}

// NewWatermark returns a tracker with watermark delay delayMs that starts at currentMs,
// the persisted watermark (0 for a new deployment). A negative delay is taken as 0 (Spark
// refuses negative delays) and a negative currentMs as 0.
func NewWatermark(delayMs int64, currentMs int64) *Watermark {
	return &Watermark{delay: max(delayMs, 0), current: max(currentMs, 0)}
}

// Delay returns the watermark delay in milliseconds.
func (w *Watermark) Delay() int64 { return w.delay }

// Current returns the watermark of the batch in progress (W): the one late rows and
// event-time timeouts are judged against.
func (w *Watermark) Current() int64 { return w.current }

// Observe records an event time seen in the current batch. Call it for every row that has
// an event time, late or not.
func (w *Watermark) Observe(eventMs int64) {
	if !w.seen || eventMs > w.batchMax {
		w.batchMax = eventMs
		w.seen = true
	}
}

// BatchMax returns the largest event time observed in the current batch; ok is false when
// the batch observed none.
func (w *Watermark) BatchMax() (maxMs int64, ok bool) { return w.batchMax, w.seen }

// Next returns the watermark the next batch would get, without committing:
// max(W, batch max - delay), or W when the batch observed no event time. The subtraction
// saturates, so extreme event times cannot overflow.
func (w *Watermark) Next() int64 {
	if !w.seen {
		return w.current
	}
	// delay >= 0, so batchMax - delay can only underflow, and then it is below W >= 0.
	if w.batchMax < math.MinInt64+w.delay {
		return w.current
	}
	return max(w.current, w.batchMax-w.delay)
}

// Advance ends the batch: W becomes [Watermark.Next] and the batch's observations are
// forgotten. advanced reports whether W grew, which with event-time timeouts calls for a
// no-data batch (docs/semantics.md, "A micro-batch": No-data batches; see
// [Rules.ShouldRunNoDataBatch]).
func (w *Watermark) Advance() (nextMs int64, advanced bool) {
	next := w.Next()
	advanced = next > w.current
	w.current = next
	w.Discard()
	return next, advanced
}

// Discard forgets the current batch's observations and keeps W, for a batch that failed
// or was rolled back.
func (w *Watermark) Discard() {
	w.batchMax = 0
	w.seen = false
}

// Reset sets W to currentMs (a negative value is taken as 0) and forgets the current
// batch's observations, after a restart or a rollback to a persisted watermark. Unlike
// [Watermark.Advance] it may move the watermark backwards.
func (w *Watermark) Reset(currentMs int64) {
	w.current = max(currentMs, 0)
	w.Discard()
}
