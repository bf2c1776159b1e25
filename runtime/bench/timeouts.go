package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
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
	// RSSMB is the highest RSS seen while the timeouts fired (sampled every 50 ms).
	RSSMB float64
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
	start := time.Now()
	for done := 0; done < keys; done += len(batch) {
		n := min(len(batch), keys-done)
		for i := range n {
			batch[i].Data = fmt.Appendf(batch[i].Data[:0], `{"user_id":"user-%09d"}`, done+i)
		}
		if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: t0, Rows: batch[:n]}); err != nil {
			return f, err
		}
	}
	f.DataCallsPerSec = float64(keys) / time.Since(start).Seconds()
	settle()

	stop, sampled := make(chan struct{}), sync.WaitGroup{}
	sampled.Add(1)
	go func() {
		defer sampled.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			f.RSSMB = max(f.RSSMB, rssMB())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start = time.Now()
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: t0 + 2*time.Minute.Milliseconds()})
	elapsed := time.Since(start)
	close(stop)
	sampled.Wait()
	if err != nil {
		return f, err
	}
	if rep.TimeoutCalls != keys {
		return f, fmt.Errorf("%d timeout calls, want %d", rep.TimeoutCalls, keys)
	}
	f.TimeoutCallsPerSec = float64(keys) / elapsed.Seconds()
	return f, nil
}
