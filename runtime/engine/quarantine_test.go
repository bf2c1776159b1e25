package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// TestQuarantine: a key whose calls fault (here loop past the call time limit) in
// QuarantineAfter batches in a row is quarantined with the batch that completes the run: its
// rows are then dead-lettered with reason quarantined, without a call (so a batch costs no
// call timeout for it), while the other keys proceed; the quarantine survives a restart, and
// a new revision releases it. A key that failed fewer times in a row, or that failed with an
// error its handler reported, is not quarantined.
func TestQuarantine(t *testing.T) {
	rt, err := engine.New(engine.Options{CacheDir: cacheDir(), Ceilings: engine.Ceilings{QuarantineAfter: 2}})
	require(t, err)
	defer rt.Close(context.Background())
	sp := specFromYAML(t, budgetSpec)
	st := openStore(t, "")
	sink := &collector{}
	open := func(revision string) *engine.Engine {
		eng, err := rt.NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: probeWasm(t), Store: st, Sink: sink, Revision: revision})
		require(t, err)
		return eng
	}
	eng := open("r1")
	at := int64(1000)
	batch := func(eng *engine.Engine, ops ...string) (map[string]state.OutboxEntry, time.Duration) {
		t.Helper()
		at += 1000
		start := time.Now()
		_, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: at, Position: uint64(at), Rows: rows(ops...)})
		require(t, err)
		dead := map[string]state.OutboxEntry{}
		for _, d := range sink.take(state.OutboxDeadLetter) {
			dead[string(d.Key)] = d
		}
		sink.take(state.OutboxOutput)
		return dead, time.Since(start)
	}
	loop := `{"k":"bad","ops":[{"loop":true}]}`
	fails := `{"k":"err","ops":[{"fail":"no"}]}`
	good := `{"k":"good","ops":[{"emit":1}]}`
	for i := range 2 {
		dead, _ := batch(eng, loop, fails, good)
		if d := dead[`"bad"`]; d.Reason != engine.ReasonHandlerError || !strings.Contains(d.Error, "time limit") {
			t.Fatalf("batch %d: bad's dead letter %+v", i, d)
		}
		if _, ok := dead[`"good"`]; ok || len(dead) != 2 {
			t.Fatalf("batch %d: dead letters %v", i, dead)
		}
	}
	if q := eng.Quarantined(); len(q) != 1 || string(q[0].Key) != `"bad"` || !strings.Contains(q[0].Reason, "time limit") {
		t.Fatalf("quarantined %+v; want bad", q)
	}
	dead, took := batch(eng, loop, fails, good)
	if d := dead[`"bad"`]; d.Reason != engine.ReasonQuarantined || !strings.Contains(d.Error, "quarantined") || !strings.Contains(d.Error, "time limit") {
		t.Fatalf("bad's dead letter once quarantined: %+v", d)
	}
	// Had the looping key been called, the batch would have cost at least two call limits
	// (100 ms each: its call among the others, then alone); a bound below that one call
	// limit failed now and then on a loaded machine.
	if took >= 200*time.Millisecond {
		t.Errorf("a batch with a quarantined key took %v, two call limits: was it called?", took)
	}
	require(t, eng.Close(context.Background()))

	eng = open("r1") // a restart: the quarantine stays
	if dead, _ := batch(eng, loop); dead[`"bad"`].Reason != engine.ReasonQuarantined {
		t.Fatalf("after a restart: %+v", dead)
	}
	require(t, eng.Close(context.Background()))

	eng = open("r2") // a new revision releases it
	defer eng.Close(context.Background())
	if q := eng.Quarantined(); len(q) != 0 {
		t.Fatalf("a new revision starts with %+v quarantined", q)
	}
	if dead, _ := batch(eng, loop); dead[`"bad"`].Reason != engine.ReasonHandlerError {
		t.Fatalf("after a new revision: %+v", dead)
	}
}
