package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/procmem"
)

const memorySpec = `
name: memory
module: x.wasm
input: {subjects: ["mem.in"]}
key: {field: user_id}
timeout: processing_time
output: {subject: mem.out}
`

// MemoryPoint is the process's resident memory after state for Keys keys was committed.
type MemoryPoint struct {
	Keys  int     `json:"keys"`
	RSSMB float64 `json:"rss_mb"`
}

// StatePoint is engine throughput on keys that already have state when the store holds
// state for Keys keys: batches of memoryBatchRows rows, each on one of the first ActiveKeys
// keys drawn uniformly (a read, an update and an output per row), after a warm-up of
// ActiveKeys rows.
type StatePoint struct {
	Keys       int     `json:"keys"`
	ActiveKeys int     `json:"active_keys"`
	RowsPerSec float64 `json:"rows_per_sec"`
}

// memoryBatchRows is the rows of every batch the memory measurement runs.
const memoryBatchRows = 10_000

// memory writes state for keys distinct keys (logincount, one row per key, batches of
// memoryBatchRows) and samples the process's RSS at every tenth of the way: state lives in
// Pebble on disk, so RSS must level off at the caches (Pebble's block cache and memtables)
// whatever the count. It also measures what state costs as it grows (the StatePoints, in this
// order): the throughput of probeRows rows on min(100k, keys/10) keys when the store holds
// just those, the same on as many keys spread over all the state when it holds all keys (the same working set in more state: the
// cost must not grow), and probeRows rows on all keys (the working set is all the state: it
// no longer fits the caches, and every row reads Pebble).
func memory(ctx context.Context, dir string, wasm []byte, keys, probeRows int, logger *slog.Logger) ([]MemoryPoint, []StatePoint, error) {
	eng, err := startEngine(ctx, dir, []byte(memorySpec), wasm, nil, logger)
	if err != nil {
		return nil, nil, err
	}
	defer eng.close(ctx)
	batch := make([]engine.Row, memoryBatchRows)
	step := keys / 10
	small := min(100_000, step)
	var points []MemoryPoint
	var growth []StatePoint
	for done := 0; done < keys; {
		for i := range batch {
			batch[i].Data = fmt.Appendf(batch[i].Data[:0], `{"user_id":"user-%09d"}`, done+i)
		}
		if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: time.Now().UnixMilli(), Rows: batch}); err != nil {
			return nil, nil, err
		}
		done += memoryBatchRows
		// RSS first: the probes read all over the state, which is not what this point measures.
		if done%step == 0 {
			settle()
			points = append(points, MemoryPoint{Keys: done, RSSMB: procmem.MB(procmem.RSS())})
		}
		if done == small || done == keys {
			active := []int{small}
			if done == keys {
				active = append(active, keys)
			}
			for _, n := range active {
				settle()
				eng.quiesce()
				rps, err := stateProbe(ctx, eng.Engine, batch, n, done/n, probeRows)
				if err != nil {
					return nil, nil, err
				}
				growth = append(growth, StatePoint{Keys: done, ActiveKeys: n, RowsPerSec: rps})
			}
		}
	}
	return points, growth, nil
}

// stateProbe runs keys rows to warm up, then rows rows, in batches of len(batch), each on one
// of keys keys drawn uniformly (the same draws for every size): every stride-th key written,
// so that the working set is spread over all the state, as the active keys of a real
// deployment are. It returns the rows per second of the second part.
func stateProbe(ctx context.Context, eng *engine.Engine, batch []engine.Row, keys, stride, rows int) (float64, error) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var start time.Time
	for done := -keys; done < rows; done += len(batch) {
		if done >= 0 && start.IsZero() {
			start = time.Now()
		}
		for i := range batch {
			batch[i].Data = fmt.Appendf(batch[i].Data[:0], `{"user_id":"user-%09d"}`, rnd.IntN(keys)*stride)
		}
		if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: time.Now().UnixMilli(), Rows: batch}); err != nil {
			return 0, err
		}
	}
	return float64(rows) / time.Since(start).Seconds(), nil
}
