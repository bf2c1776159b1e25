package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/procmem"
)

// timeoutsSpec is logincount with a processing-time timeout of a minute after each key's
// last row.
const timeoutsSpec = `
name: timeouts
module: x.wasm
input: {subjects: ["to.in"]}
key: {field: user_id}
timeout: processing_time
config: {idle_timeout: 1m}
output: {subject: to.out}
`

// TimeoutsFigures is what timeoutsAtOnce measured.
type TimeoutsFigures struct {
	// DataCallsPerSec is the rate of the data calls that set the timeouts (one row per key,
	// batches of memoryBatchRows); TimeoutCallsPerSec the rate of the timeout calls when all
	// of them expired in one batch.
	DataCallsPerSec    float64
	TimeoutCallsPerSec float64
	// RSSMB is the highest RSS seen while the timeouts fired, FillRSSMB while the data calls
	// set them (both sampled every 50 ms, garbage included): bounded, the first is not above
	// the second.
	RSSMB, FillRSSMB float64
}

// sampleRSS records the highest RSS into peak, every 50 ms, until the returned stop is called.
func sampleRSS(peak *float64) (stop func()) {
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			*peak = math.Max(*peak, procmem.MB(procmem.RSS()))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-sampled }
}

// timeoutsAtOnce gives keys keys state and a processing-time timeout a minute ahead
// (logincount), then runs one batch without rows two minutes later, in which every timeout
// fires (the engine commits them in chunks of engine.TimeoutChunkKeys), and measures both
// rates and the RSS while they fire.
func timeoutsAtOnce(ctx context.Context, dir string, wasm []byte, keys int, logger *slog.Logger) (TimeoutsFigures, error) {
	var f TimeoutsFigures
	eng, err := startEngine(ctx, dir, []byte(timeoutsSpec), wasm, nil, logger)
	if err != nil {
		return f, err
	}
	defer eng.close(ctx)
	t0 := time.Now().UnixMilli()
	batch := make([]engine.Row, memoryBatchRows)
	stop := sampleRSS(&f.FillRSSMB)
	start := time.Now()
	for done := 0; done < keys; done += len(batch) {
		n := min(len(batch), keys-done)
		for i := range n {
			batch[i].Data = fmt.Appendf(batch[i].Data[:0], `{"user_id":"user-%09d"}`, done+i)
		}
		if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: t0, Rows: batch[:n]}); err != nil {
			stop()
			return f, err
		}
	}
	f.DataCallsPerSec = float64(keys) / time.Since(start).Seconds()
	stop()
	settle()

	stop = sampleRSS(&f.RSSMB)
	start = time.Now()
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: t0 + 2*time.Minute.Milliseconds()})
	elapsed := time.Since(start)
	stop()
	if err != nil {
		return f, err
	}
	if rep.TimeoutCalls != keys {
		return f, fmt.Errorf("%d timeout calls, want %d", rep.TimeoutCalls, keys)
	}
	f.TimeoutCallsPerSec = float64(keys) / elapsed.Seconds()
	return f, nil
}
