package engine_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

const probeSpec = `
name: probe
module: unused.wasm
key:
  field: k
timeout: processing_time
output:
  subject: probe.out
limits:
  call_timeout: 300ms
  memory: 64MiB
`

func probeWasm(t testing.TB) []byte { return readFile(t, "testdata/probe/probe.wasm") }

// probeOf runs a probe op for key k and returns the state the probe saw.
func stateOf(t *testing.T, eng *engine.Engine, sink *collector, at int64, key string) string {
	t.Helper()
	_, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: at,
		Rows: rows(`{"k":"` + key + `","ops":[{"probe":"p"}]}`)})
	require(t, err)
	out := payloads(sink.take(state.OutboxOutput))
	if len(out) != 1 {
		t.Fatalf("probe emitted %v", out)
	}
	return out[0]
}

// TestDeadLetterPolicy: a failing call for one key (error, panic, exit, endless loop, memory
// beyond the limit) dead-letters that key's rows with the error and leaves its state as it
// was; other keys in the same batch and later batches proceed. Bad rows are dead-lettered
// with the reason.
func TestDeadLetterPolicy(t *testing.T) {
	sink := &collector{}
	eng := newEngine(t, specFromYAML(t, probeSpec), probeWasm(t), nil, sink)
	ctx := context.Background()

	var seed []string
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		seed = append(seed, `{"k":"`+k+`","ops":[{"update":"`+k+`1"}]}`)
	}
	_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(seed...)})
	require(t, err)

	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 2000, Rows: rows(
		`{"k":"a","ops":[{"update":"a2"},{"emit":"lost"},{"fail":"boom"}]}`,
		`{"k":"b","ops":[{"update":"b2"},{"emit":"kept"}]}`,
		`{"k":"c","ops":[{"update":"c2"},{"panic":"oops"}]}`,
		`{"k":"d","ops":[{"update":"d2"},{"exit":3}]}`,
		`{"k":"e","ops":[{"update":"e2"},{"loop":true}]}`,
		`{"k":"f","ops":[{"update":"f2"},{"alloc_mb":256}]}`,
		`{"k":"g","ops":[{"update":"g2"},{"emit":"ok"},{"emit_raw":"not json"}]}`,
		`not json`,
		`[1,2]`,
		`{"nokey":1}`,
		`{"k":{"nested":1}}`,
		"{\"k\":\"\xff\"}",
	)})
	require(t, err)
	if got := payloads(sink.take(state.OutboxOutput)); len(got) != 1 || got[0] != `"kept"` {
		t.Fatalf("outputs = %v, want only \"kept\"", got)
	}
	dead := sink.take(state.OutboxDeadLetter)
	reasons := map[string]string{}
	for _, d := range dead {
		k := string(d.Key)
		if k == "" {
			k = string(d.Payload)
		}
		reasons[k] = d.Reason + ": " + d.Error
		if d.Sequence == 0 || d.Subject != "in.test" {
			t.Errorf("dead letter %s lacks its subject and sequence: %+v", k, d)
		}
	}
	want := map[string]string{
		`"a"`:                "handler_error: boom",
		`"c"`:                "handler_error: panic: oops",
		`"d"`:                "handler_error: module exited with code 3",
		`"e"`:                "handler_error: " + "module exceeded the per-call time limit",
		`"f"`:                "handler_error: module trapped: wasm error: unreachable (stderr: runtime: out of memory",
		`"g"`:                "handler_error: emitted row 1 is not valid JSON",
		`not json`:           "invalid_json: row is not valid JSON",
		`[1,2]`:              "not_object: row is not a JSON object",
		`{"nokey":1}`:        `missing_key: key field "k" is missing or null`,
		`{"k":{"nested":1}}`: `bad_key: key field "k" is an object, not a string or number`,
		"{\"k\":\"\xff\"}":   "not_utf8: row is not valid UTF-8",
	}
	for k, w := range want {
		if got, ok := reasons[k]; !ok || !strings.HasPrefix(got, w) {
			t.Errorf("dead letter for %s = %q, want prefix %q", k, got, w)
		}
	}
	if len(dead) != len(want) || rep.DeadLetters != len(want) || rep.FailedKeys != 6 {
		t.Errorf("got %d dead letters (report %d, failed keys %d), want %d and 6 failed keys: %v", len(dead), rep.DeadLetters, rep.FailedKeys, len(want), reasons)
	}
	// The failed keys kept their old state; b moved on.
	for _, k := range []string{"a", "c", "d", "e", "f", "g"} {
		if got := stateOf(t, eng, sink, 3000, k); !strings.Contains(got, `"state":"`+k+`1"`) {
			t.Errorf("state of %s after its failed call: %s", k, got)
		}
	}
	if got := stateOf(t, eng, sink, 3000, "b"); !strings.Contains(got, `"state":"b2"`) {
		t.Errorf("state of b: %s", got)
	}
}

// TestFailPolicyIsAtomic: under on_error: fail a failing key fails the whole batch, and
// nothing of it commits: state, timers, watermark, position and outputs are as before.
func TestFailPolicyIsAtomic(t *testing.T) {
	sp := specFromYAML(t, strings.Replace(probeSpec, "timeout: processing_time", "timeout: processing_time\non_error: fail", 1))
	sink := &collector{}
	st := openStore(t, "")
	eng := newEngine(t, sp, probeWasm(t), st, sink)
	ctx := context.Background()
	_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Position: 10, Rows: rows(
		`{"k":"a","ops":[{"update":"a1"},{"dur":100}]}`)})
	require(t, err)
	sink.take(state.OutboxOutput)
	before, err := st.Deployment("probe").Progress()
	require(t, err)

	_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 5000, Position: 20, Rows: rows(
		`{"k":"b","ops":[{"update":"b1"},{"emit":"b-out"},{"dur":100}]}`,
		`{"k":"c","ops":[{"fail":"bad input for c"}]}`)})
	var kerr *engine.KeyError
	if !errors.Is(err, engine.ErrKeyFailed) || !errors.As(err, &kerr) || kerr.Key != `"c"` {
		t.Fatalf("err = %v, want ErrKeyFailed for key \"c\"", err)
	}
	after, err := st.Deployment("probe").Progress()
	require(t, err)
	if after != before {
		t.Fatalf("progress moved: %+v -> %+v", before, after)
	}
	if out := sink.take(state.OutboxOutput); len(out) != 0 {
		t.Fatalf("failed batch delivered %v", payloads(out))
	}
	if _, found, _ := st.Deployment("probe").Get([]byte(`"b"`)); found {
		t.Fatal("failed batch wrote state for b")
	}
	// a's timer (1100) is still armed: the next good batch fires it.
	_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 6000})
	require(t, err)
	out := payloads(sink.take(state.OutboxOutput))
	if len(out) != 1 || !strings.Contains(out[0], `"tag":"timeout"`) || !strings.Contains(out[0], `"state":"a1"`) {
		t.Fatalf("after the failed batch: %v", out)
	}
}

// TestStorageFaultIsAtomic: a Pebble write error during the commit fails the batch with
// nothing committed. Pebble cannot go on after a failed WAL write, so the store reports
// state.ErrFailed until it is reopened; after reopening (as after a crash) state, timers,
// watermark and position are exactly as before the batch, and the same input commits.
func TestStorageFaultIsAtomic(t *testing.T) {
	toggle := &errorfs.Toggle{Injector: errorfs.ErrInjected.If(errorfs.Writes)}
	fs := errorfs.Wrap(vfs.NewMem(), toggle)
	quiet := &state.Options{FS: fs, Logger: discardLogger()}
	st, err := state.Open("db", quiet)
	require(t, err)
	sink := &collector{}
	sp := specFromYAML(t, probeSpec)
	eng := newEngine(t, sp, probeWasm(t), st, sink)
	ctx := context.Background()
	_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Position: 1, Rows: rows(`{"k":"a","ops":[{"update":1},{"dur":5000}]}`)})
	require(t, err)
	before, err := st.Deployment("probe").Progress()
	require(t, err)

	in := engine.BatchInput{ProcessingTimeMs: 2000, Position: 2, Rows: rows(`{"k":"a","ops":[{"update":2},{"emit":"two"}]}`)}
	toggle.On()
	_, err = eng.RunBatch(ctx, in)
	toggle.Off()
	if err == nil {
		t.Fatal("batch committed through an injected write error")
	}
	if out := sink.take(state.OutboxOutput); len(out) != 0 {
		t.Fatalf("failed commit delivered %v", payloads(out))
	}
	if _, err := st.Deployment("probe").Progress(); !errors.Is(err, state.ErrFailed) {
		t.Fatalf("store after a failed WAL write: err = %v, want state.ErrFailed", err)
	}
	eng.Close(ctx)
	st.Close()

	st, err = state.Open("db", quiet)
	require(t, err)
	defer st.Close()
	if got, err := st.Deployment("probe").Progress(); err != nil || got != before {
		t.Fatalf("progress after reopening: %+v, %v; want %+v", got, err, before)
	}
	eng = newEngine(t, sp, probeWasm(t), st, sink)
	_, err = eng.RunBatch(ctx, in)
	require(t, err, "retry after the fault")
	if out := payloads(sink.take(state.OutboxOutput)); len(out) != 1 || out[0] != `"two"` {
		t.Fatalf("retry delivered %v", out)
	}
	if got := stateOf(t, eng, sink, 3000, "a"); !strings.Contains(got, `"state":2`) {
		t.Fatalf("state after retry: %s", got)
	}
}

// flakySink fails while broken is set.
type flakySink struct {
	collector
	broken bool
}

func (f *flakySink) Deliver(ctx context.Context, d string, entries []state.OutboxEntry) error {
	if f.broken {
		return errors.New("sink is down")
	}
	return f.collector.Deliver(ctx, d, entries)
}

// TestUndeliveredOutputsHoldBack: outputs whose delivery failed stay in the outbox; no new
// batch runs until they are delivered, and then everything goes out once, in order.
func TestUndeliveredOutputsHoldBack(t *testing.T) {
	sink := &flakySink{broken: true}
	st := openStore(t, "")
	eng := newEngine(t, specFromYAML(t, probeSpec), probeWasm(t), st, sink)
	ctx := context.Background()
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Position: 1, Rows: rows(`{"k":"a","ops":[{"emit":1}]}`)})
	require(t, err, "a failed delivery after the commit is not an error of the batch")
	if rep.Undelivered == "" {
		t.Fatalf("the report does not say the batch's outputs were not delivered: %+v", rep)
	}
	before, _ := st.Deployment("probe").Progress()

	in := engine.BatchInput{ProcessingTimeMs: 2000, Position: 2, Rows: rows(`{"k":"a","ops":[{"emit":2}]}`)}
	if _, err := eng.RunBatch(ctx, in); !errors.Is(err, engine.ErrDeliveryPending) {
		t.Fatalf("batch with undelivered outputs before it: err = %v, want ErrDeliveryPending", err)
	}
	if after, _ := st.Deployment("probe").Progress(); after != before {
		t.Fatalf("a batch ran while outputs were pending: %+v -> %+v", before, after)
	}
	sink.broken = false
	rep, err = eng.RunBatch(ctx, in)
	require(t, err)
	if rep.Undelivered != "" {
		t.Fatalf("undelivered after a delivery that worked: %q", rep.Undelivered)
	}
	if got := payloads(sink.take(state.OutboxOutput)); strings.Join(got, ",") != "1,2" {
		t.Fatalf("delivered %v, want [1 2]", got)
	}
	var left int
	require(t, st.Deployment("probe").Outbox(func(state.OutboxEntry) error { left++; return nil }))
	if left != 0 {
		t.Fatalf("%d entries left in the outbox", left)
	}
}

// TestSandbox: a module cannot open files, read the environment or reach the network.
func TestSandbox(t *testing.T) {
	t.Setenv("GROUPSTATE_SECRET", "s3cret")
	ln, err := net.Listen("tcp", "127.0.0.1:0") // something to reach, were the network open
	require(t, err)
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	sink := &collector{}
	eng := newEngine(t, specFromYAML(t, probeSpec), probeWasm(t), nil, sink)
	_, err = eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(
		`{"k":"a","ops":[{"open":"/etc/passwd"},{"open":"."},{"open":"/"},{"env":"GROUPSTATE_SECRET"},{"env":"HOME"},{"dial":"` + ln.Addr().String() + `"}]}`)})
	require(t, err)
	select {
	case <-accepted:
		t.Fatal("a module connected to a listener on the host")
	default:
	}
	out := payloads(sink.take(state.OutboxOutput))
	if len(out) != 6 {
		t.Fatalf("probe emitted %v", out)
	}
	for _, o := range out[:3] {
		if !strings.Contains(o, `"ok":false`) {
			t.Errorf("a module opened a file: %s", o)
		}
	}
	for _, o := range out[3:5] {
		if !strings.Contains(o, `"set":false`) || !strings.Contains(o, `"environ":0`) {
			t.Errorf("a module read the environment: %s", o)
		}
	}
	if !strings.Contains(out[5], `"ok":false`) {
		t.Errorf("a module reached the network: %s", out[5])
	}
}

// TestOutputLimit: a call that returns more than limits.max_output_bytes fails its key; the
// other keys proceed.
func TestOutputLimit(t *testing.T) {
	sp := specFromYAML(t, probeSpec+"  max_output_bytes: 1MiB\n")
	sink := &collector{}
	eng := newEngine(t, sp, probeWasm(t), nil, sink)
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(
		`{"k":"big","ops":[{"emit_mb":2}]}`, `{"k":"small","ops":[{"emit":"fine"}]}`)})
	require(t, err)
	dead := sink.take(state.OutboxDeadLetter)
	if rep.FailedKeys != 1 || len(dead) != 1 || !strings.Contains(dead[0].Error, "exceeds the limit of 1048576 bytes") {
		t.Fatalf("failed %d, dead letters %+v", rep.FailedKeys, dead)
	}
	if out := payloads(sink.take(state.OutboxOutput)); len(out) != 1 || out[0] != `"fine"` {
		t.Fatalf("outputs %v", out)
	}
}

// TestBadInputTable: every kind of row that cannot be processed is dead-lettered with its
// reason, the original subject and sequence, and is counted; the good rows around it proceed.
func TestBadInputTable(t *testing.T) {
	sp := specFromYAML(t, `
name: probe-bad
module: unused.wasm
key: {field: k}
event_time: {field: ts, watermark_delay: 1s}
timeout: event_time
output: {subject: probe.out}
limits: {max_row_bytes: 200}
`)
	sink := &collector{}
	eng := newEngine(t, sp, probeWasm(t), nil, sink)
	tests := []struct{ row, reason string }{
		{`{"k":"a","ts":`, engine.ReasonInvalidJSON},
		{`["k","a"]`, engine.ReasonNotObject},
		{"{\"k\":\"\xc3\x28\",\"ts\":1}", engine.ReasonNotUTF8},
		{`{"ts":1}`, engine.ReasonMissingKey},
		{`{"k":null,"ts":1}`, engine.ReasonMissingKey},
		{`{"k":[1],"ts":1}`, engine.ReasonBadKey},
		{`{"k":true,"ts":1}`, engine.ReasonBadKey},
		{`{"k":"a"}`, engine.ReasonMissingEventTime},
		{`{"k":"a","ts":"yesterday"}`, engine.ReasonBadEventTime},
		{`{"k":"a","ts":true}`, engine.ReasonBadEventTime},
		{`{"k":"a","ts":1,"pad":"` + strings.Repeat("x", 200) + `"}`, engine.ReasonTooLarge},
	}
	var in []string
	for _, tc := range tests {
		in = append(in, `{"k":"good","ts":5000,"ops":[{"emit":"ok"}]}`, tc.row)
	}
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(in...)})
	require(t, err)
	if rep.DeadLetters != len(tests) || len(payloads(sink.take(state.OutboxOutput))) != len(tests) {
		t.Fatalf("report %+v", rep)
	}
	dead := sink.take(state.OutboxDeadLetter)
	for i, tc := range tests {
		d := dead[i]
		if string(d.Payload) != tc.row || d.Reason != tc.reason || d.Error == "" ||
			d.Subject != "in.test" || d.Sequence != uint64(2*i+2) {
			t.Errorf("row %q: dead letter %+v, want reason %s", tc.row, d, tc.reason)
		}
	}
}

// TestInputBounds: RunBatch refuses a batch of more rows than trigger.max_rows, or of more
// bytes than trigger.max_bytes unless it is a single row, and runs nothing of it; the input
// within the bounds runs.
func TestInputBounds(t *testing.T) {
	sp := specFromYAML(t, probeSpec+"trigger:\n  max_rows: 3\n  max_bytes: 120\n")
	sink := &collector{}
	st := openStore(t, "")
	eng := newEngine(t, sp, probeWasm(t), st, sink)
	ctx := context.Background()
	row := `{"k":"a","ops":[{"emit":1}]}` // 29 bytes
	big := `{"k":"a","ops":[{"emit":"` + strings.Repeat("x", 200) + `"}]}`
	for _, in := range [][]string{{row, row, row, row}, {row, big}, {row, row, row + strings.Repeat(" ", 40)}} {
		_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1, Position: 9, Rows: rows(in...)})
		if !errors.Is(err, engine.ErrInputTooLarge) {
			t.Fatalf("batch of %d rows: err = %v, want ErrInputTooLarge", len(in), err)
		}
	}
	if p, _ := st.Deployment("probe").Progress(); p.BatchID != 0 || len(sink.take(state.OutboxOutput)) != 0 {
		t.Fatalf("a refused batch ran: progress %+v", p)
	}
	for _, in := range [][]string{{row, row, row}, {big}} {
		_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(in...)})
		require(t, err, len(in))
	}
	if out := sink.take(state.OutboxOutput); len(out) != 4 {
		t.Fatalf("outputs %v", payloads(out))
	}
}
