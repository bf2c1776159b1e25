package cluster

import (
	"math"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// openWatermarks opens the bucket as one runtime does, on clock.
func (e *env) openWatermarks(t *testing.T, clock timeouts.Clock) *Watermarks {
	t.Helper()
	w, err := OpenWatermarks(e.ctx, e.js, WatermarkOptions{Now: clock.Now, Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(w.Close)
	return w
}

// revision is the KV revision of key (0: none).
func (w *Watermarks) revision(t *testing.T, e *env, key string) uint64 {
	t.Helper()
	en, err := w.kv.Get(e.ctx, key)
	if err != nil {
		return 0
	}
	return en.Revision()
}

// putInFlight tells whether a put of key is in flight.
func (w *Watermarks) putInFlight(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pubs[key]
	return p != nil && p.inflight
}

// TestWatermarks: one runtime's records reach another's watch; a partition's puts are at most
// one per WatermarkPutInterval (by the injected clock), none when nothing changed, and other
// partitions are not held back by it; the bound counts the partition's own max always, leaves
// out partitions that never published and those idle for event_time.idle, and ignores records
// beyond the partition count.
func TestWatermarks(t *testing.T) {
	e := newEnv(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	a := e.openWatermarks(t, clock) // runs partitions 0 and 2 of d
	b := e.openWatermarks(t, clock) // runs partition 1
	t0 := clock.Now()
	const idle = time.Minute

	live := func(ms int64) WatermarkRecord { return WatermarkRecord{MaxEventMs: ms, LastRowAt: clock.Now()} }
	if got := b.Min("d", 1, 3, live(50_000), idle); got != 50_000 {
		t.Fatalf("nobody published: bound %d, want the own max 50000", got)
	}
	changed := b.Changed()
	a.Publish("d", 0, WatermarkRecord{MaxEventMs: 10_000, LastRowAt: t0})
	eventually(t, 5*time.Second, "partition 0's record at b", func() bool {
		r, ok := b.Record("d", 0)
		return ok && r.MaxEventMs == 10_000 && r.LastRowAt.Equal(t0) && r.UpdatedAt.Equal(t0)
	})
	select {
	case <-changed:
	default:
		t.Fatal("Changed not signalled by a new record")
	}
	for _, tc := range []struct {
		what       string
		w          *Watermarks
		part       int
		own, bound int64
	}{
		{"another partition behind bounds", b, 1, 50_000, 10_000},
		{"the own max counts while not idle", b, 1, 5_000, 5_000},
		{"a partition's own record is not another's", a, 0, 20_000, 20_000},
	} {
		if got := tc.w.Min("d", tc.part, 3, live(tc.own), idle); got != tc.bound {
			t.Errorf("%s: bound %d, want %d", tc.what, got, tc.bound)
		}
	}

	// The throttle: at most one put a second per partition.
	key := leaseKey("d", 0)
	eventually(t, 5*time.Second, "the first put done", func() bool { return !a.putInFlight(key) })
	rev := a.revision(t, e, key)
	for _, step := range []time.Duration{0, 500 * time.Millisecond, 499 * time.Millisecond} {
		clock.Advance(step)
		a.Publish("d", 0, WatermarkRecord{MaxEventMs: 20_000, LastRowAt: t0})
		if a.putInFlight(key) {
			t.Fatalf("a put %s after the last one", clock.Now().Sub(t0))
		}
	}
	if r, _ := b.Record("d", 0); r.MaxEventMs != 10_000 {
		t.Fatalf("a held-back record reached the bucket: %+v", r)
	}
	// Another partition is not held back by partition 0's interval.
	a.Publish("d", 2, WatermarkRecord{MaxEventMs: 1_000, LastRowAt: clock.Now()})
	clock.Advance(time.Millisecond) // a second after the last put: the held-back record goes out
	a.Publish("d", 0, WatermarkRecord{MaxEventMs: 20_000, LastRowAt: t0})
	eventually(t, 5*time.Second, "both records at b", func() bool {
		r0, _ := b.Record("d", 0)
		r2, _ := b.Record("d", 2)
		return r0.MaxEventMs == 20_000 && r2.MaxEventMs == 1_000
	})
	eventually(t, 5*time.Second, "the put done", func() bool { return !a.putInFlight(key) })
	if got := a.revision(t, e, key); got <= rev {
		t.Fatalf("revision %d after the put, was %d", got, rev)
	}
	rev = a.revision(t, e, key)
	clock.Advance(2 * time.Second)
	a.Publish("d", 0, WatermarkRecord{MaxEventMs: 20_000, LastRowAt: t0}) // nothing changed
	if a.putInFlight(key) || a.revision(t, e, key) != rev {
		t.Fatal("an unchanged record was put again")
	}

	// Idleness: partition 0's last row is 3 s old, partition 2's 2.001 s.
	for _, tc := range []struct {
		what    string
		advance time.Duration
		idle    time.Duration
		parts   int
		bound   int64
	}{
		{"both live", 0, idle, 3, 1_000},
		{"records beyond the partition count are ignored", 0, idle, 2, 20_000},
		{"partition 0 idle, 2 not", 0, 2500 * time.Millisecond, 3, 1_000},
		{"idle from exactly event_time.idle on", 0, 3 * time.Second, 2, 50_000},
		{"both idle", idle, idle, 3, 50_000},
		{"no idleness", 0, 0, 3, 1_000},
	} {
		clock.Advance(tc.advance)
		if got := b.Min("d", 1, tc.parts, live(50_000), tc.idle); got != tc.bound {
			t.Errorf("%s: bound %d, want %d", tc.what, got, tc.bound)
		}
	}
	// The partition itself idle: left out of its own bound, it follows the others; with
	// nothing else counting, there is no bound.
	idleOwn := WatermarkRecord{MaxEventMs: 50_000, LastRowAt: clock.Now().Add(-2 * idle)}
	if got := b.Min("d", 1, 3, idleOwn, 0); got != 1_000 {
		t.Errorf("own idle, no idleness: bound %d, want 1000", got)
	}
	if got := b.Min("d", 1, 3, idleOwn, idle); got != math.MinInt64 {
		t.Errorf("everything idle: bound %d, want none (math.MinInt64)", got)
	}

	a.Close()
	a.Publish("d", 0, WatermarkRecord{MaxEventMs: 99_000}) // after Close: nothing
	if a.putInFlight(key) {
		t.Fatal("a put after Close")
	}
}

// TestWatermarksAdopt: a deployment adopts another's record of a partition as it is in the
// bucket, and the watch delivers it; adopting a record that does not exist puts nothing.
func TestWatermarksAdopt(t *testing.T) {
	e := newEnv(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	w := e.openWatermarks(t, clock)
	w.Publish("old", 1, WatermarkRecord{MaxEventMs: 42_000, LastRowAt: clock.Now()})
	eventually(t, 5*time.Second, "old's record stored", func() bool { return w.revision(t, e, "old.1") != 0 })
	testutil.Require(t, w.Adopt(e.ctx, "old", "new", 1))
	eventually(t, 5*time.Second, "new's record delivered", func() bool {
		r, ok := w.Record("new", 1)
		return ok && r.MaxEventMs == 42_000 && r.LastRowAt.Equal(clock.Now())
	})
	testutil.Require(t, w.Adopt(e.ctx, "old", "new", 0))
	if rev := w.revision(t, e, "new.0"); rev != 0 {
		t.Fatalf("adopting a record old does not have put one (revision %d)", rev)
	}
}
