package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// clockSpec: processing-time timeouts, and event time with max_ahead, so a batch whose
// processing time went back would dead-letter good rows as event_time_ahead.
const clockSpec = `
name: clock
module: unused.wasm
key: {field: k}
event_time: {field: ts, watermark_delay: 0s, max_ahead: 1s}
timeout: processing_time
output: {subject: clock.out}
`

// clockStep is one RunBatch of TestProcessingTimeNeverDecreases: at the caller's clock, with
// rows (none: a no-data batch), and what it must show.
type clockStep struct {
	clock int64
	rows  []string
	// wantT is the processing time every call of the batch sees (the probes' "t"); wantTags
	// the tags of the probes emitted, in order.
	wantT      int64
	wantTags   []string
	wantBehind int64
	wantStep   bool
}

// TestProcessingTimeNeverDecreases: a batch runs at the larger of the caller's clock and the
// last committed processing time. While the clock is behind, the handler sees the committed
// time (never an earlier one), a timeout fires only once the clamped time passes it, a row
// whose event time is ahead of the clock but not of the committed time is not dead-lettered as
// event_time_ahead, and each step back is reported once with how far behind the clock is.
func TestProcessingTimeNeverDecreases(t *testing.T) {
	probe := func(k string, ts int64, ops string) string {
		return fmt.Sprintf(`{"k":%q,"ts":%d,"ops":[{"probe":"p"}%s]}`, k, ts, ops)
	}
	cases := []struct {
		name  string
		steps []clockStep
	}{
		{"step back then catch up", []clockStep{
			{clock: 10_000, rows: []string{probe("a", 10_000, `,{"dur":500}`)}, wantT: 10_000, wantTags: []string{"p"}},
			// 5 s back: T stays 10000; b's event time is 800 ms ahead of T (5.8 s of the clock).
			{clock: 5_000, rows: []string{probe("b", 10_800, "")}, wantT: 10_000, wantTags: []string{"p"}, wantBehind: 5_000, wantStep: true},
			// Still behind, moving forward: no new step; a's timeout (10500) is not due.
			{clock: 5_100, wantBehind: 4_900},
			{clock: 10_400, rows: []string{probe("c", 10_400, "")}, wantT: 10_400, wantTags: []string{"p"}},
			// Caught up: a's timeout fires at the clock.
			{clock: 10_600, wantT: 10_600, wantTags: []string{"timeout"}},
		}},
		{"two steps back", []clockStep{
			{clock: 10_000, rows: []string{probe("a", 10_000, "")}, wantT: 10_000, wantTags: []string{"p"}},
			{clock: 9_000, rows: []string{probe("a", 9_000, "")}, wantT: 10_000, wantTags: []string{"p"}, wantBehind: 1_000, wantStep: true},
			{clock: 9_500, rows: []string{probe("a", 9_500, "")}, wantT: 10_000, wantTags: []string{"p"}, wantBehind: 500},
			{clock: 9_200, rows: []string{probe("a", 9_600, "")}, wantT: 10_000, wantTags: []string{"p"}, wantBehind: 800, wantStep: true},
			{clock: 11_000, rows: []string{probe("a", 11_000, "")}, wantT: 11_000, wantTags: []string{"p"}},
			{clock: 11_001, rows: []string{probe("a", 11_001, "")}, wantT: 11_001, wantTags: []string{"p"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sink := &collector{}
			eng := newEngine(t, specFromYAML(t, clockSpec), probeWasm(t), nil, sink)
			for i, s := range c.steps {
				runClockStep(t, eng, sink, i, s)
			}
		})
	}
}

// runClockStep runs s and checks what it must show.
func runClockStep(t *testing.T, eng *engine.Engine, sink *collector, i int, s clockStep) {
	t.Helper()
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: s.clock, Rows: rows(s.rows...)})
	require(t, err)
	if dead := sink.take(state.OutboxDeadLetter); len(dead) > 0 {
		t.Fatalf("step %d (clock %d): dead letters %+v", i, s.clock, dead)
	}
	var tags []string
	for _, o := range sink.take(state.OutboxOutput) {
		var p struct {
			Tag string
			T   int64
		}
		require(t, json.Unmarshal(o.Payload, &p))
		if p.T != s.wantT {
			t.Errorf("step %d (clock %d): %s saw processing time %d, want %d", i, s.clock, p.Tag, p.T, s.wantT)
		}
		tags = append(tags, p.Tag)
	}
	if fmt.Sprint(tags) != fmt.Sprint(s.wantTags) {
		t.Errorf("step %d (clock %d): probes %v, want %v", i, s.clock, tags, s.wantTags)
	}
	if rep.ClockBehindMs != s.wantBehind || rep.ClockStepBack != s.wantStep {
		t.Errorf("step %d (clock %d): report behind %d step %v, want %d %v", i, s.clock, rep.ClockBehindMs, rep.ClockStepBack, s.wantBehind, s.wantStep)
	}
	if got := eng.Progress().ProcessingTimeMs; !rep.Skipped && got != max(s.wantT, s.clock) {
		t.Errorf("step %d: committed processing time %d, want %d", i, got, max(s.wantT, s.clock))
	}
}

// TestProcessingTimeAfterTakeover: a runtime whose clock is behind the processing time the
// deployment's last batch committed (a takeover, a restart on a host with a slower clock)
// runs its first batch at that committed time, and reports the step back.
func TestProcessingTimeAfterTakeover(t *testing.T) {
	st := openStore(t, t.TempDir())
	sp := specFromYAML(t, clockSpec)
	sink := &collector{}
	eng := newEngine(t, sp, probeWasm(t), st, sink)
	runClockStep(t, eng, sink, 0, clockStep{clock: 1000, rows: []string{`{"k":"a","ts":1000,"ops":[{"probe":"p"}]}`}, wantT: 1000, wantTags: []string{"p"}})
	require(t, eng.Close(context.Background()))

	eng = newEngine(t, sp, probeWasm(t), st, sink)
	if got := eng.Progress().ProcessingTimeMs; got != 1000 {
		t.Fatalf("reopened engine's committed processing time %d, want 1000", got)
	}
	runClockStep(t, eng, sink, 1, clockStep{clock: 500, rows: []string{`{"k":"a","ts":1500,"ops":[{"probe":"p"}]}`}, wantT: 1000, wantTags: []string{"p"}, wantBehind: 500, wantStep: true})
}

// TestTTLAfterClockStepBack: a TTL'd value written while the clock is behind lives from the
// committed processing time, not from the earlier clock, so it does not expire early.
func TestTTLAfterClockStepBack(t *testing.T) {
	sink := &collector{}
	eng := v2Engine(t, v2Spec(t, "pt", ""), openStore(t, ""), sink, nil) // ttl_ms 1000
	runRows(t, eng, 3000, `{"k": "a", "ops": [{"tset": 1}]}`)
	if rep := runRows(t, eng, 1000, `{"k": "b", "ops": [{"tset": 2}]}`); !rep.ClockStepBack {
		t.Fatalf("step back not reported: %+v", rep)
	}
	sink.take(state.OutboxOutput)
	runRows(t, eng, 3500, `{"k": "b", "ops": [{"tget": "b"}]}`)
	out := payloads(sink.take(state.OutboxOutput))
	if len(out) != 1 || out[0] != `{"key":"b","t":2,"tag":"b"}` {
		t.Fatalf("b's TTL'd value at 3500: %v, want it alive (written at processing time 3000, TTL 1000)", out)
	}
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 4001})
	require(t, err)
	if rep.TTLExpired != 2 {
		t.Fatalf("TTLExpired at 4001: %d, want 2 (a and b, both written at 3000)", rep.TTLExpired)
	}
}
