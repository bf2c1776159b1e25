package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// TestDue: Engine.Due is exactly when a batch without input next does something. A new
// engine has something to do at once (the first batch delivers what an earlier engine left);
// once that ran, and after every batch whose outputs are delivered, nothing is due without
// a timer; a processing-time timeout at t is due at t+1 (a no-data batch at t skips, one at
// t+1 fires it); an ABI v2 TTL expiring at e is due at e; event-time timeouts are never due
// by processing time.
func TestDue(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		eng  func(t *testing.T) *engine.Engine
		row  string // at processing time 1000
		due  int64  // 0: none
		what func(rep *engine.BatchReport) int
	}{
		{"processing-time timeout", func(t *testing.T) *engine.Engine {
			return newEngine(t, specFromYAML(t, probeSpec), probeWasm(t), nil, &collector{})
		}, `{"k":"a","ops":[{"update":"x"},{"dur":5000}]}`, 6001, func(rep *engine.BatchReport) int { return rep.TimeoutCalls }},
		{"event-time timeout", func(t *testing.T) *engine.Engine {
			return newEngine(t, specFromYAML(t, probeEventTimeFailSpec), probeWasm(t), nil, &collector{})
		}, `{"k":"a","ts":50000,"ops":[{"update":"x"},{"ts":60000}]}`, 0, func(rep *engine.BatchReport) int { return rep.TimeoutCalls }},
		{"v2 timer", func(t *testing.T) *engine.Engine {
			return v2Engine(t, v2Spec(t, "pt", ""), openStore(t, ""), &collector{}, nil)
		}, `{"k": "a", "ops": [{"reg": 1500}]}`, 1501, func(rep *engine.BatchReport) int { return rep.TimeoutCalls }},
		{"v2 TTL", func(t *testing.T) *engine.Engine {
			return v2Engine(t, v2Spec(t, "pt", ""), openStore(t, ""), &collector{}, nil)
		}, `{"k": "a", "ops": [{"tset": 1}]}`, 2000, func(rep *engine.BatchReport) int { return rep.TTLExpired }},
		{"no timer", func(t *testing.T) *engine.Engine {
			return newEngine(t, specFromYAML(t, probeSpec), probeWasm(t), nil, &collector{})
		}, `{"k":"a","ops":[{"update":"x"}]}`, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			eng := c.eng(t)
			if at, ok, err := eng.Due(); err != nil || !ok || at != engine.DueNow {
				t.Fatalf("a new engine: Due = %d, %v, %v; want DueNow", at, ok, err)
			}
			_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(c.row)})
			require(t, err)
			// What the batch left to deliver or acknowledge goes with the next batch.
			for i := 0; ; i++ {
				at, ok, err := eng.Due()
				require(t, err)
				if !ok || at != engine.DueNow {
					break
				}
				if i == 3 {
					t.Fatal("Due stays DueNow after no-data batches")
				}
				_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000})
				require(t, err)
			}
			at, ok, err := eng.Due()
			require(t, err)
			if c.due == 0 {
				if ok {
					t.Fatalf("Due = %d, want none", at)
				}
				return
			}
			if !ok || at != c.due {
				t.Fatalf("Due = %d, %v; want %d", at, ok, c.due)
			}
			rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: at - 1})
			require(t, err)
			if !rep.Skipped || c.what(rep) != 0 {
				t.Fatalf("a no-data batch just before Due did something: %+v", rep)
			}
			rep, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: at})
			require(t, err)
			if rep.Skipped || c.what(rep) == 0 {
				t.Fatalf("a no-data batch at Due did nothing: %+v", rep)
			}
		})
	}
}

// TestReleaseInstances: an engine releases its idle module instances, and the next batch
// runs as before on a new one (state kept: it is in the store, not the instance).
func TestReleaseInstances(t *testing.T) {
	sink := &collector{}
	eng := newEngine(t, specFromYAML(t, probeSpec), probeWasm(t), nil, sink)
	_, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(`{"k":"a","ops":[{"update":"a1"}]}`)})
	require(t, err)
	if n := eng.ReleaseInstances(context.Background()); n != 1 {
		t.Fatalf("released %d instances, want 1", n)
	}
	sink.take(state.OutboxOutput)
	if got := stateOf(t, eng, sink, 2000, "a"); !strings.Contains(got, `"state":"a1"`) {
		t.Fatalf("after a release: %s", got)
	}
	if n := eng.ReleaseInstances(context.Background()); n != 1 {
		t.Fatalf("released %d instances, want the 1 the batch made", n)
	}
}
