package bench

import (
	"context"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// BenchmarkPythonABIv2: the same counting per key as a Python ABI v1 function and as a Python
// ABI v2 StatefulProcessor, 10k keys and 100k rows through the engine (the Python figures of
// BenchmarkABIv2, smaller because Python is slower; python_abi_rows_per_sec and
// python_abi_v2_ratio in groupstate bench).
func BenchmarkPythonABIv2(b *testing.B) {
	var r1, r2 float64
	for b.Loop() {
		var err error
		if r1, r2, err = pythonABI(context.Background(), b.TempDir(), 10_000, 100_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(r1, "v1-rows/s")
	b.ReportMetric(r2, "v2-rows/s")
	b.ReportMetric(r2/r1, "ratio")
}

// BenchmarkInstanceStart: one more instance of the logincount module on a running host, per
// language (instance_start_ms_by_language); Python's includes the interpreter's start.
func BenchmarkInstanceStart(b *testing.B) {
	for _, lang := range []string{"go", "python"} {
		b.Run(lang, func(b *testing.B) {
			wasm, err := benchModule("../../samples", "logincount", lang)
			if err != nil {
				b.Fatal(err)
			}
			var ms float64
			for b.Loop() {
				if ms, err = instanceStart(context.Background(), wasm, 5, quiet); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(ms, "ms")
		})
	}
}

// BenchmarkPythonLogincount: the logincount sample in Python and in Go through the engine on
// the counting workload, 100k keys and 1M rows (logincount_rows_per_sec,
// python_go_logincount_ratio; target >= 0.3), with the CPU time per row of each.
func BenchmarkPythonLogincount(b *testing.B) {
	var rps, cpu [2]float64
	for b.Loop() {
		for i, lang := range []string{"go", "python"} {
			wasm, err := benchModule("../../samples", "logincount", lang)
			if err != nil {
				b.Fatal(err)
			}
			settle()
			if rps[i], cpu[i], err = engineCountCPU(context.Background(), b.TempDir(), wasm, 100_000, 1_000_000, quiet); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(rps[0], "go-rows/s")
	b.ReportMetric(rps[1], "python-rows/s")
	b.ReportMetric(rps[1]/rps[0], "ratio")
	b.ReportMetric(cpu[0], "go-cpu-µs/row")
	b.ReportMetric(cpu[1], "python-cpu-µs/row")
}

// BenchmarkPythonInvoke: the logincount sample in Python through the host, 4096 groups per
// call of one row and a state each (invoke_ns_per_group_by_language's Python figure at 4096),
// in ns and in CPU µs (the process's user and system time) per group: the guest's work per
// group, without the engine's; and the instance's memory after it (instance_memory_mb_by_language).
func BenchmarkPythonInvoke(b *testing.B) {
	ctx := context.Background()
	wasm, err := benchModule("../../samples", "logincount", "python")
	if err != nil {
		b.Fatal(err)
	}
	h, err := logincountHost(ctx, wasm, quiet)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(ctx)
	const n = 4096
	call := logincountCall(n)
	res := make([]handler.Result, n)
	if err := h.Process(ctx, call, res); err != nil { // warm up
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		if err := h.Process(ctx, call, res); err != nil {
			b.Fatal(err)
		}
	}
	cpu := cpuTime() - cpu0
	if res[0].Err != nil {
		b.Fatal(res[0].Err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/group")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*n), "cpu-µs/group")
	b.ReportMetric(float64(h.InstanceMemoryBytes())/(1<<20), "instance-MB")
}
