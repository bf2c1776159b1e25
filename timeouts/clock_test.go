package timeouts_test

import (
	"sync"
	"testing"
	"time"

	"github.com/groupstate/groupstate/timeouts"
)

func TestManualClock(t *testing.T) {
	start := time.UnixMilli(12000)
	c := timeouts.NewManualClock(start)
	var _ timeouts.Clock = c
	if got := timeouts.UnixMs(c.Now()); got != 12000 {
		t.Fatalf("Now() = %d ms, want 12000", got)
	}
	c.Advance(3 * time.Second)
	if got := timeouts.UnixMs(c.Now()); got != 15000 {
		t.Fatalf("after Advance(3s): %d ms, want 15000", got)
	}
	c.Advance(-time.Second)
	if got := timeouts.UnixMs(c.Now()); got != 14000 {
		t.Fatalf("after Advance(-1s): %d ms, want 14000", got)
	}
	c.Set(time.UnixMilli(1))
	if got := timeouts.UnixMs(c.Now()); got != 1 {
		t.Fatalf("after Set: %d ms, want 1", got)
	}
}

func TestManualClockConcurrent(t *testing.T) {
	c := timeouts.NewManualClock(time.UnixMilli(0))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := timeouts.UnixMs(c.Now()); got != 800 {
		t.Fatalf("Now() = %d ms, want 800", got)
	}
}

func TestSystemClock(t *testing.T) {
	before := time.Now()
	got := timeouts.System.Now()
	if got.Before(before) || got.Sub(before) > time.Minute {
		t.Fatalf("System.Now() = %v, not close to %v", got, before)
	}
}

func TestUnixMs(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Date(2024, 1, 2, 3, 4, 5, 123_999_999, time.UTC), 1704164645123},
		{time.Unix(-1, 0), -1000},
		{time.Unix(0, -1), -1}, // rounds toward the past
	} {
		if got := timeouts.UnixMs(tc.t); got != tc.want {
			t.Errorf("UnixMs(%v) = %d, want %d", tc.t, got, tc.want)
		}
	}
	if got := timeouts.FromUnixMs(1704164645123); !got.Equal(time.Date(2024, 1, 2, 3, 4, 5, 123e6, time.UTC)) || got.Location() != time.UTC {
		t.Errorf("FromUnixMs = %v", got)
	}
}
