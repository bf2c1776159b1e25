package scenario

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/spec"
)

func logincount(t testing.TB) (*spec.Spec, []byte) {
	t.Helper()
	sp, _, err := spec.LoadSpec("../../samples/logincount/logincount.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile("../../samples/logincount/go/logincount.wasm")
	if err != nil {
		t.Fatal(err)
	}
	return sp, wasm
}

// TestEmittedNotKeptAfterLastExpect: the rows emitted after the scenario's last expect step
// are written out and not kept (a scenario without expectations over a million keys kept
// every output in memory).
func TestEmittedNotKeptAfterLastExpect(t *testing.T) {
	sp, wasm := logincount(t)
	steps, err := Parse(strings.NewReader(`{"at": 1000, "rows": [{"user_id": "a"}]}
{"expect": [{"user_id": "a", "total_logins": 1}]}
{"at": 2000, "rows": [{"user_id": "b"}, {"user_id": "c"}]}
{"at": 60000, "rows": []}
`))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx := context.Background()
	h, cleanup, err := newHarness(ctx, &Options{Spec: sp, Wasm: wasm, Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	var sum Summary
	for _, st := range steps {
		h.count(st, &sum)
	}
	if err := h.open(ctx); err != nil {
		t.Fatal(err)
	}
	defer h.close(ctx)
	for _, st := range steps {
		if err := h.step(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 6 {
		t.Fatalf("%d rows written, want 6 (a, b, c, and the three closing):\n%s", n, out.String())
	}
	if len(h.emitted) != 0 {
		t.Fatalf("%d rows kept after the last expect step, want none: %s", len(h.emitted), h.emitted)
	}
	if sum != (Summary{Batches: 3, Expectations: 1}) {
		t.Fatalf("summary %+v", sum)
	}
}
