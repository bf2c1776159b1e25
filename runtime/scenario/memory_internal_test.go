package scenario

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
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
	h, cleanup, err := newHarness(ctx, &Options{Spec: sp, Wasm: wasm, Out: &out, Runtime: sharedRuntime(t)})
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

// TestRunReaders: Run gives the same rows from a file read twice (an io.ReadSeeker, from its
// offset) as from a reader it must first read whole, and checks every line before running
// any (a bad last line fails with nothing emitted).
func TestRunReaders(t *testing.T) {
	sp, wasm := logincount(t)
	const scen = `{"at": 1000, "rows": [{"user_id": "a"}, {"user_id": "b"}]}
{"expect": [{"user_id": "a", "total_logins": 1}, {"user_id": "b", "total_logins": 1}]}
{"at": 60000, "rows": []}
{"expect": [{"user_id": "a", "total_logins": 1, "session_closed": true}, {"user_id": "b", "total_logins": 1, "session_closed": true}]}
`
	rt := sharedRuntime(t)
	for name, r := range map[string]func() io.Reader{
		"seeker": func() io.Reader {
			rs := strings.NewReader("# skipped\n" + scen)
			_, _ = rs.Seek(10, io.SeekStart)
			return rs
		},
		"not seeker": func() io.Reader { return io.MultiReader(strings.NewReader(scen)) },
	} {
		var out bytes.Buffer
		sum, err := RunSummary(context.Background(), Options{Spec: sp, Wasm: wasm, Out: &out, Runtime: rt}, r())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if sum != (Summary{Batches: 2, Expectations: 2}) || strings.Count(out.String(), "\n") != 4 {
			t.Fatalf("%s: summary %+v, rows:\n%s", name, sum, out.String())
		}
	}
	var out bytes.Buffer
	err := Run(context.Background(), Options{Spec: sp, Wasm: wasm, Out: &out, Runtime: rt}, strings.NewReader(scen+`{"at": 5}`+"\n"))
	if !errors.Is(err, ErrInvalidStep) || !strings.Contains(err.Error(), "line 5") || out.Len() != 0 {
		t.Fatalf("a bad last line: err %v, rows %q; want ErrInvalidStep at line 5 and nothing run", err, out.String())
	}
}

var (
	rtOnce sync.Once
	rtVal  *engine.Runtime
)

// sharedRuntime is one runtime for the package's tests, so the module compiles once.
func sharedRuntime(t testing.TB) *engine.Runtime {
	rtOnce.Do(func() {
		rt, err := engine.New(engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rtVal = rt
	})
	return rtVal
}
