package bench

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
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

// memory writes state for keys distinct keys (logincount, one row per key, batches of 10k)
// and samples the process's RSS at every tenth of the way: state lives in Pebble on disk, so
// RSS must level off at the caches (Pebble's block cache and memtables) whatever the count.
func memory(ctx context.Context, dir string, wasm []byte, keys int, logger *slog.Logger) ([]MemoryPoint, error) {
	sp, err := spec.ParseSpec([]byte(memorySpec))
	if err != nil {
		return nil, err
	}
	st, err := state.Open(dir, &state.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rt, err := engine.New(engine.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	eng, err := rt.NewEngine(ctx, engine.Config{Spec: sp, Wasm: wasm, Store: st, Logger: logger,
		Sink: engine.SinkFunc(func(context.Context, string, []state.OutboxEntry) error { return nil })})
	if err != nil {
		return nil, err
	}
	defer eng.Close(ctx)
	const batchRows = 10_000
	batch := make([]engine.Row, batchRows)
	step := keys / 10
	var points []MemoryPoint
	for done := 0; done < keys; {
		for i := range batch {
			batch[i].Data = fmt.Appendf(batch[i].Data[:0], `{"user_id":"user-%09d"}`, done+i)
		}
		if _, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: time.Now().UnixMilli(), Rows: batch}); err != nil {
			return nil, err
		}
		done += batchRows
		if done%step == 0 {
			settle()
			points = append(points, MemoryPoint{Keys: done, RSSMB: rssMB()})
		}
	}
	return points, nil
}

// rssMB reads the process's resident set size from /proc (0 where there is none).
func rssMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}
