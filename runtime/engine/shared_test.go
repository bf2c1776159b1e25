package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// sharedSpec is an event-time probe deployment with a watermark delay of 10 s.
const sharedSpec = `
name: probe-shared
module: unused.wasm
key: {field: k}
event_time: {field: ts, watermark_delay: 10s}
timeout: event_time
output: {subject: probe.out}
`

// others is the other partitions' minimum max event time a test's bound reads
// (timeouts.NoEventTime: none counts), with the calls counted.
type others struct {
	min   atomic.Int64
	calls atomic.Int64
}

func newOthers(ms int64) *others {
	o := &others{}
	o.min.Store(ms)
	return o
}

// bound is the WatermarkBound of a partition whose other partitions are at o.min: the min of
// the own max and theirs. It returns more than own when asked (above): the partition is idle,
// and follows the others.
func (o *others) bound(above bool) engine.WatermarkBound {
	return func(own int64) int64 {
		o.calls.Add(1)
		m := o.min.Load()
		if above {
			return own + 1_000_000
		}
		if m == timeouts.NoEventTime {
			return own
		}
		return min(own, m)
	}
}

// newSharedEngine starts a partition's engine over st (keyspace probe-shared.0) with bound.
func newSharedEngine(t *testing.T, st *state.Store, sink engine.Sink, bound engine.WatermarkBound) *engine.Engine {
	t.Helper()
	eng, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: specFromYAML(t, sharedSpec), Wasm: probeWasm(t),
		Store: st, Keyspace: state.PartitionName("probe-shared", 0), Sink: sink, SharedWatermark: bound})
	require(t, err)
	t.Cleanup(func() { eng.Close(context.Background()) })
	return eng
}

// evtRow is a row of key k at event time ts that does nothing.
func evtRow(k string, ts int64) string { return fmt.Sprintf(`{"k":%q,"ts":%d,"ops":[]}`, k, ts) }

// TestSharedWatermarkRule: with a WatermarkBound, a batch commits W_next = max(W, min(own max,
// others) - delay), where the own max is the largest event time the partition has seen
// (earlier batches and late rows included), and a bound above it (an idle partition) is taken;
// the own max is committed with the progress and reported.
func TestSharedWatermarkRule(t *testing.T) {
	tests := []struct {
		name    string
		others  int64 // timeouts.NoEventTime: no other partition counts
		above   bool  // the bound answers more than the own max
		batches [][]int64
		wantW   []int64
		wantMax []int64
	}{
		{"others ahead: the own max bounds", 90_000, false, [][]int64{{30_000, 50_000}}, []int64{40_000}, []int64{50_000}},
		{"others behind hold it back", 25_000, false, [][]int64{{30_000, 50_000}}, []int64{15_000}, []int64{50_000}},
		{"no other partition counts", timeouts.NoEventTime, false, [][]int64{{50_000}, {20_000}}, []int64{40_000, 40_000}, []int64{50_000, 50_000}},
		{"an idle partition follows the others past its own max", 0, true, [][]int64{{50_000}}, []int64{1_040_000}, []int64{50_000}},
		{"the own max spans batches; late rows count", 1_000_000, false, [][]int64{{50_000}, {45_000}, {38_000, 60_000}}, []int64{40_000, 40_000, 50_000}, []int64{50_000, 50_000, 60_000}},
		{"it never goes back", 1_000_000, false, [][]int64{{50_000}, {1_000}}, []int64{40_000, 40_000}, []int64{50_000, 50_000}},
		{"below the delay it stays at 0", 1_000_000, false, [][]int64{{5_000}}, []int64{0}, []int64{5_000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t, "")
			o := newOthers(tt.others)
			eng := newSharedEngine(t, st, &collector{}, o.bound(tt.above))
			for i, evts := range tt.batches {
				var rs []string
				for j, ts := range evts {
					rs = append(rs, evtRow(fmt.Sprintf("k%d", j), ts))
				}
				rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(rs...)})
				require(t, err)
				if rep.WatermarkMs != tt.wantW[i] || rep.MaxEventMs != tt.wantMax[i] {
					t.Fatalf("batch %d: watermark %d, max event %d; want %d and %d", i+1, rep.WatermarkMs, rep.MaxEventMs, tt.wantW[i], tt.wantMax[i])
				}
				p, err := st.Deployment(state.PartitionName("probe-shared", 0)).Progress()
				require(t, err)
				if p.WatermarkMs != tt.wantW[i] || !p.HasMaxEvent || p.MaxEventMs != tt.wantMax[i] {
					t.Fatalf("batch %d: committed %+v, want watermark %d and max event %d", i+1, p, tt.wantW[i], tt.wantMax[i])
				}
			}
		})
	}
}

// TestSharedWatermarkOwnOnlyIsTodaysRule: a bound that counts the partition alone gives
// exactly the watermarks of today's rule (no bound), batch after batch, with late rows and
// event times out of order; and without a bound nothing more is stored or reported.
func TestSharedWatermarkOwnOnlyIsTodaysRule(t *testing.T) {
	batches := [][]int64{{30_000}, {12_000, 25_000}, {}, {45_000, 44_000}, {10}, {}, {90_000}}
	plain := newEngine(t, specFromYAML(t, sharedSpec), probeWasm(t), nil, &collector{})
	shared := newSharedEngine(t, openStore(t, ""), &collector{}, newOthers(timeouts.NoEventTime).bound(false))
	for i, evts := range batches {
		var rs []string
		for j, ts := range evts {
			rs = append(rs, evtRow(fmt.Sprintf("k%d", j), ts))
		}
		in := engine.BatchInput{ProcessingTimeMs: int64(i + 1), Rows: rows(rs...)}
		a, err := plain.RunBatch(context.Background(), in)
		require(t, err)
		b, err := shared.RunBatch(context.Background(), in)
		require(t, err)
		if a.WatermarkMs != b.WatermarkMs || a.LateRows != b.LateRows || a.Skipped != b.Skipped || a.WatermarkAdvanced != b.WatermarkAdvanced {
			t.Fatalf("batch %d: without a bound %+v, with an own-only bound %+v", i+1, a, b)
		}
		if a.MaxEventMs != timeouts.NoEventTime || plain.Progress().HasMaxEvent {
			t.Fatalf("batch %d without a bound: reported max event %d, progress %+v; want none", i+1, a.MaxEventMs, plain.Progress())
		}
	}
}

// TestSharedWatermarkNoDataBatch: a no-data batch of a partition that gets no rows commits
// the watermark the other partitions moved (it is not skipped), the no-data batch it calls
// for fires the event-time timeouts the new watermark passed, and then nothing is left to
// do. The partition's max event time survives a restart of the engine: a new engine on the
// store goes on from it.
func TestSharedWatermarkNoDataBatch(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	sink := &collector{}
	o := newOthers(5_000)
	eng := newSharedEngine(t, st, sink, o.bound(false))

	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(
		`{"k":"a","ts":20000,"ops":[{"ts":25000}]}`,
		`{"k":"b","ts":40000,"ops":[{"ts":45000}]}`)})
	require(t, err)
	if rep.WatermarkMs != 0 || rep.MaxEventMs != 40_000 {
		t.Fatalf("first batch: %+v, want watermark 0 (held back by the others at 5000) and max event 40000", rep)
	}
	if rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 2}); err != nil || !rep.Skipped {
		t.Fatalf("no-data batch with the others still behind: %+v, %v; want skipped", rep, err)
	}

	// Restart: the max event time comes back from the progress.
	require(t, eng.Close(ctx))
	eng = newSharedEngine(t, st, sink, o.bound(false))
	o.min.Store(50_000) // the others moved on
	rep, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 3})
	require(t, err)
	if rep.Skipped || rep.WatermarkMs != 30_000 || !rep.WatermarkAdvanced || !rep.NeedsNoDataBatch || rep.TimeoutCalls != 0 {
		t.Fatalf("no-data batch after the others moved: %+v; want it committed at watermark 30000, calling for a no-data batch", rep)
	}
	rep, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 4})
	require(t, err)
	out := probes(t, sink.take(state.OutboxOutput))
	if rep.Skipped || rep.TimeoutCalls != 1 || len(out) != 1 || out[0].Tag != "timeout" || out[0].Key != "a" || out[0].WM != 30_000 {
		t.Fatalf("the no-data batch that follows: %+v, outputs %+v; want a's timeout (25000) fired at watermark 30000", rep, out)
	}
	if rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 5}); err != nil || !rep.Skipped || rep.WatermarkMs != 30_000 {
		t.Fatalf("then: %+v, %v; want skipped at 30000 (b's timeout 45000 is not passed: the own max 40000 bounds)", rep, err)
	}
	if o.calls.Load() == 0 {
		t.Fatal("the bound was never asked")
	}
}
