package timeouts_test

import (
	"math"
	"testing"

	"github.com/groupstate/groupstate/timeouts"
)

// batch is one micro-batch of a watermark scenario.
type batch struct {
	events       []int64 // event times observed, late or not
	discard      bool    // the batch fails and is rolled back
	wantCurrent  int64   // W during the batch
	wantNext     int64   // W after the batch
	wantAdvanced bool
}

func TestWatermark(t *testing.T) {
	const delay = 10000
	for _, tc := range []struct {
		name    string
		delay   int64
		start   int64
		batches []batch
	}{
		{
			name:  "starts at 0 and advances by max - delay",
			delay: delay,
			batches: []batch{
				{events: []int64{12000, 21000, 15000}, wantCurrent: 0, wantNext: 11000, wantAdvanced: true},
				{events: nil, wantCurrent: 11000, wantNext: 11000}, // the no-data batch
			},
		},
		{
			name:  "monotonic: older events do not lower it",
			delay: delay,
			batches: []batch{
				{events: []int64{21000}, wantCurrent: 0, wantNext: 11000, wantAdvanced: true},
				{events: []int64{5000, 20000}, wantCurrent: 11000, wantNext: 11000},
				{events: []int64{21000}, wantCurrent: 11000, wantNext: 11000}, // equal: not advanced
				{events: []int64{21001}, wantCurrent: 11000, wantNext: 11001, wantAdvanced: true},
			},
		},
		{
			name:  "late rows count for the max",
			delay: delay,
			start: 30000,
			batches: []batch{
				// 25000 <= W is late and dropped, but Spark takes the max before filtering.
				{events: []int64{25000}, wantCurrent: 30000, wantNext: 30000},
				{events: []int64{30000, 45000}, wantCurrent: 30000, wantNext: 35000, wantAdvanced: true},
			},
		},
		{
			name:  "events below the delay keep it at 0",
			delay: delay,
			batches: []batch{
				{events: []int64{9999, 10000}, wantCurrent: 0, wantNext: 0},
				{events: []int64{-50000}, wantCurrent: 0, wantNext: 0},
				{events: []int64{10001}, wantCurrent: 0, wantNext: 1, wantAdvanced: true},
			},
		},
		{
			name:  "zero delay",
			delay: 0,
			batches: []batch{
				{events: []int64{7}, wantCurrent: 0, wantNext: 7, wantAdvanced: true},
			},
		},
		{
			name:  "negative delay is taken as zero",
			delay: -5000,
			batches: []batch{
				{events: []int64{7}, wantCurrent: 0, wantNext: 7, wantAdvanced: true},
			},
		},
		{
			name:  "negative start is taken as zero",
			delay: delay,
			start: -3,
			batches: []batch{
				{events: nil, wantCurrent: 0, wantNext: 0},
			},
		},
		{
			name:  "discard forgets the batch",
			delay: delay,
			start: 1000,
			batches: []batch{
				{events: []int64{99000}, discard: true, wantCurrent: 1000, wantNext: 1000},
				{events: []int64{12000}, wantCurrent: 1000, wantNext: 2000, wantAdvanced: true},
			},
		},
		{
			name:  "no overflow with extreme inputs",
			delay: math.MaxInt64,
			batches: []batch{
				{events: []int64{math.MinInt64, -1, 0}, wantCurrent: 0, wantNext: 0},
				{events: []int64{math.MaxInt64}, wantCurrent: 0, wantNext: 0},
			},
		},
		{
			name:  "min event with a delay",
			delay: delay,
			start: 5,
			batches: []batch{
				{events: []int64{math.MinInt64}, wantCurrent: 5, wantNext: 5},
				{events: []int64{math.MinInt64 + delay}, wantCurrent: 5, wantNext: 5},
				{events: []int64{math.MaxInt64}, wantCurrent: 5, wantNext: math.MaxInt64 - delay, wantAdvanced: true},
				{events: []int64{math.MinInt64, math.MaxInt64}, wantCurrent: math.MaxInt64 - delay, wantNext: math.MaxInt64 - delay},
			},
		},
		{
			name:  "max event, zero delay",
			delay: 0,
			batches: []batch{
				{events: []int64{math.MaxInt64}, wantCurrent: 0, wantNext: math.MaxInt64, wantAdvanced: true},
				{events: []int64{math.MinInt64}, wantCurrent: math.MaxInt64, wantNext: math.MaxInt64},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := timeouts.NewWatermark(tc.delay, tc.start)
			pure := tc.start // the watermark as NextWatermark computes it, batch by batch
			for i, b := range tc.batches {
				batchMax := timeouts.NoEventTime
				for _, e := range b.events {
					batchMax = max(batchMax, e)
				}
				if !b.discard {
					if got := timeouts.NextWatermark(pure, batchMax, tc.delay); got != b.wantNext {
						t.Fatalf("batch %d: NextWatermark(%d, %d, %d) = %d, want %d", i, pure, batchMax, tc.delay, got, b.wantNext)
					}
					pure = b.wantNext
				}
				if got := w.Current(); got != b.wantCurrent {
					t.Fatalf("batch %d: Current() = %d, want %d", i, got, b.wantCurrent)
				}
				for _, e := range b.events {
					w.Observe(e)
				}
				if b.discard {
					w.Discard()
					if _, ok := w.BatchMax(); ok {
						t.Fatalf("batch %d: BatchMax after Discard reports observations", i)
					}
					if got := w.Next(); got != b.wantNext {
						t.Fatalf("batch %d: Next() after Discard = %d, want %d", i, got, b.wantNext)
					}
					continue
				}
				if got := w.Next(); got != b.wantNext {
					t.Fatalf("batch %d: Next() = %d, want %d", i, got, b.wantNext)
				}
				if got := w.Current(); got != b.wantCurrent {
					t.Fatalf("batch %d: Next() changed Current() to %d", i, got)
				}
				next, advanced := w.Advance()
				if next != b.wantNext || advanced != b.wantAdvanced {
					t.Fatalf("batch %d: Advance() = %d, %v; want %d, %v", i, next, advanced, b.wantNext, b.wantAdvanced)
				}
				if w.Current() != next {
					t.Fatalf("batch %d: Current() = %d after Advance() = %d", i, w.Current(), next)
				}
				if next < 0 || next < b.wantCurrent {
					t.Fatalf("batch %d: watermark went to %d from %d", i, next, b.wantCurrent)
				}
			}
		})
	}
}

// TestNextWatermark: the pure rule, and that it never goes below the current watermark or 0.
func TestNextWatermark(t *testing.T) {
	for _, tc := range []struct{ current, batchMax, delay, want int64 }{
		{0, timeouts.NoEventTime, 10_000, 0},
		{5_000, timeouts.NoEventTime, 0, 5_000},
		{0, 20_000, 10_000, 10_000},
		{15_000, 20_000, 10_000, 15_000},
		{-3, 5, 10, 0},
		{-3, timeouts.NoEventTime, 0, 0},
		{0, 7, -5_000, 7},
		{0, math.MinInt64 + 9, 10, 0},
		{0, math.MaxInt64, 0, math.MaxInt64},
		{0, math.MaxInt64, math.MaxInt64, 0},
	} {
		if got := timeouts.NextWatermark(tc.current, tc.batchMax, tc.delay); got != tc.want {
			t.Errorf("NextWatermark(%d, %d, %d) = %d, want %d", tc.current, tc.batchMax, tc.delay, got, tc.want)
		}
	}
}

func TestWatermarkBatchMax(t *testing.T) {
	w := timeouts.NewWatermark(10000, 0)
	if _, ok := w.BatchMax(); ok {
		t.Fatal("BatchMax of a fresh tracker reports observations")
	}
	for _, e := range []int64{-3, math.MinInt64, -1} {
		w.Observe(e)
	}
	if m, ok := w.BatchMax(); !ok || m != -1 {
		t.Fatalf("BatchMax() = %d, %v; want -1, true", m, ok)
	}
	w.Advance()
	if _, ok := w.BatchMax(); ok {
		t.Fatal("BatchMax after Advance reports observations")
	}
	if w.Delay() != 10000 {
		t.Fatalf("Delay() = %d", w.Delay())
	}
}

func TestWatermarkReset(t *testing.T) {
	w := timeouts.NewWatermark(1000, 0)
	w.Observe(50000)
	w.Advance()
	w.Observe(90000)
	w.Reset(20000) // a rollback may move it backwards and forgets the batch
	if w.Current() != 20000 || w.Next() != 20000 {
		t.Fatalf("after Reset(20000): Current() = %d, Next() = %d", w.Current(), w.Next())
	}
	w.Reset(-1)
	if w.Current() != 0 {
		t.Fatalf("after Reset(-1): Current() = %d, want 0", w.Current())
	}
}
