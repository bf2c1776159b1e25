package groupstate

import (
	"errors"
	"sort"

	"github.com/groupstate/groupstate/abi"
)

// ErrTimersNotAllowed is returned by [Timers.Register] and [Timers.Delete] when the
// deployment's timeout mode is none: timers need timeout processing_time (a timer at ts fires
// once the batch's processing time is after ts) or event_time (once the watermark is).
var ErrTimersNotAllowed = errors.New("groupstate: timers need timeout processing_time or event_time in the deployment spec")

// Timers gives a processor's call the timers of its key (Spark's TimerValues and the timer
// methods of StatefulProcessorHandle) and the batch's times. A key may hold any number of
// timers; registering the same timestamp twice is one timer. It is valid only during the call
// that received it, on the module's goroutine.
type Timers struct {
	e *v2Module
}

// Register registers a timer at ts (epoch milliseconds). It fires, with a call of
// HandleExpiredTimer, in the first batch after ts: when the batch's processing time
// (timeout processing_time) or watermark (timeout event_time) is strictly after ts. It returns
// [ErrTimersNotAllowed] under timeout mode none.
func (t *Timers) Register(ts int64) error {
	e := t.e
	e.begin("Timers.Register")
	if e.m.config.mode == abi.TimeoutNone {
		return ErrTimersNotAllowed
	}
	e.ops.TimerRegister(ts)
	e.markTimer(ts, false)
	return nil
}

// Delete deletes the timer at ts, if any. In a call of HandleExpiredTimer, deleting a later
// timer of the same batch keeps it from firing. It returns [ErrTimersNotAllowed] under timeout
// mode none.
func (t *Timers) Delete(ts int64) error {
	e := t.e
	e.begin("Timers.Delete")
	if e.m.config.mode == abi.TimeoutNone {
		return ErrTimersNotAllowed
	}
	e.ops.TimerDelete(ts)
	e.markTimer(ts, true)
	return nil
}

// List returns the key's timers in ascending order (none under timeout mode none), as the
// host has them with the call's registrations and deletions applied.
func (t *Timers) List() []int64 {
	e := t.e
	e.begin("Timers.List")
	if e.m.config.mode == abi.TimeoutNone {
		return nil
	}
	mark := e.ops.Len()
	e.ops.TimerList()
	a := e.read(mark, abi.OpTimerList)
	out := make([]int64, 0, a.Count)
	for ts := range a.Timers() {
		out = append(out, ts)
	}
	return out
}

// CurrentProcessingTimeMs returns the batch's processing time in epoch milliseconds: the
// wall clock at the start of the batch, the same for every call in the batch.
func (t *Timers) CurrentProcessingTimeMs() int64 { return t.e.procMs }

// CurrentWatermarkMs returns the batch's event-time watermark in epoch milliseconds (0 in the
// first batch), or [ErrNoWatermark] when the deployment configures none.
func (t *Timers) CurrentWatermarkMs() (int64, error) {
	if !t.e.m.config.hasWatermark {
		return 0, ErrNoWatermark
	}
	return t.e.wmMs, nil
}

// markTimer records, in a TIMERS group, that a call deleted (or registered again) a timer
// that is still to fire in the group: the last of the two decides whether it fires.
func (e *v2Module) markTimer(ts int64, deleted bool) {
	if e.group.Kind != abi.GroupTimers || e.timerIdx < 0 {
		return
	}
	n := int(e.group.Count)
	j := sort.Search(n, func(i int) bool { return e.group.Timer(i) >= ts })
	if j < n && j > e.timerIdx && e.group.Timer(j) == ts {
		e.skip[j] = deleted
	}
}
