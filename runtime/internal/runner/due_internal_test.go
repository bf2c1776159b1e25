package runner

import (
	"context"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// TestLiveSourceDue: an idle live source runs a no-data batch only when the engine has
// something to do: at once for a new engine (it delivers what an earlier one left), then
// never without a timer (no wake-up at all: the loop waits for input), and with a
// processing-time timeout not before the runner's clock passed it, then at once. The wake-up
// it asks for comes when the timeout is due, not every trigger interval.
func TestLiveSourceDue(t *testing.T) {
	ctx := context.Background()
	l, eng, clock := probeSource(t)
	batch := func(rows ...engine.Row) {
		t.Helper()
		_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: timeouts.UnixMs(clock.Now()), Rows: rows})
		testutil.Require(t, err)
	}

	if run, _ := l.due(); !run {
		t.Fatal("a new engine: no batch due")
	}
	batch()
	if run, wake := l.due(); run || wake != nil {
		t.Fatalf("idle without timers: run %v, wake-up %v; want neither", run, wake != nil)
	}
	batch(engine.Row{Data: []byte(`{"k":"a","ops":[{"update":"x"},{"dur":60000}]}`)}) // due at T+60s+1ms
	for range 3 {
		if run, _ := l.due(); !run {
			break
		}
		batch() // the first batch's delivery
	}
	run, wake := l.due()
	if run || wake == nil {
		t.Fatalf("a timeout a minute ahead: run %v, wake-up %v; want a wake-up only", run, wake != nil)
	}
	select {
	case <-wake:
		t.Fatal("woken before the timeout was due")
	case <-time.After(100 * time.Millisecond): // several trigger intervals
	}
	clock.Advance(60 * time.Second)
	if run, _ := l.due(); run {
		t.Fatal("due at the timeout's time: it fires only after it (ts < T)")
	}
	clock.Advance(time.Millisecond)
	if run, _ := l.due(); !run {
		t.Fatal("the timeout passed: no batch due")
	}
}

// TestReleaseIdle: a live source releases its engine's module instances once it idled
// instanceIdle, not before.
func TestReleaseIdle(t *testing.T) {
	ctx := context.Background()
	l, eng, _ := probeSource(t)
	l.busyAt = time.Now()
	l.releaseIdle(ctx)
	if l.released {
		t.Fatal("released at once")
	}
	l.busyAt = time.Now().Add(-instanceIdle)
	l.releaseIdle(ctx)
	if n := eng.ReleaseInstances(ctx); !l.released || n != 0 {
		t.Fatalf("after idling instanceIdle: released %v, %d instances left to release", l.released, n)
	}
}

// probeSource returns a live source over an engine of the probe module under processing-time
// timeouts, with a manual clock, outside any service (enough for due and releaseIdle).
func probeSource(t *testing.T) (*liveSource, *engine.Engine, *timeouts.ManualClock) {
	t.Helper()
	ctx := context.Background()
	st, err := state.Open(t.TempDir(), &state.Options{Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(func() { st.Close() })
	sp, err := spec.ParseSpec([]byte("name: probe\nkey: {field: k}\ntimeout: processing_time\n"))
	testutil.Require(t, err)
	rt, err := engine.New(engine.Options{CacheDir: testutil.CompileCacheDir(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(func() { rt.Close(ctx) })
	eng, err := rt.NewEngine(ctx, engine.Config{Spec: sp, Wasm: testutil.ReadFile(t, "../../engine/testdata/probe/probe.wasm"), Store: st, Sink: discardSink{}})
	testutil.Require(t, err)
	t.Cleanup(func() { eng.Close(ctx) })
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	r := &Runner{env: Config{Clock: clock}, unit: unit{spec: sp, logger: testutil.DiscardLogger()}, opening: opening{eng: eng}}
	l := &liveSource{feed: feed{r: r}}
	t.Cleanup(l.close)
	return l, eng, clock
}

// discardSink delivers nothing anywhere.
type discardSink struct{}

func (discardSink) Deliver(context.Context, string, []state.OutboxEntry) error { return nil }

// TestLiveSourceDueOwedStatus: a status put the throttle refused (a batch committed less than
// statusEvery after the last put) wakes an idle live source when the throttle lets it, not
// only after the next fetch waited idlePoll for nothing; a silenced runner owes nothing.
func TestLiveSourceDueOwedStatus(t *testing.T) {
	ctx := context.Background()
	l, eng, clock := probeSource(t)
	if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: timeouts.UnixMs(clock.Now())}); err != nil {
		t.Fatal(err)
	}
	if run, wake := l.due(); run || wake != nil {
		t.Fatalf("idle, nothing owed: run %v, wake-up %v; want neither", run, wake != nil)
	}
	if _, ok := l.r.report.take(false); !ok {
		t.Fatal("the first put was refused")
	}
	if _, ok := l.r.report.take(false); ok {
		t.Fatal("a second put at once was not throttled")
	}
	run, wake := l.due()
	if run || wake == nil {
		t.Fatalf("a put owed: run %v, wake-up %v; want a wake-up only", run, wake != nil)
	}
	select {
	case <-wake:
	case <-time.After(statusEvery + idlePoll/2):
		t.Fatal("the owed put's wake-up did not come within statusEvery")
	}
	if _, ok := l.r.report.take(false); !ok {
		t.Fatal("the owed put was still throttled when the wake-up came")
	}
	if run, wake := l.due(); run || wake != nil {
		t.Fatalf("the put made: run %v, wake-up %v; want neither", run, wake != nil)
	}
	l.r.report.take(false) // owed again
	l.r.report.silence()
	if run, wake := l.due(); run || wake != nil {
		t.Fatalf("silenced with a put owed: run %v, wake-up %v; want neither", run, wake != nil)
	}
}
