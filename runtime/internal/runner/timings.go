package runner

import (
	"log/slog"
	"time"
)

// slowStep is how long a multi-step operation (opening a deployment) may take before its
// steps' durations are logged, so that a slow start says where its time went.
const slowStep = 2 * time.Second

// timings records how long each step of an operation took. Not safe for concurrent use.
type timings struct {
	start, last time.Time
	steps       []any // slog attributes: step name, duration
}

// startTimings starts timing an operation's steps.
func startTimings() *timings {
	now := time.Now()
	return &timings{start: now, last: now}
}

// mark ends the step named step.
func (t *timings) mark(step string) {
	now := time.Now()
	t.steps = append(t.steps, step, now.Sub(t.last).Round(time.Millisecond))
	t.last = now
}

// attrs returns the steps' durations as slog attributes (step name, duration), after the
// whole's: "took", then each step.
func (t *timings) attrs() []any {
	return append([]any{"took", t.last.Sub(t.start).Round(time.Millisecond)}, t.steps...)
}

// logIfSlow logs msg with every step's duration when the whole took slowStep or more.
func (t *timings) logIfSlow(logger *slog.Logger, msg string) {
	if total := time.Since(t.start); total >= slowStep {
		logger.Warn(msg, append([]any{"took", total.Round(time.Millisecond)}, t.steps...)...)
	}
}
