package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

const probeEventTimeFailSpec = `
name: probe-wm
module: unused.wasm
key: {field: k}
event_time: {field: ts, watermark_delay: 10s}
timeout: event_time
on_error: fail
output: {subject: probe.out}
`

// probeWatermark runs a probe for key k at event time ts and returns the watermark the
// handler saw and the batch's report.
func probeWatermark(t *testing.T, eng *engine.Engine, sink *collector, at int64, k, ts string) (int64, *engine.BatchReport) {
	t.Helper()
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: at,
		Rows: rows(`{"k":"` + k + `","ts":` + ts + `,"ops":[{"probe":"p"}]}`)})
	require(t, err)
	out := sink.take(state.OutboxOutput)
	if len(out) != 1 {
		t.Fatalf("probe emitted %v", payloads(out))
	}
	var p struct{ WM int64 }
	require(t, json.Unmarshal(out[0].Payload, &p))
	return p.WM, rep
}

// TestFailedBatchKeepsWatermark: a batch that fails (here under on_error: fail) after it read a
// far-future event time leaves the engine's watermark as it was: the watermark is that of
// the last committed batch (docs/semantics.md, "A micro-batch": Watermark and Atomicity), for
// a skipped no-data batch, for the handler of the next batch, and for what that batch commits.
func TestFailedBatchKeepsWatermark(t *testing.T) {
	sink := &collector{}
	st := openStore(t, "")
	eng := newEngine(t, specFromYAML(t, probeEventTimeFailSpec), probeWasm(t), st, sink)
	ctx := context.Background()

	if _, rep := probeWatermark(t, eng, sink, 100, "a", "20000"); rep.WatermarkMs != 10_000 {
		t.Fatalf("first batch: watermark %d, want 10000", rep.WatermarkMs)
	}
	_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 200, Rows: rows(
		`{"k":"b","ts":4000000000000000,"ops":[{"emit":"lost"}]}`,
		`{"k":"c","ts":20001,"ops":[{"fail":"boom"}]}`)})
	if !errors.Is(err, engine.ErrKeyFailed) {
		t.Fatalf("err = %v, want ErrKeyFailed", err)
	}
	if rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 300}); err != nil || !rep.Skipped || rep.WatermarkMs != 10_000 {
		t.Fatalf("no-data batch after the failed one: %+v, %v; want skipped at watermark 10000", rep, err)
	}
	wm, rep := probeWatermark(t, eng, sink, 400, "a", "20002")
	if wm != 10_000 || rep.WatermarkMs != 10_002 || !rep.WatermarkAdvanced {
		t.Fatalf("batch after the failed one: handler saw watermark %d, report %+v; want 10000 and next 10002 (advanced)", wm, rep)
	}
	if p, err := st.Deployment("probe-wm").Progress(); err != nil || p.WatermarkMs != 10_002 {
		t.Fatalf("committed progress %+v, %v; want watermark 10002", p, err)
	}
	if wm, _ := probeWatermark(t, eng, sink, 500, "a", "20003"); wm != 10_002 {
		t.Fatalf("handler saw watermark %d, want 10002", wm)
	}
}

// TestEventTimeMaxAhead: under event_time.max_ahead a row whose event time is further ahead
// of the batch's processing time is dead-lettered (reason event_time_ahead) and does not move
// the watermark, as a producer writing microseconds where milliseconds are meant would
// otherwise move it for good; a row exactly max_ahead ahead is kept.
func TestEventTimeMaxAhead(t *testing.T) {
	sp := specFromYAML(t, `
name: probe-ahead
module: unused.wasm
key: {field: k}
event_time: {field: ts, watermark_delay: 0s, max_ahead: 1h}
timeout: event_time
output: {subject: probe.out}
`)
	sink := &collector{}
	eng := newEngine(t, sp, probeWasm(t), nil, sink)
	const T = 1_700_000_000_000
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: T, Rows: rows(
		`{"k":"a","ts":1700000000500,"ops":[{"emit":"a"}]}`,
		`{"k":"b","ts":1700000000000000,"ops":[{"emit":"b"}]}`,
		`{"k":"c","ts":1700003600001,"ops":[{"emit":"c"}]}`,
		`{"k":"d","ts":1700000001000,"ops":[{"emit":"d"}]}`,
	)})
	require(t, err)
	if got := payloads(sink.take(state.OutboxOutput)); len(got) != 2 || got[0] != `"a"` || got[1] != `"d"` {
		t.Fatalf("outputs %v, want a and d", got)
	}
	dead := sink.take(state.OutboxDeadLetter)
	if len(dead) != 2 || rep.DeadLetters != 2 {
		t.Fatalf("dead letters %+v (report %d), want b and c", dead, rep.DeadLetters)
	}
	for i, want := range []string{`"b"`, `"c"`} {
		d := dead[i]
		if !strings.Contains(string(d.Payload), want) || d.Reason != engine.ReasonEventTimeAhead || !strings.Contains(d.Error, "event_time.max_ahead 1h") {
			t.Errorf("dead letter %d: %+v, want %s with reason %s", i, d, want, engine.ReasonEventTimeAhead)
		}
	}
	if rep.WatermarkMs != T+1000 {
		t.Fatalf("watermark %d, want %d (from d; b and c are ignored)", rep.WatermarkMs, T+1000)
	}
	if wm, _ := probeWatermark(t, eng, sink, T+1, "e", "1700003600001"); wm != T+1000 { // exactly max_ahead ahead: kept
		t.Fatalf("the next batch saw watermark %d, want %d", wm, T+1000)
	}
}
