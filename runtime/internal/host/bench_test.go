package host

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// BenchmarkInvoke measures the cost per key group of guest calls carrying batches of 1, 16,
// 256 and 4096 groups (logincount in each language: one row and a small JSON state per group,
// decoded, updated, encoded and emitted). The figure to judge is ns/group: the target in
// docs/performance.md is at most 1µs amortized.
func BenchmarkInvoke(b *testing.B) {
	for _, lang := range []string{"go", "rust", "c", "assemblyscript"} {
		b.Run(lang, func(b *testing.B) { benchmarkInvoke(b, lang) })
	}
}

func benchmarkInvoke(b *testing.B, lang string) {
	wasm, err := os.ReadFile("../../../samples/logincount/" + lang + "/logincount.wasm")
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig(wasm)
	cfg.Init.Mode = abi.TimeoutProcessingTime
	cfg.Init.Config = []byte(`{"idle_timeout":"10s"}`)
	cfg.Limits.Instances = 1
	h, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	for _, n := range []int{1, 16, 256, 4096} {
		b.Run(fmt.Sprintf("groups=%d", n), func(b *testing.B) {
			call := &handler.Call{ProcessingTimeMs: 1000}
			for i := range n {
				call.Groups = append(call.Groups, handler.Group{
					Flags: abi.GroupStateExists,
					Key:   fmt.Appendf(nil, `"user-%06d"`, i),
					State: []byte(`{"login_count":41}`),
					Rows:  [][]byte{fmt.Appendf(nil, `{"user_id":"user-%06d","ts":1700000000000}`, i)},
				})
			}
			res := make([]handler.Result, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := h.Process(context.Background(), call, res); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/group")
		})
	}
}

// BenchmarkChecks measures what the interruption checks (interrupt.go) cost guest code at
// worst: code that does nothing but call (fib, a call per two additions) and nothing but loop
// (a sum), each instrumented and as compiled without any check (wazero's own interruption
// off), in ns per call or iteration. Real handlers spend most of their time elsewhere (see
// BenchmarkInvoke and the engine's BenchmarkEngineSessions).
func BenchmarkChecks(b *testing.B) {
	// fib(n) = n < 2 ? n : fib(n-1) + fib(n-2)
	fib := []byte{0x20, 0x00, 0x41, 0x02, 0x49, 0x04, 0x7f, 0x20, 0x00, 0x05,
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x10, 0x00, 0x20, 0x00, 0x41, 0x02, 0x6b, 0x10, 0x00, 0x6a, 0x0b}
	// sum(n): s = 0; loop { s += n; n--; br_if n != 0 }; s (n > 0)
	sum := []byte{0x03, 0x40, 0x20, 0x01, 0x20, 0x00, 0x6a, 0x21, 0x01, 0x20, 0x00, 0x41, 0x01, 0x6b,
		0x22, 0x00, 0x0d, 0x00, 0x0b, 0x20, 0x01}
	m := wasmModule{memory: true, funcs: []wasmFunc{
		{export: "fib", params: []byte{tI32}, results: []byte{tI32}, body: fib},
		{export: "sum", params: []byte{tI32}, results: []byte{tI32}, locals: []byte{tI32}, body: sum},
	}}
	raw := m.bytes()
	ins, err := instrument(raw, LoadLimits{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, v := range []struct {
		name string
		wasm []byte
	}{{"unchecked", raw}, {"checked", ins.wasm}} {
		rt := wazero.NewRuntime(ctx)
		mod, err := rt.Instantiate(ctx, v.wasm)
		if err != nil {
			b.Fatal(err)
		}
		const fibN, calls = 25, 242785 // fib(25) makes 242,785 calls
		b.Run("calls/"+v.name, func(b *testing.B) {
			f := mod.ExportedFunction("fib")
			for b.Loop() {
				if r, err := f.Call(ctx, fibN); err != nil || r[0] != 75025 {
					b.Fatal(r, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
		})
		const iters = 1 << 20
		b.Run("loops/"+v.name, func(b *testing.B) {
			f := mod.ExportedFunction("sum")
			for b.Loop() {
				if _, err := f.Call(ctx, iters); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*iters), "ns/iteration")
		})
		rt.Close(ctx)
	}
}
