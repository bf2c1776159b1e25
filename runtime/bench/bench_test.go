package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// These benchmarks run the measurements of groupstate bench one by one, for profiling with go
// test (-cpuprofile, -memprofile). Each op is one whole measurement, so run them with
// -benchtime 1x; the figures are reported as metrics, with the names of the bench's JSON.

var quiet = slog.New(slog.DiscardHandler)

func sample(b *testing.B, name, lang string) []byte {
	b.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "..", "samples", name, lang, name+".wasm"))
	if err != nil {
		b.Fatal(err)
	}
	return wasm
}

// BenchmarkExtismPerGroup: the peer, one Extism plugin call per key group (extism_ns_per_group).
func BenchmarkExtismPerGroup(b *testing.B) {
	var ns float64
	for b.Loop() {
		var err error
		if ns, err = extismPerGroup(context.Background(), 500*time.Millisecond); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(ns, "ns/group")
}

// BenchmarkEndToEnd: JetStream in, WASM, Pebble, JetStream out, against a raw consume and
// republish of the same 100k rows (e2e_rows_per_sec, raw_rows_per_sec, e2e_raw_ratio).
func BenchmarkEndToEnd(b *testing.B) {
	wasm := sample(b, "logincount", "rust")
	var e2e, raw float64
	for b.Loop() {
		var err error
		if e2e, raw, err = endToEnd(context.Background(), b.TempDir(), wasm, 100_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(e2e, "rows/s")
	b.ReportMetric(raw, "raw-rows/s")
	b.ReportMetric(e2e/raw, "ratio")
}

// BenchmarkReplication: end to end with replication: changelog against the same deployment
// without it (changelog_ratio).
func BenchmarkReplication(b *testing.B) {
	wasm := sample(b, "logincount", "rust")
	var none, changelog float64
	for b.Loop() {
		var err error
		if none, changelog, err = replicationCost(context.Background(), b.TempDir(), wasm, 100_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(changelog, "rows/s")
	b.ReportMetric(none, "none-rows/s")
	b.ReportMetric(changelog/none, "ratio")
}

// BenchmarkLatency: publish-to-output at 10k rows/s for 3s (latency_p50_ms, latency_p99_ms).
func BenchmarkLatency(b *testing.B) {
	wasm := sample(b, "logincount", "rust")
	var p50, p99 float64
	for b.Loop() {
		var err error
		if p50, p99, err = latency(context.Background(), b.TempDir(), wasm, 10_000, 3, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
}

// BenchmarkWarmRestart: a fresh runtime starts the Go sessions module from a filled
// compilation cache (warm_restart_ms).
func BenchmarkWarmRestart(b *testing.B) {
	wasm := sample(b, "sessions", "go")
	dir := b.TempDir()
	var ms float64
	for b.Loop() {
		var err error
		if ms, err = warmRestart(context.Background(), dir, wasm, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(ms, "ms")
}

// BenchmarkABIv2: the same counting per key as an ABI v1 module (the Go logincount) and as an
// ABI v2 processor (testdata/v2count), 100k keys and 1M rows through the engine
// (abi_rows_per_sec, abi_v2_ratio).
func BenchmarkABIv2(b *testing.B) {
	v1 := sample(b, "logincount", "go")
	var r1, r2 float64
	for b.Loop() {
		var err error
		if r1, err = engineCount(context.Background(), b.TempDir(), v1, 100_000, 1_000_000, quiet); err != nil {
			b.Fatal(err)
		}
		if r2, err = engineCount(context.Background(), b.TempDir(), v2CountModule, 100_000, 1_000_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(r1, "v1-rows/s")
	b.ReportMetric(r2, "v2-rows/s")
	b.ReportMetric(r2/r1, "ratio")
}
