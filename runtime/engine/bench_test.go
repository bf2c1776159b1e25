package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/nativehook"
	"github.com/groupstate/groupstate/samples/sessions/go/session"
	groupstate "github.com/groupstate/groupstate/sdk/go"
	"github.com/groupstate/groupstate/state"
)

// BenchmarkEngineSessions measures engine throughput on the sessions sample with 100k keys:
// the sample's WASM module in each language versus the Go handler code compiled natively
// (package session), in the same engine over the same Pebble store. Each op is one
// micro-batch of 10k rows; compare rows/s of the sub-benchmarks (the target in
// docs/performance.md is WASM >= 0.5 x native).
func BenchmarkEngineSessions(b *testing.B) {
	const keys, batchRows = 100_000, 10_000
	sp := specFromYAML(b, sessionsServiceSpec)
	// native runs one instance; native_cpus as many as a module gets by default (the CPUs),
	// each call split among them as among a module's instances.
	for _, kind := range []string{"native", "native_cpus", "go", "rust", "c", "assemblyscript"} {
		b.Run(kind, func(b *testing.B) {
			cfg := engine.Config{Spec: sp, Store: openStore(b, ""), Sink: engine.SinkFunc(discardSink)}
			switch kind {
			case "native", "native_cpus":
				n := 1
				if kind == "native_cpus" {
					n = runtime.NumCPU()
				}
				mods := make([]handler.BufferModule, n)
				for i := range mods {
					m := groupstate.NewModule()
					session.Register(m)
					mods[i] = m
				}
				nativehook.Use(&cfg, mods...)
			default:
				cfg.Wasm = readFile(b, "../../samples/sessions/"+kind+"/sessions.wasm")
			}
			eng, err := sharedRuntime(b).NewEngine(context.Background(), cfg)
			require(b, err)
			defer eng.Close(context.Background())
			batch := make([]engine.Row, batchRows)
			next := 0
			at := int64(1)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for i := range batch {
					k := next % keys
					// Event time advances 1ms per row: sessions grow, close after the gap and
					// time out as the watermark passes them.
					batch[i].Data = fmt.Appendf(batch[i].Data[:0], `{"user_id":"u%06d","ts":%d,"page":"/p/%d"}`, k, 1_700_000_000_000+int64(next), k%97)
					next += 7919 // a prime stride spreads consecutive rows over all keys
				}
				at++
				in := engine.BatchInput{ProcessingTimeMs: at, Rows: batch}
				for {
					rep, err := eng.RunBatch(context.Background(), in)
					require(b, err)
					if !rep.NeedsNoDataBatch {
						break
					}
					in = engine.BatchInput{ProcessingTimeMs: at}
				}
			}
			b.ReportMetric(float64(b.N*batchRows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

func discardSink(context.Context, string, []state.OutboxEntry) error { return nil }

const sessionsServiceSpec = `
name: sessions
module: unused.wasm
input:
  subjects: ["clicks.>"]
key:
  field: user_id
event_time:
  field: ts
  watermark_delay: 10s
timeout: event_time
output:
  subject: sessions.out
config:
  gap: 5s
`
