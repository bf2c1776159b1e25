package engine_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/scenario"
	"github.com/groupstate/groupstate/state"
)

// TestParseInitialState: keys are canonical (42 and 42.0 are one key), states compact, and
// every malformed file is refused naming its line.
func TestParseInitialState(t *testing.T) {
	s, err := engine.ParseInitialState(strings.NewReader(`{"key": "ada", "state": {"n": 1}}

{"state": [1, 2], "key": 42.0}
{"key": "b\u0061", "state": "x"}
`))
	require(t, err)
	if s.Len() != 3 {
		t.Fatalf("%d keys, want 3", s.Len())
	}
	for _, tc := range []struct{ key, want string }{{`"ada"`, `{"n":1}`}, {`42`, `[1,2]`}, {`"ba"`, `"x"`}} {
		if v, ok := s.Get([]byte(tc.key)); !ok || string(v) != tc.want {
			t.Errorf("key %s: %q %v, want %q", tc.key, v, ok, tc.want)
		}
	}

	for _, tc := range []struct{ in, want string }{
		{`{"key": "a", "state": 1}` + "\n" + `{"key": "a", "state": 2}`, `line 2: key "a" again (first on line 1)`},
		{`{"key": 42, "state": 1}` + "\n" + `{"key": 4.2e1, "state": 2}`, `line 2: key 42 again (first on line 1)`},
		{`{"key": "a"}`, `line 1: no "state"`},
		{`{"key": "a", "state": null}`, `line 1: no "state", or it is null`},
		{`{"state": 1}`, `line 1: no "key"`},
		{`{"key": true, "state": 1}`, `line 1: "key" is a boolean`},
		{`{"key": "a", "state": 1, "extra": 2}`, `line 1: unknown field "extra"`},
		{`[1]`, `line 1: not a JSON object`},
		{"\n" + `{"key": "a", "state": }`, `line 2: not a JSON object`},
	} {
		_, err := engine.ParseInitialState(strings.NewReader(tc.in))
		if !errors.Is(err, engine.ErrInitialState) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseInitialState(%s):\n  err  %v\n  want ErrInitialState containing %q", tc.in, err, tc.want)
		}
	}
}

// TestInitialStatePartition: each key of the file is in exactly the partition its rows go to.
func TestInitialStatePartition(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		b.WriteString(`{"key": "k` + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + `", "state": 1}` + "\n")
	}
	s, err := engine.ParseInitialState(strings.NewReader(b.String()))
	require(t, err)
	total := 0
	for p := range 4 {
		ps := s.Partition(p, 4)
		total += ps.Len()
		for i := range 100 {
			key := []byte(`"k` + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + `"`)
			_, in := ps.Get(key)
			if want := partition.Of(key, 4) == p; in != want {
				t.Fatalf("key %s in partition %d: %v, want %v", key, p, in, want)
			}
		}
	}
	if total != 100 {
		t.Fatalf("%d keys over the partitions, want 100", total)
	}
}

// TestInitialStateFlatMapGroupsWithState: in the first batch a key with rows starts from its
// initial state, a key only in the file is called with no rows and keeps its state; a key
// whose call fails keeps its initial state; a restart does not apply the file again.
func TestInitialStateFlatMapGroupsWithState(t *testing.T) {
	initial, err := engine.ParseInitialState(strings.NewReader(`{"key": "a", "state": {"n": 10}}
{"key": "b", "state": {"n": 5}}
{"key": "bad", "state": {"n": "q"}}
`))
	require(t, err)
	steps, err := scenario.Parse(strings.NewReader(`{"at": 1000, "rows": [{"key": "a"}, {"key": "c"}, {"key": "a"}]}
{"expect": [{"key": "a", "n": 11}, {"key": "a", "n": 12}, {"key": "c", "n": 1}]}
{"restart": true}
{"at": 2000, "rows": [{"key": "b"}, {"key": "a"}, {"key": "bad"}]}
{"expect": [{"key": "b", "n": 6}, {"key": "a", "n": 13}]}
`))
	require(t, err)
	var log bytes.Buffer
	err = scenario.RunSteps(context.Background(), scenario.Options{
		Spec:         specFromYAML(t, readSpec(t, "../../samples/counter/counter.yaml")),
		Wasm:         readFile(t, "../../samples/counter/go/counter.wasm"),
		Runtime:      sharedRuntime(t),
		Log:          &log,
		InitialState: initial,
	}, steps)
	require(t, err)
	// The key whose initial state the module refuses: one dead letter naming it in the first
	// batch (no rows), and its row in the second (its state stayed the initial one).
	if got := strings.Count(log.String(), `counter: state`); got != 2 {
		t.Fatalf("dead letters of the bad key's calls: %d, want 2; log:\n%s", got, log.String())
	}
}

// readSpec returns the spec file at path.
func readSpec(t *testing.T, path string) string {
	t.Helper()
	return string(readFile(t, path))
}

// TestInitialStateNotOverState: an engine given an initial state over a keyspace that holds
// state it did not start from (a name deployed before) keeps that state and applies nothing;
// over a keyspace that holds none (every key removed), it applies the file.
func TestInitialStateNotOverState(t *testing.T) {
	sp := specFromYAML(t, readSpec(t, "../../samples/counter/counter.yaml"))
	wasm := readFile(t, "../../samples/counter/go/counter.wasm")
	initial, err := engine.ParseInitialState(strings.NewReader(`{"key": "a", "state": {"n": 100}}`))
	require(t, err)
	st := openStore(t, "")
	c := &collector{}
	eng := newEngine(t, sp, wasm, st, c)
	_, err = eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(`{"key": "a"}`)})
	require(t, err)
	require(t, eng.Close(context.Background()))

	eng, err = sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: wasm, Store: st, Sink: c, InitialState: initial})
	require(t, err)
	defer eng.Close(context.Background())
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 2, Rows: rows(`{"key": "a"}`)})
	require(t, err)
	if got := strings.Join(payloads(c.take(state.OutboxOutput)), " "); got != `{"key":"a","n":1} {"key":"a","n":2}` || rep.InitialCalls != 0 {
		t.Fatalf("outputs %s, %d initial calls; want a counted on from its state, no initial call", got, rep.InitialCalls)
	}
}
