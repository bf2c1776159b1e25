package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/procmem"
)

// BenchmarkBigValues runs batches of big rows over a few keys (issue 30, item 6: 100 rows of
// 900 KB over 4 keys): each row of 900 KB sets its key's state to a 450 KB value and emits
// it, so a batch carries every value in, through the guest, into the state batch and the
// outbox, and out to the sink. Each op is one batch of rowsPerBatch rows (as many as the default
// trigger.max_bytes of 16 MiB takes); alloc-B/batch over input-B/batch is how many times the
// host allocates a batch's bytes, peak-RSS-MB the process's peak resident memory (Linux), and
// state-dir-MB the state directory's size at the end.
func BenchmarkBigValues(b *testing.B) {
	const keys, rowsPerBatch, valueBytes = 4, 16, 450_000
	sp := specFromYAML(b, `
name: big
module: unused.wasm
input: {subjects: ["big.in"]}
key: {field: k}
timeout: processing_time
output: {subject: big.out}
`)
	wasm := readFile(b, "testdata/probe/probe.wasm")
	dir := b.TempDir()
	eng := newEngine(b, sp, wasm, openStore(b, dir), engine.SinkFunc(discardSink))
	batch := make([]engine.Row, rowsPerBatch)
	inBytes := 0
	for i := range batch {
		// The emitted row and the state are the same value: the row is about 900 KB.
		v := fmt.Sprintf(`"%d%s"`, i, strings.Repeat("x", valueBytes))
		batch[i].Data = fmt.Appendf(nil, `{"k":"k%d","ops":[{"update":%s},{"emit":%s}]}`, i%keys, v, v)
		inBytes += len(batch[i].Data)
	}
	ctx := context.Background()
	at := int64(1000)
	run := func() {
		at++
		rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: at, Rows: batch})
		require(b, err)
		if rep.Emitted != rowsPerBatch {
			b.Fatalf("%d rows emitted, want %d", rep.Emitted, rowsPerBatch)
		}
	}
	run() // the module's instances start and grow their memories
	runtime.GC()
	canRSS := procmem.ResetPeak()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	n := float64(b.N)
	b.ReportMetric(float64(inBytes), "input-B/batch")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "alloc-B/batch")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n/float64(inBytes), "alloc/input")
	if canRSS {
		b.ReportMetric(float64(procmem.PeakRSS())/(1<<20), "peak-RSS-MB")
	}
	b.ReportMetric(float64(dirSize(b, dir))/(1<<20), "state-dir-MB")
}

// dirSize is the bytes of the files under dir.
func dirSize(t testing.TB, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	require(t, err)
	return n
}
