package groupstate

import (
	"math"
	"time"

	"github.com/groupstate/groupstate/abi"
)

// RawState is the state handle of one call of a raw handler: the key's state value as bytes,
// with Spark's GroupState semantics (docs/semantics.md, "The state handle"). It is valid
// only during the call that received it.
//
// Each call starts with the value the key had before (if any) and with no timeout: a timeout
// set in an earlier call is cleared unless this call sets one again, so a timeout fires once
// unless it is re-armed. The last of [RawState.Update] and [RawState.Remove] decides what
// happens to the stored value; when neither is called the value is kept as it was.
type RawState struct {
	exists   bool
	value    []byte // current value; aliases the input buffer or owned (see update)
	owned    []byte // reused storage for values passed to Update
	action   abi.Action
	timedOut bool

	mode         abi.TimeoutMode
	hasWatermark bool
	watermarkMs  int64
	procTimeMs   int64

	timeoutSet bool
	timeoutMs  int64
}

// reset prepares s for the call of one group.
func (s *RawState) reset(g *abi.Group, h abi.ProcessHeader, mode abi.TimeoutMode, hasWatermark bool) {
	s.exists = g.Flags&abi.GroupStateExists != 0
	s.value = nil
	if s.exists {
		s.value = g.State
	}
	s.action = abi.ActionKeep
	s.timedOut = g.Flags&abi.GroupTimedOut != 0
	s.mode = mode
	s.hasWatermark = hasWatermark
	s.watermarkMs = h.WatermarkMs
	s.procTimeMs = h.ProcessingTimeMs
	s.timeoutSet = false
	s.timeoutMs = abi.NoTimeout
}

// result fills the state part of a group result.
func (s *RawState) result(r *abi.GroupResult) {
	r.Action = s.action
	if s.action == abi.ActionUpdate {
		r.State = s.value
	}
	if s.timeoutSet {
		r.Flags |= abi.ResultTimeoutSet
		r.TimeoutMs = s.timeoutMs
	}
}

// Exists reports whether the key has a state value: one it had before the call or one set by
// Update, and not removed since.
func (s *RawState) Exists() bool { return s.exists }

// Get returns the state value, or [ErrNoState] when there is none. The bytes may alias the
// host's input buffer: they are valid only during the call and must not be modified.
func (s *RawState) Get() ([]byte, error) {
	if !s.exists {
		return nil, ErrNoState
	}
	return s.value, nil
}

// GetOption returns the state value and true, or nil and false when there is none. The bytes
// are valid only during the call and must not be modified.
func (s *RawState) GetOption() ([]byte, bool) {
	if !s.exists {
		return nil, false
	}
	return s.value, true
}

// Update sets the state value to a copy of v (which may be empty but not nil: nil is
// [ErrNullState]). It revives a value removed earlier in the call.
func (s *RawState) Update(v []byte) error {
	if v == nil {
		return ErrNullState
	}
	s.owned = append(s.owned[:0], v...)
	s.setOwned()
	return nil
}

// setOwned makes s.owned the new value.
func (s *RawState) setOwned() {
	if s.owned == nil {
		s.owned = []byte{}
	}
	s.value = s.owned
	s.exists = true
	s.action = abi.ActionUpdate
}

// Remove removes the state value. It may be called more than once, and a later Update sets a
// value again. Remove does not clear a timeout set in the same call.
func (s *RawState) Remove() {
	s.exists = false
	s.value = nil
	s.action = abi.ActionRemove
}

// HasTimedOut reports whether this is a timeout call: the key's timeout expired, the call has
// no rows, and this is the handler's chance to emit a final record and remove the state.
func (s *RawState) HasTimedOut() bool { return s.timedOut }

// SetTimeoutDuration sets the key's timeout to the batch's processing time plus d. It is
// allowed only when the deployment's timeout is processing_time ([ErrDurationNotAllowed])
// and d must be at least one millisecond ([ErrNonPositiveDuration]); d is truncated to
// milliseconds. The timeout fires in the first batch whose processing time is strictly after
// it, unless the key gets data first. The last timeout set in a call wins.
func (s *RawState) SetTimeoutDuration(d time.Duration) error {
	if s.mode != abi.TimeoutProcessingTime {
		return ErrDurationNotAllowed
	}
	ms := d.Milliseconds()
	if ms <= 0 {
		return ErrNonPositiveDuration
	}
	if s.procTimeMs > math.MaxInt64-ms {
		return ErrTimeoutOverflow
	}
	s.timeoutSet = true
	s.timeoutMs = s.procTimeMs + ms
	return nil
}

// SetTimeoutTimestamp sets the key's timeout to the event time ms (epoch milliseconds). It is
// allowed only when the deployment's timeout is event_time ([ErrTimestampNotAllowed]); ms
// must be positive ([ErrNonPositiveTimestamp]) and not earlier than the current watermark
// (an error matching [ErrTimestampBeforeWatermark]). The timeout fires once the watermark
// passes it strictly, unless the key gets data first. The last timeout set in a call wins.
func (s *RawState) SetTimeoutTimestamp(ms int64) error {
	if s.mode != abi.TimeoutEventTime {
		return ErrTimestampNotAllowed
	}
	if ms <= 0 {
		return ErrNonPositiveTimestamp
	}
	if ms < s.watermarkMs {
		return &watermarkError{ts: ms, wm: s.watermarkMs}
	}
	s.timeoutSet = true
	s.timeoutMs = ms
	return nil
}

// CurrentWatermarkMs returns the batch's event-time watermark in epoch milliseconds (0 in the
// first batch), or [ErrNoWatermark] when the deployment configures none.
func (s *RawState) CurrentWatermarkMs() (int64, error) {
	if !s.hasWatermark {
		return 0, ErrNoWatermark
	}
	return s.watermarkMs, nil
}

// CurrentProcessingTimeMs returns the batch's processing time in epoch milliseconds: the
// wall clock at the start of the batch, the same for every call in the batch.
func (s *RawState) CurrentProcessingTimeMs() int64 { return s.procTimeMs }
