package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
)

// joinSpan is the event time the join benchmark's rows cover: long past the state's
// horizon (the 3h delay and the 1h range), so the state has time to level off.
const joinSpan = 12 * time.Hour

// JoinPoint is the join's state at one point of the benchmark.
type JoinPoint struct {
	// Rows is the rows run so far; EventHours how far event time went (from the first row).
	Rows       int     `json:"rows"`
	EventHours float64 `json:"event_hours"`
	// Buffered is the rows the join holds (its timers: one per buffered impression and
	// click, fewer when rows of an ad share a timestamp); Keys the ads holding any.
	Buffered int `json:"buffered"`
	Keys     int `json:"keys"`
}

// engineJoin runs the adjoin sample (its spec specYAML, samples/adjoin/adjoin.yaml: impressions
// 2h late at most joined with the clicks, 3h, within 1h after them; its module wasm) over rows
// rows of ads ads through the engine, half impressions and half clicks, event time advancing evenly over joinSpan (each click 0-90
// minutes after the batch's impressions' time, so some match and some do not), and returns
// rows/s and the state at every tenth of the way.
func engineJoin(ctx context.Context, dir string, specYAML, wasm []byte, ads, rows int, logger *slog.Logger) (float64, []JoinPoint, error) {
	rps, points, _, err := engineJoinCPU(ctx, dir, specYAML, wasm, ads, rows, logger)
	return rps, points, err
}

// engineJoinCPU is engineJoin that also returns the process's CPU time per row (µs) while the
// batches ran: not the engine's start (the module's compilation) nor the state counts.
func engineJoinCPU(ctx context.Context, dir string, specYAML, wasm []byte, ads, rows int, logger *slog.Logger) (float64, []JoinPoint, float64, error) {
	eng, err := startEngine(ctx, dir, specYAML, wasm, nil, logger)
	if err != nil {
		return 0, nil, 0, err
	}
	defer eng.close(ctx)
	batchRows := max(min(10_000, rows/10), 1) // ten batches at least: ten points
	batches := max(rows/batchRows, 1)
	step := joinSpan.Milliseconds() / int64(batches)
	base := int64(1_700_000_000_000)
	batch := make([]engine.Row, batchRows)
	var points []JoinPoint
	var spent, cpu time.Duration
	next := 0
	for b := range batches {
		t := base + int64(b)*step
		for i := range batch {
			ad := next % ads
			next += 7919 // a prime stride spreads the rows over every ad
			if i%2 == 0 {
				batch[i] = engine.Row{Input: 0, Data: fmt.Appendf(batch[i].Data[:0], `{"ad_id":"a%06d","ts":%d}`, ad, t+int64(i)%step)}
			} else {
				late := int64(i*37) % (90 * 60_000)
				batch[i] = engine.Row{Input: 1, Data: fmt.Appendf(batch[i].Data[:0], `{"ad_id":"a%06d","ts":%d}`, ad, t-late)}
			}
		}
		start, cpu0 := time.Now(), cpuTime()
		in := engine.BatchInput{ProcessingTimeMs: t, Rows: batch}
		for {
			rep, err := eng.RunBatch(ctx, in)
			if err != nil {
				return 0, nil, 0, err
			}
			if !rep.NeedsNoDataBatch {
				break
			}
			in = engine.BatchInput{ProcessingTimeMs: t}
		}
		spent += time.Since(start)
		cpu += cpuTime() - cpu0
		if (b+1)%max(batches/10, 1) == 0 {
			p := JoinPoint{Rows: (b + 1) * batchRows, EventHours: float64(int64(b+1)*step) / float64(time.Hour.Milliseconds())}
			err := eng.store.Deployment(eng.Spec().Name).VarKeys(nil, 0, func(_ []byte, _, timers int) error {
				p.Buffered += timers
				p.Keys++
				return nil
			})
			if err != nil {
				return 0, nil, 0, err
			}
			points = append(points, p)
		}
	}
	done := float64(batches * batchRows)
	return done / spent.Seconds(), points, float64(cpu.Microseconds()) / done, nil
}

// joinGrowth is the rows held at the last point over those at 60% of the run (0 when there
// are too few points).
func joinGrowth(points []JoinPoint) float64 {
	if len(points) < 10 || points[5].Buffered == 0 {
		return 0
	}
	return float64(points[len(points)-1].Buffered) / float64(points[5].Buffered)
}

// joinHeld lists the rows held at 60%, 80% and 100% of the run.
func joinHeld(points []JoinPoint) string {
	if len(points) < 10 {
		return "-"
	}
	return fmt.Sprintf("%d/%d/%d", points[5].Buffered, points[7].Buffered, points[9].Buffered)
}
