package timeouts

import (
	"fmt"
	"math"
)

// Rules are one deployment's timeout rules: its timeout mode and whether it has a
// watermark. The zero value is a deployment without timeouts or watermark.
//
// Rules are a small value type; every method is pure.
type Rules struct {
	// Mode is the deployment's timeout mode.
	Mode Mode
	// HasWatermark reports that an event-time field and a watermark delay are configured,
	// so the deployment has a watermark W.
	HasWatermark bool
}

// Validate checks the rules as a whole. The mode must be known ([ErrUnknownMode]), and
// [EventTime] requires a watermark ([ErrEventTimeNeedsWatermark]), as Spark's
// FlatMapGroupsWithStateExec requires a watermark for EventTimeTimeout.
func (r Rules) Validate() error {
	if !r.Mode.Valid() {
		return fmt.Errorf("%w %s: want none, processing_time or event_time", ErrUnknownMode, r.Mode)
	}
	if r.Mode == EventTime && !r.HasWatermark {
		return ErrEventTimeNeedsWatermark
	}
	return nil
}

// HasTimeouts reports whether handlers may set timeouts at all (the mode is
// [ProcessingTime] or [EventTime]).
func (r Rules) HasTimeouts() bool { return r.Mode == ProcessingTime || r.Mode == EventTime }

// DropsLate reports whether late rows are dropped (docs/semantics.md, "A micro-batch": Late
// rows): only with event-time timeouts and a watermark. Spark's FlatMapGroupsWithStateExec
// filters input with the late-event watermark predicate only when timeoutConf is
// EventTimeTimeout; with other modes every row reaches the handler.
func (r Rules) DropsLate() bool { return r.Mode == EventTime && r.HasWatermark }

// IsLate reports whether a row with event time eventMs is late under watermark watermarkMs:
// eventMs <= watermarkMs. A row exactly at the watermark is late, as Spark's watermark
// predicate is eventTime <= watermark (WatermarkSupport, LessThanOrEqual).
func IsLate(eventMs, watermarkMs int64) bool { return eventMs <= watermarkMs }

// ExpiryBound returns the bound below which timeouts fire in a batch with processing time
// processingMs (T) and watermark watermarkMs (W): T for [ProcessingTime], W for [EventTime]
// (docs/semantics.md, "A micro-batch": Timeout calls). ok is false when no timeout can fire:
// mode [None], an unknown mode, or event-time timeouts without a watermark. This is the
// timeoutThreshold of Spark's FlatMapGroupsWithStateExec: batchTimestampMs for
// ProcessingTimeTimeout, eventTimeWatermarkForEviction for EventTimeTimeout. Use with
// [Fires].
func (r Rules) ExpiryBound(processingMs, watermarkMs int64) (bound int64, ok bool) {
	switch {
	case r.Mode == ProcessingTime:
		return processingMs, true
	case r.Mode == EventTime && r.HasWatermark:
		return watermarkMs, true
	}
	return 0, false
}

// Fires reports whether a timeout at timeoutMs fires under bound (from
// [Rules.ExpiryBound]): timeoutMs < bound, strictly. Spark: "timeoutTimestamp <
// timeoutThreshold". A timeout exactly at the bound waits for the next batch.
func Fires(timeoutMs, bound int64) bool { return timeoutMs < bound }

// ShouldRunNoDataBatch reports whether the runtime should run a batch without input
// (docs/semantics.md, "A micro-batch": No-data batches): with [ProcessingTime], at every
// trigger interval; with [EventTime], right after a batch that advanced the watermark; never
// otherwise. This is Spark's FlatMapGroupsWithStateExec.shouldRunAnotherBatch.
func (r Rules) ShouldRunNoDataBatch(watermarkAdvanced bool) bool {
	switch {
	case r.Mode == ProcessingTime:
		return true
	case r.Mode == EventTime && r.HasWatermark:
		return watermarkAdvanced
	}
	return false
}

// CurrentWatermark returns watermarkMs when the deployment has a watermark and
// [ErrNoWatermark] otherwise: what the state handle's currentWatermarkMs gives a handler
// (docs/semantics.md, "The state handle"; Spark's GroupStateImpl.getCurrentWatermarkMs).
func (r Rules) CurrentWatermark(watermarkMs int64) (int64, error) {
	if !r.HasWatermark {
		return 0, ErrNoWatermark
	}
	return watermarkMs, nil
}

// CheckTimeoutDuration checks a handler's setTimeoutDuration(durationMs), as Spark's
// GroupStateImpl.setTimeoutDuration does: the mode must be [ProcessingTime]
// ([ErrDurationNotAllowed]) and durationMs > 0 ([ErrNonPositiveDuration]).
func (r Rules) CheckTimeoutDuration(durationMs int64) error {
	if r.Mode != ProcessingTime {
		return fmt.Errorf("%w (timeout mode is %s)", ErrDurationNotAllowed, r.Mode)
	}
	if durationMs <= 0 {
		return fmt.Errorf("%w: got %d ms", ErrNonPositiveDuration, durationMs)
	}
	return nil
}

// DurationTimeout checks setTimeoutDuration(durationMs) with [Rules.CheckTimeoutDuration]
// and returns the timeout it sets in a batch with processing time processingMs:
// processingMs + durationMs (Spark: timeoutTimestamp = durationMs + batchProcessingTimeMs).
// It fails with [ErrTimeoutOverflow] when the sum does not fit in int64.
func (r Rules) DurationTimeout(processingMs, durationMs int64) (int64, error) {
	if err := r.CheckTimeoutDuration(durationMs); err != nil {
		return 0, err
	}
	if processingMs > math.MaxInt64-durationMs {
		return 0, fmt.Errorf("%w: processing time %d ms + duration %d ms", ErrTimeoutOverflow, processingMs, durationMs)
	}
	return processingMs + durationMs, nil
}

// CheckTimeoutTimestamp checks a handler's setTimeoutTimestamp(tsMs) under watermark
// watermarkMs, as Spark's GroupStateImpl.setTimeoutTimestamp does: the mode must be
// [EventTime] ([ErrTimestampNotAllowed]), tsMs > 0 ([ErrNonPositiveTimestamp]) and
// tsMs >= watermarkMs ([ErrTimestampBeforeWatermark]; Spark: "Timeout timestamp cannot be
// earlier than the current watermark"). A timestamp equal to the watermark is allowed; it
// fires once the watermark passes it.
func (r Rules) CheckTimeoutTimestamp(tsMs, watermarkMs int64) error {
	if r.Mode != EventTime {
		return fmt.Errorf("%w (timeout mode is %s)", ErrTimestampNotAllowed, r.Mode)
	}
	return checkTimestamp(tsMs, watermarkMs)
}

func checkTimestamp(tsMs, watermarkMs int64) error {
	if tsMs <= 0 {
		return fmt.Errorf("%w: got %d ms", ErrNonPositiveTimestamp, tsMs)
	}
	if tsMs < watermarkMs {
		return fmt.Errorf("%w: timestamp %d ms, watermark %d ms", ErrTimestampBeforeWatermark, tsMs, watermarkMs)
	}
	return nil
}

// CheckTimeoutResult validates an absolute timeout tsMs that a guest call returned, in a
// batch with processing time processingMs and watermark watermarkMs. The guest SDKs check
// setTimeoutDuration and setTimeoutTimestamp themselves; the host checks the outcome
// again, since it cannot trust the guest:
//
//   - [ProcessingTime]: tsMs > processingMs, that is a duration > 0
//     ([ErrNonPositiveDuration]).
//   - [EventTime]: tsMs > 0 ([ErrNonPositiveTimestamp]) and tsMs >= watermarkMs
//     ([ErrTimestampBeforeWatermark]).
//   - [None] or an unknown mode: always [ErrTimeoutNotAllowed].
func (r Rules) CheckTimeoutResult(tsMs, processingMs, watermarkMs int64) error {
	switch r.Mode {
	case ProcessingTime:
		if tsMs <= processingMs {
			return fmt.Errorf("%w: timeout %d ms is not after the batch processing time %d ms", ErrNonPositiveDuration, tsMs, processingMs)
		}
		return nil
	case EventTime:
		return checkTimestamp(tsMs, watermarkMs)
	}
	return fmt.Errorf("%w (timeout mode is %s, got timeout %d ms)", ErrTimeoutNotAllowed, r.Mode, tsMs)
}
