package state

import (
	"bytes"
	"math"
	"testing"
)

// TestProgressMaxEvent: a progress record with a max event time (a partition's, see
// Progress.MaxEventMs) is written in version 4 and round-trips with and without a generation
// and an open batch; a record without one keeps its older encoding byte for byte; commits
// carry it over; and a replica that applies the replicated writes reads the same progress.
func TestProgressMaxEvent(t *testing.T) {
	open := OpenBatch{Active: true, ProcessingTimeMs: 3, NextWatermarkMs: 4, Next: TimerPos{TimeoutMs: 5, Key: "k"}}
	for _, p := range []Progress{
		{BatchID: 7, Position: 9, MaxEventMs: 12345, HasMaxEvent: true},
		{BatchID: 7, WatermarkMs: 2345, MaxEventMs: math.MinInt64, HasMaxEvent: true},
		{BatchID: 7, Generation: 2, GenerationFrom: 5, InputCreated: 99, MaxEventMs: -1, HasMaxEvent: true},
		{BatchID: 7, MaxEventMs: math.MaxInt64, HasMaxEvent: true, Open: open},
	} {
		b := appendProgress(nil, p)
		if b[0] != progressVersion4 {
			t.Fatalf("%+v written as version %d, want 4", p, b[0])
		}
		got, err := decodeProgress(b)
		if err != nil || got != p {
			t.Fatalf("decode = %+v, %v; want %+v", got, err, p)
		}
		if _, err := decodeProgress(b[:len(b)-1]); err == nil {
			t.Fatalf("truncated record of %+v decoded", p)
		}
	}
	for _, p := range []Progress{
		{BatchID: 1, WatermarkMs: 5},
		{BatchID: 1, Open: open},
		{BatchID: 1, Generation: 1},
	} {
		without := appendProgress(nil, p)
		p.MaxEventMs = 77 // not recorded: HasMaxEvent is false
		if b := appendProgress(nil, p); !bytes.Equal(b, without) || b[0] == progressVersion4 {
			t.Fatalf("a record without a max event time changed its encoding: version %d", b[0])
		}
	}

	s := openMem(t)
	d := s.Deployment("d.0")
	repl := &memReplicator{}
	d.SetReplicator(repl)
	b := d.NewBatch(1)
	b.SetProgress(0, 3)
	b.SetMaxEvent(5000)
	if _, err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b = d.NewBatch(2)
	b.SetProgress(4000, 4)
	p, err := b.Commit()
	requireNoError(t, err)
	requireEqual(t, Progress{BatchID: 2, WatermarkMs: 4000, Position: 4, MaxEventMs: 5000, HasMaxEvent: true}, p, "carried over")

	replica := openMem(t).Deployment("d.0")
	applyAll(t, replica, repl.writes)
	got, err := replica.Progress()
	requireNoError(t, err)
	requireEqual(t, p, got, "the replica's progress")
}
