package timeouts

import (
	"fmt"
	"strconv"
)

// Mode is a deployment's timeout mode, Spark's GroupStateTimeout. Its values are those of
// the wire ABI's timeout mode and must not change.
type Mode uint32

const (
	// None is Spark's NoTimeout: handlers may not set timeouts, and no timeout ever fires.
	None Mode = 0
	// ProcessingTime is Spark's ProcessingTimeTimeout: handlers set durations from the
	// batch processing time T, and a timeout ts fires when ts < T.
	ProcessingTime Mode = 1
	// EventTime is Spark's EventTimeTimeout: handlers set event-time timestamps, a timeout
	// ts fires when ts < W (the watermark), and late rows are dropped.
	EventTime Mode = 2
)

// modeNames lists the spellings accepted by ParseMode, in Mode order.
var modeNames = [...]string{None: "none", ProcessingTime: "processing_time", EventTime: "event_time"}

// ParseMode parses a timeout mode as written in a deployment spec: "none" (or empty),
// "processing_time" or "event_time". Any other value gives an error wrapping
// [ErrUnknownMode] that names the value and the allowed ones.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return None, nil
	}
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return None, fmt.Errorf("%w %q: want none, processing_time or event_time", ErrUnknownMode, s)
}

// String returns the mode as it is written in a deployment spec ("none",
// "processing_time", "event_time"), or "Mode(n)" for an unknown value.
func (m Mode) String() string {
	if m.Valid() {
		return modeNames[m]
	}
	return "Mode(" + strconv.FormatUint(uint64(m), 10) + ")"
}

// Valid reports whether m is one of [None], [ProcessingTime] and [EventTime].
func (m Mode) Valid() bool { return m <= EventTime }

// MarshalText implements [encoding.TextMarshaler] with the spec spelling. It fails with
// [ErrUnknownMode] for an unknown value.
func (m Mode) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("%w %s", ErrUnknownMode, m)
	}
	return []byte(modeNames[m]), nil
}

// UnmarshalText implements [encoding.TextUnmarshaler] with [ParseMode].
func (m *Mode) UnmarshalText(text []byte) error {
	v, err := ParseMode(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
