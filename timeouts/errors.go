package timeouts

import "errors"

// Errors returned by this package. They are wrapped with the offending values, so match
// them with [errors.Is].
var (
	// ErrUnknownMode is returned by [ParseMode] and [Rules.Validate] for a timeout mode
	// other than none, processing_time and event_time.
	ErrUnknownMode = errors.New("timeouts: unknown timeout mode")

	// ErrEventTimeNeedsWatermark is returned by [Rules.Validate] for event-time timeouts
	// without an event-time column and watermark delay. Spark refuses the same query:
	// "Watermark must be specified in the query using withWatermark() for using event-time
	// timeout in a [map|flatMap]GroupsWithState."
	ErrEventTimeNeedsWatermark = errors.New("timeouts: event_time timeout needs an event-time field and a watermark delay")

	// ErrDurationNotAllowed is returned when a handler sets a timeout duration without
	// processing-time timeouts. Spark (GroupStateImpl.setTimeoutDuration): "Cannot set
	// timeout duration without enabling processing time timeout".
	ErrDurationNotAllowed = errors.New("timeouts: cannot set a timeout duration without processing_time timeout")

	// ErrNonPositiveDuration is returned for a timeout duration <= 0, and for a
	// processing-time timeout that is not after the batch processing time. Spark: "Timeout
	// duration must be positive".
	ErrNonPositiveDuration = errors.New("timeouts: timeout duration must be positive")

	// ErrTimestampNotAllowed is returned when a handler sets a timeout timestamp without
	// event-time timeouts. Spark (GroupStateImpl.setTimeoutTimestamp): "Cannot set timeout
	// timestamp without enabling event time timeout".
	ErrTimestampNotAllowed = errors.New("timeouts: cannot set a timeout timestamp without event_time timeout")

	// ErrNonPositiveTimestamp is returned for a timeout timestamp <= 0. Spark: "Timeout
	// timestamp must be positive".
	ErrNonPositiveTimestamp = errors.New("timeouts: timeout timestamp must be positive")

	// ErrTimestampBeforeWatermark is returned for a timeout timestamp below the current
	// watermark. Spark: "Timeout timestamp cannot be earlier than the current watermark".
	ErrTimestampBeforeWatermark = errors.New("timeouts: timeout timestamp cannot be earlier than the current watermark")

	// ErrTimeoutNotAllowed is returned by [Rules.CheckTimeoutResult] when a handler left a
	// timeout although the deployment's timeout mode is none.
	ErrTimeoutNotAllowed = errors.New("timeouts: cannot set a timeout with timeout mode none")

	// ErrTimeoutOverflow is returned by [Rules.DurationTimeout] when the batch processing
	// time plus the duration does not fit in int64 milliseconds.
	ErrTimeoutOverflow = errors.New("timeouts: timeout timestamp overflows int64 milliseconds")

	// ErrNoWatermark is returned by [Rules.CurrentWatermark] when the deployment has no
	// watermark. Spark (GroupStateImpl.getCurrentWatermarkMs): "Cannot get event time
	// watermark timestamp without setting watermark before [map|flatMap]GroupsWithState".
	ErrNoWatermark = errors.New("timeouts: no watermark: the deployment has no event-time field and watermark delay")

	// ErrBadEventTime is returned by [ParseEventTime] and [EventTimeFromValue] for a value
	// that is neither epoch milliseconds nor an RFC 3339 timestamp.
	ErrBadEventTime = errors.New("timeouts: bad event time")

	// ErrBadDuration is returned by [ParseDuration] for text that is not a duration with
	// a unit.
	ErrBadDuration = errors.New("timeouts: bad duration")

	// ErrNegativeDuration is returned by [ParseDuration] for a negative duration.
	ErrNegativeDuration = errors.New("timeouts: negative duration")
)
