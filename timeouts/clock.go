package timeouts

import (
	"sync"
	"time"
)

// Clock gives the wall-clock time. The engine reads it once at the start of each batch
// to get the batch processing time T (docs/semantics.md, "A micro-batch"), so tests can
// inject a [ManualClock].
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// System is the wall clock, [time.Now].
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a [Clock] that moves only when told, for tests. It is safe for
// concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a clock that reads t until it is set or advanced.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set sets the clock to t, which may be earlier than its time.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock by d (backwards when d is negative).
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// UnixMs returns t as epoch milliseconds, the unit of every time in this package.
func UnixMs(t time.Time) int64 { return t.UnixMilli() }

// FromUnixMs returns epoch milliseconds ms as a UTC time.
func FromUnixMs(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
