package engine_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/scenario"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// The shared test helpers, by the short names this package's tests use.
var (
	require       = testutil.Require
	readFile      = testutil.ReadFile
	discardLogger = testutil.DiscardLogger
	cacheDir      = testutil.CompileCacheDir
)

var (
	rtOnce sync.Once
	rtVal  *engine.Runtime
)

// sharedRuntime is one runtime for the package's tests, so each module compiles once.
func sharedRuntime(t testing.TB) *engine.Runtime {
	rtOnce.Do(func() {
		rt, err := engine.New(engine.Options{CacheDir: testutil.CompileCacheDir(), Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		rtVal = rt
	})
	return rtVal
}

// specFromYAML parses a spec written in a test.
func specFromYAML(t testing.TB, y string) *spec.Spec {
	t.Helper()
	sp, err := spec.ParseSpec([]byte(strings.TrimSpace(y)))
	require(t, err)
	return sp
}

// collector is a Sink that keeps everything delivered.
type collector struct {
	mu      sync.Mutex
	entries []state.OutboxEntry
}

func (c *collector) Deliver(_ context.Context, _ string, entries []state.OutboxEntry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		e.Key = bytes.Clone(e.Key)
		e.Payload = bytes.Clone(e.Payload)
		c.entries = append(c.entries, e)
	}
	return nil
}

// take returns and forgets what was delivered, of one kind.
func (c *collector) take(kind state.OutboxKind) []state.OutboxEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out, rest []state.OutboxEntry
	for _, e := range c.entries {
		if e.Kind == kind {
			out = append(out, e)
		} else {
			rest = append(rest, e)
		}
	}
	c.entries = rest
	return out
}

func payloads(entries []state.OutboxEntry) []string {
	s := make([]string, len(entries))
	for i, e := range entries {
		s[i] = string(e.Payload)
	}
	return s
}

// openStore opens a state store in a fresh directory.
func openStore(t testing.TB, dir string) *state.Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := state.Open(dir, &state.Options{Logger: discardLogger()})
	require(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// newEngine starts an engine over a fresh store.
func newEngine(t testing.TB, sp *spec.Spec, wasm []byte, st *state.Store, sink engine.Sink) *engine.Engine {
	t.Helper()
	if st == nil {
		st = openStore(t, "")
	}
	eng, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: wasm, Store: st, Sink: sink})
	require(t, err)
	t.Cleanup(func() { eng.Close(context.Background()) })
	return eng
}

func rows(data ...string) []engine.Row {
	r := make([]engine.Row, len(data))
	for i, d := range data {
		r[i] = engine.Row{Data: []byte(d), Subject: "in.test", Sequence: uint64(i + 1)}
	}
	return r
}

// stepsOf parses a scenario's text (scenario file lines), failing t if it is not one.
func stepsOf(t testing.TB, text string) []scenario.Step {
	t.Helper()
	steps, err := scenario.Parse(strings.NewReader(text))
	require(t, err)
	return steps
}

// runSteps runs steps with o's spec, module and options on the shared runtime, in a fresh
// state directory unless o names one, and returns what the run emitted and logged (its dead
// letters) with its error.
func runSteps(t testing.TB, o scenario.Options, steps []scenario.Step) (out, log string, err error) {
	t.Helper()
	var ob, lb bytes.Buffer
	o.Runtime, o.Out, o.Log = sharedRuntime(t), &ob, &lb
	if o.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	err = scenario.RunSteps(context.Background(), o, steps)
	return ob.String(), lb.String(), err
}
