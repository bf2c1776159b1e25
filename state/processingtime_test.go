package state

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestProgressProcessingTime: a progress record with the last committed processing time
// (Progress.ProcessingTimeMs) is written in version 5 and round-trips with and without a max
// event time, a generation and an open batch; extra fields a later version appends are
// skipped; a truncated record is corrupt; a commit never lowers it and one without
// SetProcessingTime carries it over; a record written before it was kept reads as 0.
func TestProgressProcessingTime(t *testing.T) {
	open := OpenBatch{Active: true, ProcessingTimeMs: 3, NextWatermarkMs: 4, Next: TimerPos{TimeoutMs: 5, Key: "k"}}
	for _, p := range []Progress{
		{BatchID: 7, Position: 9, ProcessingTimeMs: 1000},
		{BatchID: 7, WatermarkMs: 2345, MaxEventMs: math.MinInt64, HasMaxEvent: true, ProcessingTimeMs: -5},
		{BatchID: 7, Generation: 2, GenerationFrom: 5, InputCreated: 99, ProcessingTimeMs: math.MaxInt64},
		{BatchID: 7, MaxEventMs: 12, HasMaxEvent: true, ProcessingTimeMs: 1, Open: open},
		{BatchID: 7, ProcessingTimeMs: 1, Open: open},
	} {
		b := appendProgress(nil, p)
		if b[0] != progressVersion5 {
			t.Fatalf("%+v written as version %d, want 5", p, b[0])
		}
		got, err := decodeProgress(b)
		if err != nil || got != p {
			t.Fatalf("decode = %+v, %v; want %+v", got, err, p)
		}
		for n := progressLen; n < len(b); n++ {
			if _, err := decodeProgress(b[:n]); err == nil {
				t.Fatalf("record of %+v cut to %d of %d bytes decoded", p, n, len(b))
			}
		}
		// A later version's extra fields (here two, after the seven counters) are skipped.
		at := progressLen + progressGenLen + progressMaxLen + 8
		later := append([]byte(nil), b[:at]...)
		later = binary.AppendUvarint(later, 9)
		for range 7 {
			later = binary.AppendUvarint(later, 0)
		}
		later = binary.AppendUvarint(later, 300)
		later = binary.AppendUvarint(later, 7)
		later = append(later, b[at+1:]...)
		got, err = decodeProgress(later)
		if err != nil || got != p {
			t.Fatalf("decode with extra fields = %+v, %v; want %+v", got, err, p)
		}
	}

	d := openMem(t).Deployment("d")
	commitPT := func(id uint64, ms int64, set bool) Progress {
		t.Helper()
		b := d.NewBatch(id)
		b.SetProgress(0, id)
		if set {
			b.SetProcessingTime(ms)
		}
		p, err := b.Commit()
		requireNoError(t, err)
		return p
	}
	if p := commitPT(1, 0, false); p.ProcessingTimeMs != 0 || appendProgress(nil, p)[0] != progressVersion1 {
		t.Fatalf("a record without a processing time: %+v, version %d", p, appendProgress(nil, p)[0])
	}
	for _, c := range []struct {
		set  bool
		ms   int64
		want int64
	}{
		{true, 1000, 1000},
		{true, 500, 1000}, // never lowered
		{false, 0, 1000},  // carried over
		{true, 1500, 1500},
	} {
		p := commitPT(d.mustNextID(t), c.ms, c.set)
		requireEqual(t, c.want, p.ProcessingTimeMs, "committed processing time")
		got, err := d.Progress()
		requireNoError(t, err)
		requireEqual(t, p, got, "read back")
	}
}

// mustNextID returns the id after the deployment's last committed batch.
func (d *Deployment) mustNextID(t testing.TB) uint64 {
	t.Helper()
	p, err := d.Progress()
	requireNoError(t, err)
	return p.BatchID + 1
}

// TestProgressCounters: the deployment's counters are written in version 5 (with or without a
// processing time), round-trip, and add up over commits; a commit without AddCounters carries
// them over; an older record reads them as 0.
func TestProgressCounters(t *testing.T) {
	c := Counters{Batches: 3, RowsIn: 1 << 40, LateRows: 1, DeadLetters: 2, TimeoutsFired: 300, Emitted: 7, TTLExpired: 9}
	for _, p := range []Progress{
		{BatchID: 3, Counters: c},
		{BatchID: 3, Counters: Counters{Emitted: 1}, ProcessingTimeMs: 5, Generation: 1, MaxEventMs: 4, HasMaxEvent: true},
		{BatchID: 3, Counters: c, Open: OpenBatch{Active: true, ProcessingTimeMs: 3, Next: TimerPos{TimeoutMs: 5, Key: "k"}}},
	} {
		b := appendProgress(nil, p)
		if b[0] != progressVersion5 {
			t.Fatalf("%+v written as version %d, want 5", p, b[0])
		}
		got, err := decodeProgress(b)
		if err != nil || got != p {
			t.Fatalf("decode = %+v, %v; want %+v", got, err, p)
		}
		for n := progressLen; n < len(b); n++ {
			if _, err := decodeProgress(b[:n]); err == nil {
				t.Fatalf("record of %+v cut to %d of %d bytes decoded", p, n, len(b))
			}
		}
	}

	d := openMem(t).Deployment("d")
	want := Counters{}
	for i, add := range []Counters{{Batches: 1, RowsIn: 10, Emitted: 4}, {}, {Batches: 1, DeadLetters: 2, TimeoutsFired: 1, TTLExpired: 3, LateRows: 5}} {
		b := d.NewBatch(uint64(i + 1))
		b.AddCounters(add)
		p, err := b.Commit()
		requireNoError(t, err)
		want = want.add(add)
		requireEqual(t, want, p.Counters, "counters after commit", i+1)
		got, err := d.Progress()
		requireNoError(t, err)
		requireEqual(t, p, got, "read back")
	}
}
