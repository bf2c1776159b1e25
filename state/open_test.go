package state

import (
	"bytes"
	"math"
	"testing"
)

// TestProgressEncodingVersions: a progress record without an open batch is written in
// version 1, as before open batches existed (so a runtime that predates them can still read
// it); one with an open batch in version 2. Both read back as written.
func TestProgressEncodingVersions(t *testing.T) {
	closed := Progress{BatchID: 7, WatermarkMs: 5, Position: 9, Keys: 3, TimerKeys: 2}
	b := appendProgress(nil, closed)
	requireEqual(t, byte(1), b[0], "version of a record without an open batch")
	requireEqual(t, progressLen, len(b))
	got, err := decodeProgress(b)
	requireNoError(t, err)
	requireEqual(t, closed, got)

	for _, o := range []OpenBatch{
		{Active: true, ProcessingTimeMs: 1000, NextWatermarkMs: 20, Next: TimerPos{TimeoutMs: math.MinInt64}},
		{Active: true, ProcessingTimeMs: -1, NextWatermarkMs: math.MaxInt64, Next: TimerAfter(999, []byte(`"user-42"`))},
	} {
		open := closed
		open.Open = o
		b := appendProgress(nil, open)
		requireEqual(t, byte(2), b[0], "version of a record with an open batch")
		got, err := decodeProgress(b)
		requireNoError(t, err)
		requireEqual(t, open, got)
		_, err = decodeProgress(b[:len(b)-len(o.Next.Key)-1])
		requireErrorIs(t, err, ErrCorrupt)
	}
	for _, bad := range [][]byte{{2}, append([]byte{3}, b[1:]...), b[:progressLen-1]} {
		_, err := decodeProgress(bad)
		requireErrorIs(t, err, ErrCorrupt)
	}
}

// TestExpiredFrom: a scan of the timer index can start at a position, as a batch committed in
// chunks does to find the timeouts it has not called yet.
func TestExpiredFrom(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("from")
	commit(t, d, 1, map[string]Entry{"a": {TimeoutMs: 10}, "b": {TimeoutMs: 10}, "c": {TimeoutMs: 20}, "d": {TimeoutMs: 30}})
	from := func(p TimerPos, before int64) []timer {
		var got []timer
		requireNoError(t, d.ExpiredFrom(p, before, func(key []byte, ts int64) error {
			got = append(got, timer{string(key), ts})
			return nil
		}))
		return got
	}
	requireEqual(t, expired(t, d, 30), from(TimerPos{TimeoutMs: math.MinInt64}, 30))
	requireEqual(t, []timer{{"b", 10}, {"c", 20}}, from(TimerAfter(10, []byte("a")), 30))
	requireEqual(t, []timer{{"b", 10}, {"c", 20}}, from(TimerPos{TimeoutMs: 10, Key: "b"}, 30), "the position itself is included")
	requireEqual(t, []timer{{"c", 20}}, from(TimerAfter(10, []byte("b")), 30))
	requireEqual(t, []timer(nil), from(TimerAfter(20, []byte("c")), 30))
	requireEqual(t, []timer(nil), from(TimerAfter(40, nil), 30), "a start beyond the bound")
}

// TestOpenBatch: a commit with SetOpen records the open batch in the progress record (and
// keeps it across a reopen), with the keys it must not time out; the next commit without
// SetOpen closes it and forgets them.
func TestOpenBatch(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	d := s.Deployment("open")
	skipped := func(d *Deployment) []string {
		var keys []string
		requireNoError(t, d.SkippedTimeouts(func(key []byte) error {
			keys = append(keys, string(bytes.Clone(key)))
			return nil
		}))
		return keys
	}
	open := OpenBatch{Active: true, ProcessingTimeMs: 1000, NextWatermarkMs: 77, Next: TimerAfter(500, []byte(`"m"`))}
	b := d.NewBatch(1)
	b.Set([]byte(`"a"`), Entry{}, valT("1", 400))
	b.SetProgress(5, 10)
	b.SetOpen(open)
	b.SkipTimeout([]byte(`"x"`))
	b.SkipTimeout([]byte(`"y"`))
	p, err := b.Commit()
	requireNoError(t, err)
	want := Progress{BatchID: 1, WatermarkMs: 5, Position: 10, Keys: 1, TimerKeys: 1, Open: open}
	requireEqual(t, want, p)
	requireNoError(t, s.Close())

	s = openDisk(t, dir)
	defer s.Close()
	d = s.Deployment("open")
	p, err = d.Progress()
	requireNoError(t, err)
	requireEqual(t, want, p, "after a reopen")
	requireEqual(t, []string{`"x"`, `"y"`}, skipped(d))

	// A further chunk keeps the batch open with a new position; then the last one closes it.
	open.Next = TimerAfter(600, []byte(`"n"`))
	b = d.NewBatch(2)
	b.SetOpen(open)
	p, err = b.Commit()
	requireNoError(t, err)
	requireEqual(t, open, p.Open)
	requireEqual(t, []string{`"x"`, `"y"`}, skipped(d))

	b = d.NewBatch(3)
	b.SetProgress(77, 10)
	p, err = b.Commit()
	requireNoError(t, err)
	requireEqual(t, Progress{BatchID: 3, WatermarkMs: 77, Position: 10, Keys: 1, TimerKeys: 1}, p)
	requireEqual(t, []string(nil), skipped(d))
	requireEqual(t, map[string]Entry{`"a"`: valT("1", 400)}, allKeys(t, d), "the skip set is not state")
	p, err = d.Progress()
	requireNoError(t, err)
	requireEqual(t, OpenBatch{}, p.Open)
}

// TestProgressGeneration checks that a progress record with a generation
// round-trips, with and without an open batch, that generation 0 keeps the
// older encodings, and that commits carry the generation over.
func TestProgressGeneration(t *testing.T) {
	for _, p := range []Progress{
		{BatchID: 7, Position: 9, Generation: 2, GenerationFrom: 5},
		{BatchID: 7, Position: 9, InputCreated: 1234567},
		{BatchID: 7, Position: 9, Generation: 1, GenerationFrom: 7, Open: OpenBatch{Active: true, ProcessingTimeMs: 3, NextWatermarkMs: 4, Next: TimerPos{TimeoutMs: 5, Key: "k"}}},
	} {
		b := appendProgress(nil, p)
		if b[0] != progressVersion3 {
			t.Fatalf("version %d, want 3", b[0])
		}
		got, err := decodeProgress(b)
		if err != nil || got != p {
			t.Fatalf("decode = %+v, %v; want %+v", got, err, p)
		}
		if _, err := decodeProgress(b[:len(b)-1]); err == nil {
			t.Fatal("truncated record decoded")
		}
	}
	if v := appendProgress(nil, Progress{BatchID: 1})[0]; v != progressVersion1 {
		t.Fatalf("generation 0 written as version %d", v)
	}

	s := openMem(t)
	d := s.Deployment("d")
	b := d.NewBatch(1)
	b.SetGeneration(1)
	b.SetInputCreated(42)
	if _, err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b = d.NewBatch(2)
	b.SetProgress(0, 5)
	p, err := b.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation != 1 || p.GenerationFrom != 1 || p.InputCreated != 42 || p.Position != 5 {
		t.Fatalf("progress %+v: generation not carried over", p)
	}
	if got, err := d.Progress(); err != nil || got != p {
		t.Fatalf("read back %+v, %v; want %+v", got, err, p)
	}
}
