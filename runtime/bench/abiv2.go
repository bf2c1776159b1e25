package bench

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
)

// v2CountModule is testdata/v2count: logincount's logic without a timeout, as an ABI v2
// processor whose count is a value state variable.
//
//go:embed testdata/v2count/v2count.wasm
var v2CountModule []byte

// countSpec runs logincount's counting with no timeout: the v1 module and v2count then do the
// same work per key (read the count, add the rows, write it, emit the total).
const countSpec = `
name: count
module: count.wasm
input: {subjects: ["logins.>"]}
key: {field: user_id}
timeout: none
output: {subject: count.out}
`

// engineCount runs rows rows over keys keys of the counting workload through the engine with
// the module wasm (ABI v1 or v2), and returns rows/s.
func engineCount(ctx context.Context, dir string, wasm []byte, keys, rows int, logger *slog.Logger) (float64, error) {
	rps, _, err := engineCountCPU(ctx, dir, wasm, keys, rows, logger)
	return rps, err
}

// engineCountCPU is engineCount that also returns the process's CPU time (user and system,
// every thread: the engine, the guest, Pebble's background work, the garbage collector) per
// row while the rows ran, in microseconds: less sensitive than rows/s to other work on a
// shared machine.
func engineCountCPU(ctx context.Context, dir string, wasm []byte, keys, rows int, logger *slog.Logger) (rps, cpuUsPerRow float64, err error) {
	eng, err := startEngine(ctx, dir, []byte(countSpec), wasm, nil, logger)
	if err != nil {
		return 0, 0, err
	}
	defer eng.close(ctx)
	const batchRows = 10_000
	batch := make([]engine.Row, batchRows)
	next := 0
	start, cpu0 := time.Now(), cpuTime()
	for done, at := 0, int64(1); done < rows; done, at = done+batchRows, at+1 {
		for i := range batch {
			batch[i].Data = fmt.Appendf(batch[i].Data[:0], `{"user_id":"u%06d"}`, next%keys)
			next += 7919 // a prime stride spreads the rows over every key
		}
		if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: at, Rows: batch}); err != nil {
			return 0, 0, err
		}
	}
	cpu := cpuTime() - cpu0
	return float64(rows) / time.Since(start).Seconds(), float64(cpu.Microseconds()) / float64(rows), nil
}

// cpuTime returns the process's CPU time so far (user and system), 0 where it cannot be read.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
