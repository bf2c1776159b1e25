package host

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// countSession is a StateSession that answers every VALUE_GET with the same small JSON value
// and does nothing else: what a v2 guest call costs without the state store behind it.
type countSession struct{}

func (countSession) Begin(int) error { return nil }

func (countSession) Apply(req, dst []byte) ([]byte, error) {
	r := abi.NewOpReader(req)
	var o abi.DecodedOp
	for {
		ok, err := r.Next(&o)
		if err != nil || !ok {
			return dst, err
		}
		if o.Op == abi.OpValueGet {
			dst = abi.AppendValueAnswer(dst, true, []byte(`{"login_count":41}`))
		}
	}
}

func (countSession) End(int, []handler.ResultV2) {}

// BenchmarkInvokeV2 is BenchmarkInvoke for ABI v2: the bench's v2count module (logincount's
// count as a transformWithState processor: one state request per group, its write in the
// result), one row per group, with a session that answers reads and keeps nothing, so the
// figure is the guest's work and the host's calls (group_begin, state) per group.
func BenchmarkInvokeV2(b *testing.B) {
	wasm, err := os.ReadFile("../../bench/testdata/v2count/v2count.wasm")
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig(wasm)
	cfg.Init.ABIVersion = abi.Version2
	cfg.Init.Mode = abi.TimeoutNone
	cfg.Limits.Instances = 1
	h, err := New(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(context.Background())
	for _, n := range []int{256, 4096} {
		b.Run(fmt.Sprintf("groups=%d", n), func(b *testing.B) {
			call := &handler.CallV2{ProcessingTimeMs: 1000}
			for i := range n {
				call.Groups = append(call.Groups, handler.GroupV2{
					Kind: abi.GroupData,
					Key:  fmt.Appendf(nil, `"user-%06d"`, i),
					Rows: [][]byte{fmt.Appendf(nil, `{"user_id":"user-%06d","ts":1700000000000}`, i)},
				})
			}
			res := make([]handler.ResultV2, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := h.ProcessV2(context.Background(), call, countSession{}, res); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/group")
		})
	}
}
