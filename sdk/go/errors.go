package groupstate

import (
	"errors"
	"strconv"
)

// Errors returned by the state handle. They follow the checks of Spark's GroupStateImpl.
var (
	// ErrNoState is returned by Get when the key has no state (never set, or removed).
	ErrNoState = errors.New("groupstate: state is either not defined or has already been removed")

	// ErrNullState is returned by Update for a null value: a nil []byte for [RawState], a
	// value that encodes to JSON null for [GroupState].
	ErrNullState = errors.New("groupstate: null is not a valid state value")

	// ErrDurationNotAllowed is returned by SetTimeoutDuration unless the deployment's timeout
	// is processing_time.
	ErrDurationNotAllowed = errors.New("groupstate: cannot set timeout duration without processing_time timeout")

	// ErrNonPositiveDuration is returned by SetTimeoutDuration for a duration that is not at
	// least one millisecond.
	ErrNonPositiveDuration = errors.New("groupstate: timeout duration must be positive")

	// ErrTimestampNotAllowed is returned by SetTimeoutTimestamp unless the deployment's timeout
	// is event_time.
	ErrTimestampNotAllowed = errors.New("groupstate: cannot set timeout timestamp without event_time timeout")

	// ErrNonPositiveTimestamp is returned by SetTimeoutTimestamp for a timestamp <= 0.
	ErrNonPositiveTimestamp = errors.New("groupstate: timeout timestamp must be positive")

	// ErrTimestampBeforeWatermark is matched (with errors.Is) by the error SetTimeoutTimestamp
	// returns for a timestamp earlier than the current watermark; that error's message names
	// both values.
	ErrTimestampBeforeWatermark = errors.New("groupstate: timeout timestamp cannot be earlier than the current watermark")

	// ErrTimeoutOverflow is returned by SetTimeoutDuration when processing time plus the
	// duration does not fit in an int64 of milliseconds.
	ErrTimeoutOverflow = errors.New("groupstate: timeout duration overflows the processing time")

	// ErrNoWatermark is returned by CurrentWatermarkMs when the deployment configures no
	// watermark (no event_time with watermark_delay).
	ErrNoWatermark = errors.New("groupstate: no watermark is defined (configure event_time with a watermark_delay)")
)

// watermarkError is the error of SetTimeoutTimestamp for a timestamp before the watermark.
type watermarkError struct{ ts, wm int64 }

func (e *watermarkError) Error() string {
	return "groupstate: timeout timestamp (" + strconv.FormatInt(e.ts, 10) +
		") cannot be earlier than the current watermark (" + strconv.FormatInt(e.wm, 10) + ")"
}

func (e *watermarkError) Is(target error) bool { return target == ErrTimestampBeforeWatermark }
