package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// v2Cases lists testdata/v2's scenarios (each names its spec on its first line).
func v2Cases(t *testing.T) []scenarioCase {
	files, err := filepath.Glob("testdata/v2/*.jsonl")
	require(t, err)
	var cases []scenarioCase
	for _, f := range files {
		first, _, _ := strings.Cut(string(readFile(t, f)), "\n")
		sp, ok := strings.CutPrefix(first, "# spec: ")
		if !ok {
			t.Fatalf("%s: first line must be \"# spec: FILE\"", f)
		}
		cases = append(cases, scenarioCase{filepath.Base(f), filepath.Join("testdata/v2", sp), f})
	}
	return cases
}

// TestV2Scenarios runs the ABI v2 scenarios of testdata/v2 with the v2probe module, as they
// are and with a restart before every batch (state, timers and TTL survive restarts).
func TestV2Scenarios(t *testing.T) {
	for _, c := range v2Cases(t) {
		t.Run(c.name, func(t *testing.T) {
			steps := parseSteps(t, c.file)
			runScenario(t, c, steps)
			runScenario(t, c, withRestarts(steps))
		})
	}
}

// v2Spec is the v2probe spec of testdata/v2/NAME.yaml with extra YAML lines appended.
func v2Spec(t *testing.T, name, extra string) *spec.Spec {
	t.Helper()
	y := string(readFile(t, "testdata/v2/"+name+".yaml"))
	return specFromYAML(t, y+"\n"+extra)
}

func v2probeWasm(t testing.TB) []byte { return readFile(t, "testdata/v2probe/v2probe.wasm") }

// v2Engine starts an engine of v2probe with sp over st.
func v2Engine(t *testing.T, sp *spec.Spec, st *state.Store, sink engine.Sink, tune func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.Config{Spec: sp, Wasm: v2probeWasm(t), Store: st, Sink: sink}
	if tune != nil {
		tune(&cfg)
	}
	eng, err := sharedRuntime(t).NewEngine(context.Background(), cfg)
	require(t, err)
	t.Cleanup(func() { eng.Close(context.Background()) })
	return eng
}

func runRows(t *testing.T, eng *engine.Engine, at int64, data ...string) *engine.BatchReport {
	t.Helper()
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: at, Rows: rows(data...)})
	require(t, err)
	return rep
}

// TestV2TimerOrder: a key's timers fire in ascending order, after every data call of the
// batch, each in its own handler call; the report counts the data calls and the timers.
func TestV2TimerOrder(t *testing.T) {
	sink := &collector{}
	eng := v2Engine(t, v2Spec(t, "pt", ""), openStore(t, ""), sink, nil)
	runRows(t, eng, 1000,
		`{"k": "a", "ops": [{"reg": 1500}, {"reg": 1200}, {"reg": 1400}]}`,
		`{"k": "b", "ops": [{"reg": 1300}]}`)
	rep := runRows(t, eng, 2000, `{"k": "b", "ops": [{"emit": "data b"}]}`, `{"k": "a", "ops": [{"emit": "data a"}]}`)
	got := payloads(sink.take(state.OutboxOutput))
	want := []string{`"data b"`, `"data a"`,
		`{"key":"a","tag":"timer","ts":1200}`, `{"key":"b","tag":"timer","ts":1300}`,
		`{"key":"a","tag":"timer","ts":1400}`, `{"key":"a","tag":"timer","ts":1500}`}
	// Keys are ordered by their first timer, each key's timers ascending.
	want = []string{want[0], want[1], want[2], want[4], want[5], want[3]}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("outputs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.DataCalls != 2 || rep.TimeoutCalls != 4 || rep.FailedKeys != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// TestV2TTLCounted: expired entries are removed at the end of the batch and counted.
func TestV2TTLCounted(t *testing.T) {
	st := openStore(t, "")
	eng := v2Engine(t, v2Spec(t, "pt", ""), st, &collector{}, nil)
	runRows(t, eng, 1000, `{"k": "a", "ops": [{"tset": 1}, {"set": 1}]}`, `{"k": "b", "ops": [{"tset": 2}]}`)
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1500})
	require(t, err)
	if !rep.Skipped {
		t.Fatalf("a no-data batch with nothing expired committed: %+v", rep)
	}
	rep, err = eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 2000})
	require(t, err)
	if rep.Skipped || rep.TTLExpired != 2 {
		t.Fatalf("TTLExpired %d (skipped %v), want 2", rep.TTLExpired, rep.Skipped)
	}
	ks := st.Deployment("v2probe-pt")
	p, err := ks.Progress()
	require(t, err)
	if p.Keys != 1 {
		t.Fatalf("%d keys hold state, want 1 (b's only variable expired)", p.Keys)
	}
}

// TestV2KindChange: a module that declares a variable with another kind than the keyspace
// holds is refused at NewEngine with state.ErrVarKind; one that drops a variable deletes it.
func TestV2KindChange(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	eng := v2Engine(t, v2Spec(t, "pt", ""), st, &collector{}, nil)
	runRows(t, eng, 1000, `{"k": "a", "ops": [{"append": 1}, {"put": ["x", 1]}, {"set": 3}]}`)
	require(t, eng.Close(context.Background()))

	_, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{
		Spec: v2Spec(t, "pt", "config:\n  alt: true"), Wasm: v2probeWasm(t), Store: st, Sink: &collector{}})
	if !errors.Is(err, state.ErrVarKind) || !strings.Contains(err.Error(), "state variable l was declared list and is now map") {
		t.Fatalf("NewEngine with l as a map: %v, want ErrVarKind naming l", err)
	}

	// Drop m: its entries go with the first batch.
	eng = v2Engine(t, v2Spec(t, "pt", "config:\n  drop_m: true"), st, &collector{}, nil)
	runRows(t, eng, 2000, `{"k": "b", "ops": [{"set": 1}]}`)
	require(t, eng.Close(context.Background()))
	kv, err := st.Deployment("v2probe-pt").KeyVars([]byte(`"a"`), 2000)
	require(t, err)
	for _, v := range kv.Vars {
		if v.Decl.Name == "m" {
			t.Fatalf("dropped variable m still there: %+v", v)
		}
	}
	// Declared again, m starts empty; the others kept their content.
	sink := &collector{}
	eng = v2Engine(t, v2Spec(t, "pt", ""), st, sink, nil)
	runRows(t, eng, 3000, `{"k": "a", "ops": [{"map": "m"}, {"list": "l"}, {"get": "v"}]}`)
	got := strings.Join(payloads(sink.take(state.OutboxOutput)), "\n")
	want := `{"key":"a","m":{},"tag":"m"}` + "\n" + `{"key":"a","l":[1],"tag":"l"}` + "\n" + `{"key":"a","tag":"v","v":3}`
	if got != want {
		t.Fatalf("outputs:\n%s\nwant:\n%s", got, want)
	}
}

// TestV2TimeModeChange: a v2 module started on a keyspace that ran under another timeout mode
// is refused (its timers were registered under the first); the same mode starts.
func TestV2TimeModeChange(t *testing.T) {
	st := openStore(t, "")
	eng := v2Engine(t, v2Spec(t, "pt", ""), st, &collector{}, nil)
	runRows(t, eng, 1000, `{"k": "a", "ops": [{"set": 3}]}`)
	require(t, eng.Close(context.Background()))

	_, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{
		Spec: v2Spec(t, "none", ""), Keyspace: "v2probe-pt", Wasm: v2probeWasm(t), Store: st, Sink: &collector{}})
	if !errors.Is(err, engine.ErrTimeModeChanged) || !strings.Contains(err.Error(), "it was processing_time and is now none") {
		t.Fatalf("NewEngine under timeout: none: %v, want ErrTimeModeChanged", err)
	}
	v2Engine(t, v2Spec(t, "pt", ""), st, &collector{}, nil)
}

// TestABISwitch: a transformWithState module is refused on a keyspace that holds a
// flatMapGroupsWithState handler's keys, and the other way round (their keys and timers
// differ); each starts on its own keyspace, and on an empty one.
func TestABISwitch(t *testing.T) {
	st := openStore(t, "")
	v1 := func(keyspace string) (*engine.Engine, error) {
		sp, mod, err := spec.LoadSpec("testdata/semantics/pt.yaml")
		require(t, err)
		return sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: sp, Keyspace: keyspace, Wasm: readFile(t, mod), Store: st, Sink: &collector{}})
	}
	v2 := func(keyspace string) (*engine.Engine, error) {
		return sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: v2Spec(t, "pt", ""), Keyspace: keyspace, Wasm: v2probeWasm(t), Store: st, Sink: &collector{}})
	}
	// A v1 keyspace with a key; a v2 one with a key.
	eng, err := v1("one")
	require(t, err)
	_, err = eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(`{"k": "a", "ops": [{"update": 1}]}`)})
	require(t, err)
	require(t, eng.Close(context.Background()))
	eng, err = v2("two")
	require(t, err)
	runRows(t, eng, 1000, `{"k": "a", "ops": [{"set": 3}]}`)
	require(t, eng.Close(context.Background()))

	if _, err := v2("one"); !errors.Is(err, engine.ErrABISwitch) || !strings.Contains(err.Error(), "flatMapGroupsWithState (ABI v1) handler (1 keys)") {
		t.Fatalf("a v2 module on v1 state: %v, want ErrABISwitch", err)
	}
	if _, err := v1("two"); !errors.Is(err, engine.ErrABISwitch) || !strings.Contains(err.Error(), "transformWithState (ABI v2) handler") {
		t.Fatalf("a v1 module on v2 state: %v, want ErrABISwitch", err)
	}
	for _, start := range []func(string) (*engine.Engine, error){v1, v2} {
		eng, err := start("empty")
		require(t, err)
		require(t, eng.Close(context.Background()))
	}
}

// TestV2TimerOpsRefusedWithoutTimeouts: under timeout: none a timer op fails the group.
func TestV2TimerOpsRefusedWithoutTimeouts(t *testing.T) {
	sink := &collector{}
	eng := v2Engine(t, v2Spec(t, "none", ""), openStore(t, ""), sink, nil)
	rep := runRows(t, eng, 1000, `{"k": "a", "ops": [{"set": 1}, {"reg": 5000}, {"timers": "t"}]}`, `{"k": "b", "ops": [{"set": 2}, {"get": "g"}]}`)
	if rep.FailedKeys != 1 {
		t.Fatalf("report %+v, want a failed key", rep)
	}
	dl := sink.take(state.OutboxDeadLetter)
	// (The Go SDK refuses timers itself under timeout: none; the host's own refusal is
	// TestV2SessionRefuses'.)
	if len(dl) != 1 || string(dl[0].Key) != `"a"` || !strings.Contains(dl[0].Error, "timers need timeout") {
		t.Fatalf("dead letters %+v", dl)
	}
	if got := payloads(sink.take(state.OutboxOutput)); len(got) != 1 || got[0] != `{"key":"b","tag":"g","v":2}` {
		t.Fatalf("outputs %v", got)
	}
}

// TestV2FailurePolicy: under dead_letter a failed data call dead-letters its rows, a failed
// timer call one record naming the key and the timer (consumed); under on_error: fail the
// batch fails and commits nothing.
func TestV2FailurePolicy(t *testing.T) {
	sink := &collector{}
	st := openStore(t, "")
	eng := v2Engine(t, v2Spec(t, "pt", ""), st, sink, nil)
	rep := runRows(t, eng, 1000,
		`{"k": "a", "ops": [{"on_timer": [{"fail": "tboom"}]}, {"reg": 1500}]}`,
		`{"k": "b", "ops": [{"set": 1}, {"fail": "bboom"}]}`,
		`{"k": "b", "ops": []}`)
	if rep.FailedKeys != 1 || rep.DeadLetters != 2 {
		t.Fatalf("report %+v", rep)
	}
	dl := sink.take(state.OutboxDeadLetter)
	if len(dl) != 2 || string(dl[0].Key) != `"b"` || dl[0].Error != "bboom" {
		t.Fatalf("dead letters %+v", dl)
	}
	rep = runRows(t, eng, 2000, `{"k": "b", "ops": [{"get": "g"}]}`)
	dl = sink.take(state.OutboxDeadLetter)
	if rep.FailedKeys != 1 || len(dl) != 1 || !dl[0].TimeoutCall || string(dl[0].Key) != `"a"` || dl[0].Error != "timer 1500: tboom" {
		t.Fatalf("report %+v, dead letters %+v", rep, dl)
	}
	if got := payloads(sink.take(state.OutboxOutput)); len(got) != 1 || got[0] != `{"key":"b","tag":"g"}` {
		t.Fatalf("outputs %v (b's failed write must be reverted)", got)
	}
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 3000})
	require(t, err)
	if !rep.Skipped {
		t.Fatalf("the failed timer fired again: %+v", rep)
	}

	failing := v2Engine(t, v2Spec(t, "pt", "on_error: fail"), openStore(t, ""), &collector{}, nil)
	_, err = failing.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(`{"k": "a", "ops": [{"set": 1}]}`, `{"k": "z", "ops": [{"fail": "no"}]}`)})
	if !errors.Is(err, engine.ErrKeyFailed) || !strings.Contains(err.Error(), `key "z": no`) {
		t.Fatalf("on_error: fail: %v", err)
	}
	if failing.Progress().BatchID != 0 {
		t.Fatal("a failed batch committed")
	}
}

// TestV2InitialState: each key of the file gets one initial-state call before the data
// calls; the SDK sets its variables by name; a restart does not apply it again.
func TestV2InitialState(t *testing.T) {
	initial, err := engine.ParseInitialState(strings.NewReader(`{"key": "a", "state": {"v": 10, "l": ["x", "y"], "m": {"p": 1}}}
{"key": "b", "state": {"v": 5}}
{"key": "bad", "state": {"nope": 1}}
`))
	require(t, err)
	st := openStore(t, "")
	sink := &collector{}
	eng := v2Engine(t, v2Spec(t, "pt", ""), st, sink, func(c *engine.Config) { c.InitialState = initial })
	rep := runRows(t, eng, 1000, `{"k": "a", "ops": [{"get": "g"}, {"list": "l"}, {"map": "m"}]}`, `{"k": "c", "ops": [{"get": "g"}]}`)
	if rep.InitialCalls != 3 || rep.FailedKeys != 1 || rep.DataCalls != 2 {
		t.Fatalf("report %+v", rep)
	}
	got := strings.Join(payloads(sink.take(state.OutboxOutput)), "\n")
	want := `{"key":"a","tag":"g","v":10}` + "\n" + `{"key":"a","l":["x","y"],"tag":"l"}` + "\n" + `{"key":"a","m":{"p":1},"tag":"m"}` + "\n" + `{"key":"c","tag":"g"}`
	if got != want {
		t.Fatalf("outputs:\n%s\nwant:\n%s", got, want)
	}
	if dl := sink.take(state.OutboxDeadLetter); len(dl) != 1 || string(dl[0].Key) != `"bad"` || dl[0].TimeoutCall {
		t.Fatalf("dead letters %+v", dl)
	}
	require(t, eng.Close(context.Background()))
	eng = v2Engine(t, v2Spec(t, "pt", ""), st, sink, func(c *engine.Config) { c.InitialState = initial })
	rep = runRows(t, eng, 2000, `{"k": "b", "ops": [{"get": "g"}]}`)
	if rep.InitialCalls != 0 {
		t.Fatalf("initial state applied again: %+v", rep)
	}
	if got := payloads(sink.take(state.OutboxOutput)); len(got) != 1 || got[0] != `{"key":"b","tag":"g","v":5}` {
		t.Fatalf("outputs %v", got)
	}
}

// TestV2TimersBoundedPerBatch: a batch fires the timers of at most chunkKeys keys and asks
// for another batch at once (NeedsNoDataBatch) while more are expired; every timer fires
// once, in order per key.
func TestV2TimersBoundedPerBatch(t *testing.T) {
	sink := &collector{}
	eng := v2Engine(t, v2Spec(t, "pt", ""), openStore(t, ""), sink, func(c *engine.Config) { engine.SetChunkLimits(c, 2, 1<<20) })
	var in []string
	for i := range 5 {
		in = append(in, fmt.Sprintf(`{"k": "k%d", "ops": [{"reg": %d}, {"reg": %d}]}`, i, 1100+i, 1900-i))
	}
	runRows(t, eng, 1000, in...)
	batches, fired := 0, 0
	for {
		rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 2000})
		require(t, err)
		batches++
		fired += rep.TimeoutCalls
		if !rep.NeedsNoDataBatch {
			break
		}
		if batches > 10 {
			t.Fatal("no end")
		}
	}
	if fired != 10 || batches < 3 {
		t.Fatalf("%d timers fired in %d batches, want 10 in at least 3", fired, batches)
	}
	last := map[string]int64{}
	for _, p := range payloads(sink.take(state.OutboxOutput)) {
		var v struct {
			Key string
			TS  int64
		}
		require(t, json.Unmarshal([]byte(p), &v))
		if v.TS <= last[v.Key] {
			t.Fatalf("key %s: timer %d after %d", v.Key, v.TS, last[v.Key])
		}
		last[v.Key] = v.TS
	}
}

// TestV2LargeCollections: lists and maps larger than a page (and than the SDK's first
// response buffer) are read back whole, in order, through the host's paging.
func TestV2LargeCollections(t *testing.T) {
	sink := &collector{}
	eng := v2Engine(t, v2Spec(t, "pt", ""), openStore(t, ""), sink, nil)
	var ops []string
	pad := strings.Repeat("p", 100)
	for i := range 3000 {
		ops = append(ops, fmt.Sprintf(`{"append": "%04d%s"}`, i, pad))
		if i%5 == 0 {
			ops = append(ops, fmt.Sprintf(`{"put": ["%04d", "%s"]}`, i, pad))
		}
	}
	// Half the writes go with a read (in a state request), half with the result.
	half := len(ops) / 2
	runRows(t, eng, 1000, `{"k": "a", "ops": [`+strings.Join(ops[:half], ",")+`, {"get": "g"}, `+strings.Join(ops[half:], ",")+`]}`)
	sink.take(state.OutboxOutput)
	runRows(t, eng, 2000, `{"k": "a", "ops": [{"list": "l"}, {"map": "m"}]}`)
	out := payloads(sink.take(state.OutboxOutput))
	if len(out) != 2 {
		t.Fatalf("%d outputs", len(out))
	}
	var l struct{ L []string }
	var m struct{ M map[string]string }
	require(t, json.Unmarshal([]byte(out[0]), &l))
	require(t, json.Unmarshal([]byte(out[1]), &m))
	if len(l.L) != 3000 || len(m.M) != 600 {
		t.Fatalf("%d list elements, %d map entries; want 3000 and 600", len(l.L), len(m.M))
	}
	for i, e := range l.L {
		if e != fmt.Sprintf("%04d%s", i, pad) {
			t.Fatalf("element %d: %.10s", i, e)
		}
	}
}

// TestV2SharedModuleConcurrent: engines of one shared module (a deployment's partitions) run
// their v2 batches at the same time, each with its own state session; every call of each
// sees only its own keyspace's state.
func TestV2SharedModuleConcurrent(t *testing.T) {
	st := openStore(t, "")
	sp := v2Spec(t, "pt", "")
	sp.Limits.Instances = 2
	var engines []*engine.Engine
	var sinks []*collector
	for p := range 3 {
		sink := &collector{}
		eng := v2Engine(t, sp, st, sink, func(c *engine.Config) {
			c.ShareModule = "v2probe-pt/1"
			c.Keyspace = state.PartitionName(sp.Name, p)
		})
		engines, sinks = append(engines, eng), append(sinks, sink)
	}
	if !engine.SameModule(engines[0], engines[2]) {
		t.Fatal("the engines do not share their module")
	}
	errs := make(chan error, len(engines))
	for p, eng := range engines {
		go func() {
			for b := range 5 {
				var in []string
				for k := range 20 {
					in = append(in, fmt.Sprintf(`{"k": "k%d", "ops": [{"append": %d}, {"get": "g"}, {"set": %d}, {"reg": %d}]}`, k, p, b, 1000*b+1500))
				}
				if _, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: int64(1000*b + 1000), Rows: rows(in...)}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range engines {
		require(t, <-errs)
	}
	for p, sink := range sinks {
		var timers int
		for _, out := range payloads(sink.take(state.OutboxOutput)) {
			if strings.Contains(out, `"tag":"timer"`) {
				timers++
			}
		}
		if timers != 20*4 {
			t.Fatalf("partition %d: %d timer calls, want 80", p, timers)
		}
		kv, err := st.Deployment(state.PartitionName(sp.Name, p)).KeyVars([]byte(`"k3"`), 0)
		require(t, err)
		for _, v := range kv.Vars {
			if v.Decl.Name == "l" && len(v.Elements) != 5 {
				t.Fatalf("partition %d: list %q", p, v.Elements)
			}
		}
	}
}

// TestV2ForkedChunks: a phase big enough to spread runs its chunks on two instances at once,
// each in a fork of the state batch, and commits exactly what one instance running them one
// after the other commits: the same outputs in the same order, the same dead letters, the
// same state (read back by the next batches), whether a key fails, traps or succeeds in
// either chunk, and a TIMERS phase after a DATA phase reads the DATA phase's writes.
func TestV2ForkedChunks(t *testing.T) {
	const n = 600
	fails := map[int]string{10: `{"fail": "boom"}`, 20: `{"exit": 3}`, 450: `{"fail": "boom"}`, 460: `{"exit": 3}`}
	run := func(instances int) (outs, dead []string, keys int64) {
		sink := &collector{}
		eng := v2Engine(t, v2Spec(t, "pt", fmt.Sprintf("  instances: %d\n  retry_timeout: 60s", instances)), openStore(t, ""), sink, nil)
		var in []string
		for i := range n {
			ops := fmt.Sprintf(`{"set": %d}, {"append": %d}, {"reg": %d}, {"on_timer": [{"list": "lt"}, {"get": "gt"}]}`, i, i, 5000+i%7)
			if f, ok := fails[i]; ok {
				ops += ", " + f
			}
			in = append(in, fmt.Sprintf(`{"k": "k%d", "ops": [%s]}`, i, ops))
		}
		runRows(t, eng, 1000, in...)
		in = in[:0]
		for i := range n {
			in = append(in, fmt.Sprintf(`{"k": "k%d", "ops": [{"get": "g"}, {"append": "x%d"}]}`, i, i))
		}
		runRows(t, eng, 2000, in...)
		runRows(t, eng, 10_000, in...) // DATA, then the timers of the same keys
		for _, e := range sink.take(state.OutboxOutput) {
			outs = append(outs, string(e.Key)+" "+string(e.Payload))
		}
		for _, e := range sink.take(state.OutboxDeadLetter) {
			dead = append(dead, string(e.Key)+" "+e.Error)
		}
		return outs, dead, eng.Progress().Keys
	}
	outs1, dead1, keys1 := run(1)
	outs2, dead2, keys2 := run(2)
	if len(dead1) != 4 || keys1 != n || len(outs1) != 2*n+3*(n-4) {
		t.Fatalf("one instance: %d dead letters %v, %d keys, %d outputs", len(dead1), dead1, keys1, len(outs1))
	}
	if strings.Join(dead1, "\n") != strings.Join(dead2, "\n") || keys1 != keys2 {
		t.Fatalf("dead letters\n%v\n%v\nkeys %d, %d", dead1, dead2, keys1, keys2)
	}
	if len(outs1) != len(outs2) {
		t.Fatalf("%d outputs on one instance, %d on two", len(outs1), len(outs2))
	}
	for i := range outs1 {
		if outs1[i] != outs2[i] {
			t.Fatalf("output %d: %s on one instance, %s on two", i, outs1[i], outs2[i])
		}
	}
	want := `"k460" {"key":"k460","tag":"g"}` // the trapped key's writes were reverted
	if !slices.Contains(outs2, want) || !slices.Contains(outs2, `"k461" {"key":"k461","tag":"g","v":461}`) {
		t.Fatalf("outputs lack %s or k461's value", want)
	}
	if !slices.Contains(outs2, `"k461" {"key":"k461","l":[461,"x461","x461"],"tag":"lt"}`) {
		t.Fatalf("the timer call of k461 did not read the DATA phase's append: %v", outs2[len(outs2)-5:])
	}
}
