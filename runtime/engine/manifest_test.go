package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// TestManifests: with Config.Manifests every commit records its batch's manifest as the last
// entry of its outbox: the rows' sequences, T, the watermark it ran at and the one it
// committed, the position; a batch committed in chunks records one per chunk, the later ones
// continued, all at the batch's T and W, the watermark moving with the last. Without the
// option, no manifest.
func TestManifests(t *testing.T) {
	for _, on := range []bool{false, true} {
		log := newLog()
		cfg := engine.Config{Spec: specFromYAML(t, chunkSpec), Wasm: probeWasm(t), Store: openStore(t, ""), Sink: log, Manifests: on}
		engine.SetChunkLimits(&cfg, 40, 1<<20)
		eng, err := sharedRuntime(t).NewEngine(context.Background(), cfg)
		require(t, err)
		defer eng.Close(context.Background())
		for _, in := range chunkBatches() {
			_, err := eng.RunBatch(context.Background(), in)
			require(t, err)
		}
		var last = map[uint64]uint32{} // the last outbox seq of each batch
		for _, e := range log.entries {
			last[e.ID.BatchID] = max(last[e.ID.BatchID], e.ID.Seq)
		}
		entries := log.take(state.OutboxManifest)
		if !on {
			if len(entries) != 0 {
				t.Fatalf("%d manifests without Config.Manifests", len(entries))
			}
			continue
		}
		var got []engine.Manifest
		for _, e := range entries {
			var m engine.Manifest
			require(t, json.Unmarshal(e.Payload, &m), string(e.Payload))
			if e.ID.BatchID != m.Batch || e.ID.Seq != last[m.Batch] {
				t.Errorf("manifest %+v has outbox id %v: want the last entry of batch %d", m, e.ID, m.Batch)
			}
			got = append(got, m)
		}
		if len(got) < 4 {
			t.Fatalf("manifests %+v: want batch 1 and batch 2 in at least 3 chunks", got)
		}
		want1 := engine.Manifest{Batch: 1, ProcessingTimeMs: 1000, WatermarkMs: 0, NextWatermarkMs: 100, Rows: 95, FirstSequence: 1, LastSequence: 95, Position: 1}
		if got[0] != want1 {
			t.Errorf("batch 1's manifest %+v, want %+v", got[0], want1)
		}
		want2 := engine.Manifest{Batch: 2, ProcessingTimeMs: 5000, WatermarkMs: 100, NextWatermarkMs: 100, Rows: 7, FirstSequence: 1, LastSequence: 7, Position: 2, HadState: true, Open: true}
		if got[1] != want2 {
			t.Errorf("batch 2's first chunk's manifest %+v, want %+v", got[1], want2)
		}
		for i, m := range got[2:] {
			final := i == len(got)-3
			want := engine.Manifest{Batch: uint64(i + 3), ProcessingTimeMs: 5000, WatermarkMs: 100, NextWatermarkMs: 100, Position: 2, HadState: true, Continued: true, Open: !final}
			if final {
				want.NextWatermarkMs = 400
			}
			if m != want {
				t.Errorf("chunk manifest %+v, want %+v", m, want)
			}
		}
	}
}

// TestNextWatermarkOverride: a batch given BatchInput.NextWatermarkMs commits that watermark,
// not the one its rows give; without it, its rows' (event time 100, no delay).
func TestNextWatermarkOverride(t *testing.T) {
	for _, tc := range []struct {
		name     string
		override *int64
		want     int64
	}{
		{"rows", nil, 100},
		{"recorded", new(int64(40)), 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newEngine(t, specFromYAML(t, chunkSpec), probeWasm(t), nil, &collector{})
			rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(`{"k":"a","ts":100}`), NextWatermarkMs: tc.override})
			require(t, err)
			if rep.WatermarkMs != tc.want || eng.Progress().WatermarkMs != tc.want {
				t.Errorf("watermark %d (progress %d), want %d", rep.WatermarkMs, eng.Progress().WatermarkMs, tc.want)
			}
		})
	}
}
