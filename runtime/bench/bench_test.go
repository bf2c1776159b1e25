package bench

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/state"
)

// These benchmarks run the measurements of groupstate bench one by one, for profiling with go
// test (-cpuprofile, -memprofile). Each op is one whole measurement, so run them with
// -benchtime 1x; the figures are reported as metrics, with the names of the bench's JSON.

var quiet = slog.New(slog.DiscardHandler)

// joinSpecFile reads samples/adjoin/adjoin.yaml.
func joinSpecFile(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "samples", "adjoin", "adjoin.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sample(b testing.TB, name, lang string) []byte {
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

// BenchmarkLatencyAt30k: the p99 latency at 30k rows/s, a step of max_rate_p99_25ms (the
// target is p99 under 25 ms at 30k rows/s at least).
func BenchmarkLatencyAt30k(b *testing.B) {
	wasm := sample(b, "logincount", "rust")
	var p99 float64
	for b.Loop() {
		var err error
		if _, p99, err = latency(context.Background(), b.TempDir(), wasm, 30_000, 3, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p99, "p99-ms")
}

// BenchmarkNATSLimits: the embedded JetStream server alone, 100k rows published with message
// ids and consumed acknowledging each (nats_pub_rows_per_sec, nats_consume_rows_per_sec).
func BenchmarkNATSLimits(b *testing.B) {
	var pub, consume float64
	for b.Loop() {
		var err error
		if pub, consume, err = natsLimits(context.Background(), b.TempDir(), 100_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(pub, "pub-rows/s")
	b.ReportMetric(consume, "consume-rows/s")
}

// BenchmarkWarmRestart: a fresh runtime starts the Go sessions module from a filled
// compilation cache (warm_restart_ms), with the CPU time the start took (cpu-ms).
func BenchmarkWarmRestart(b *testing.B) {
	wasm := sample(b, "sessions", "go")
	dir := b.TempDir()
	var ms, cpu float64
	for b.Loop() {
		var err error
		if ms, cpu, err = warmRestartCPU(context.Background(), dir, wasm, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(ms, "ms")
	b.ReportMetric(cpu, "cpu-ms")
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

// BenchmarkJoin: the adjoin sample (a stream-stream join) through the engine, 100k ads and 1M
// rows over 12 hours of event time (join_rows_per_sec), with the rows it holds at the end.
func BenchmarkJoin(b *testing.B) {
	wasm, sp := sample(b, "adjoin", "go"), joinSpecFile(b)
	var rps float64
	var points []JoinPoint
	for b.Loop() {
		var err error
		if rps, points, err = engineJoin(context.Background(), b.TempDir(), sp, wasm, 100_000, 1_000_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(rps, "rows/s")
	b.ReportMetric(float64(points[len(points)-1].Buffered), "rows-held")
	b.ReportMetric(joinGrowth(points), "growth")
}

// TestJoinStateLevelsOff: the join's state stops growing once the watermark moves: past the
// horizon of the delays and the range (3h + 1h of the 12h run), the rows held stay within 10%
// of each other, and they are about the horizon's share of the rows (not all of them).
func TestJoinStateLevelsOff(t *testing.T) {
	wasm, sp := sample(t, "adjoin", "go"), joinSpecFile(t)
	_, points, err := engineJoin(context.Background(), t.TempDir(), sp, wasm, 2_000, 40_000, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("state: %+v", points)
	lo, hi := points[5].Buffered, points[5].Buffered
	for _, p := range points[5:] {
		lo, hi = min(lo, p.Buffered), max(hi, p.Buffered)
	}
	if float64(hi) > 1.1*float64(lo) {
		t.Errorf("rows held from 60%% of the run on range from %d to %d: the state grows", lo, hi)
	}
	if last := points[len(points)-1]; last.Buffered > last.Rows/2 {
		t.Errorf("%d of %d rows held at the end: the watermark evicts nothing", last.Buffered, last.Rows)
	}
}

// BenchmarkStateGrowth: engine throughput on a working set of 100k keys with state for 100k
// keys and for 1M, and on all 1M keys (state_rows_per_sec, state_growth_ratio,
// state_uniform_ratio; the bench's full run goes to 10M).
func BenchmarkStateGrowth(b *testing.B) {
	wasm := sample(b, "logincount", "c")
	var growth []StatePoint
	for b.Loop() {
		var err error
		if _, growth, err = memory(context.Background(), b.TempDir(), wasm, 1_000_000, 200_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(growth[0].RowsPerSec, "rows/s-100k")
	b.ReportMetric(growth[1].RowsPerSec, "rows/s-1M")
	b.ReportMetric(growth[2].RowsPerSec, "rows/s-1M-all")
	b.ReportMetric(growth[1].RowsPerSec/growth[0].RowsPerSec, "ratio")
	b.ReportMetric(growth[2].RowsPerSec/growth[0].RowsPerSec, "ratio-all")
}

// BenchmarkTimeouts: 1M keys' timeouts expire in one batch (timeout_calls_per_sec,
// timeout_data_calls_per_sec, timeout_ratio, timeout_rss_mb, timeout_fill_rss_mb).
func BenchmarkTimeouts(b *testing.B) {
	wasm := sample(b, "logincount", "c")
	var f TimeoutsFigures
	for b.Loop() {
		var err error
		if f, err = timeoutsAtOnce(context.Background(), b.TempDir(), wasm, 1_000_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(f.TimeoutCallsPerSec, "timeout-calls/s")
	b.ReportMetric(f.DataCallsPerSec, "data-calls/s")
	b.ReportMetric(f.TimeoutCallsPerSec/f.DataCallsPerSec, "ratio")
	b.ReportMetric(f.RSSMB, "rss-MB")
	b.ReportMetric(f.FillRSSMB, "fill-rss-MB")
}

// TestTimeoutsAtOnce: every timeout fires in the one batch, over several chunks.
func TestTimeoutsAtOnce(t *testing.T) {
	f, err := timeoutsAtOnce(context.Background(), t.TempDir(), sample(t, "logincount", "c"), 40_000, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if f.TimeoutCallsPerSec <= 0 || f.DataCallsPerSec <= 0 || f.RSSMB <= 0 || f.FillRSSMB <= 0 {
		t.Errorf("figures %+v: want every one positive", f)
	}
}

// TestPassThroughHeaders: the raw baseline publishes what groupstate's contract makes it
// publish for an output: the same header names, values of the same shape (the message id
// deployment.instance.batch.seq), so the server stores and deduplicates the same bytes.
func TestPassThroughHeaders(t *testing.T) {
	j := testutil.StartJetStream(t)
	ctx := context.Background()
	for _, s := range []jetstream.StreamConfig{{Name: "IN", Subjects: []string{"in"}}, {Name: "OUT", Subjects: []string{"out"}}} {
		if _, err := j.JS.CreateStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := j.JS.Publish(ctx, "in", []byte(`{"user_id":"u0000001"}`)); err != nil {
		t.Fatal(err)
	}
	cons, err := j.JS.CreateOrUpdateConsumer(ctx, "IN", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	stop, err := passThrough(j.JS, cons, "out")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	st, err := j.JS.Stream(ctx, "OUT")
	if err != nil {
		t.Fatal(err)
	}
	var m *jetstream.RawStreamMsg
	testutil.EventuallyWithin(t, 5*time.Second, "the output", func() bool {
		m, err = st.GetMsg(ctx, 1)
		return err == nil
	})
	want := map[string]string{
		service.HeaderDeployment: "raw",
		service.HeaderKey:        `"u0000001"`,
		service.HeaderBatch:      "1",
		jetstream.MsgIDHeader:    output.MsgID("raw", rawInstance, 0, state.OutboxID{BatchID: 1, Seq: 1}),
	}
	if len(m.Header) != len(want) {
		t.Fatalf("headers %v, want %v", m.Header, want)
	}
	for k, v := range want {
		if got := m.Header.Get(k); got != v {
			t.Fatalf("header %s = %q, want %q (all: %v)", k, got, v, m.Header)
		}
	}
	if id := m.Header.Get(jetstream.MsgIDHeader); strings.Count(id, ".") != 3 || len(strings.Split(id, ".")[1]) != 16 {
		t.Fatalf("message id %q is not deployment.instance.batch.seq", id)
	}
}

// BenchmarkCount: BenchmarkABIv2's two sides one at a time, for a profile of each
// (-cpuprofile): 100k keys, 300k rows; with the process's CPU time per row, which a loaded
// machine moves less than rows/s.
func BenchmarkCount(b *testing.B) {
	for _, side := range []struct {
		name string
		wasm []byte
	}{{"v1", sample(b, "logincount", "go")}, {"v2", v2CountModule}} {
		b.Run(side.name, func(b *testing.B) {
			var rps, cpu float64
			for b.Loop() {
				var err error
				if rps, cpu, err = engineCountCPU(context.Background(), b.TempDir(), side.wasm, 100_000, 300_000, quiet); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(rps, "rows/s")
			b.ReportMetric(cpu, "cpu-µs/row")
		})
	}
}

// BenchmarkJoinQuick: BenchmarkJoin at the quick run's sizes (20k ads, 100k rows), for
// before-and-after comparisons and profiles; with the process's CPU time per row while the
// batches ran (as BenchmarkCount reports it), which a loaded machine moves less than rows/s.
func BenchmarkJoinQuick(b *testing.B) {
	wasm, sp := sample(b, "adjoin", "go"), joinSpecFile(b)
	var rps, cpu float64
	for b.Loop() {
		var err error
		if rps, _, cpu, err = engineJoinCPU(context.Background(), b.TempDir(), sp, wasm, 20_000, 100_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(rps, "rows/s")
	b.ReportMetric(cpu, "cpu-µs/row")
}
