package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// budgetSpec: calls time out after 100ms, and a commit may retry keys for 600ms.
const budgetSpec = `
name: probe
module: unused.wasm
key: {field: k}
timeout: processing_time
output: {subject: probe.out}
limits: {call_timeout: 100ms, retry_timeout: 600ms, instances: 1}
`

// TestLoopingHandlerPinned: a handler that loops for every key is pinned key by key (the
// probe, like every SDK, says which key it runs): every key is dead-lettered (reason
// handler_error) with the time limit as its error, none for another's fault or "not retried",
// and the batch costs about two call timeouts a key (its call among the others, then alone),
// whatever limits.retry_timeout says.
func TestLoopingHandlerPinned(t *testing.T) {
	const n = 10
	sink := &collector{}
	eng := newEngine(t, specFromYAML(t, budgetSpec), probeWasm(t), nil, sink)
	var in []string
	for i := range n {
		in = append(in, fmt.Sprintf(`{"k":"k%02d","ops":[{"loop":true}]}`, i))
	}
	start := time.Now()
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(in...)})
	took := time.Since(start)
	require(t, err)
	if limit := 2*n*100*time.Millisecond + 3*time.Second; took > limit {
		t.Fatalf("the batch took %s; want at most %s", took, limit)
	}
	dead := sink.take(state.OutboxDeadLetter)
	if rep.FailedKeys != n || len(dead) != n {
		t.Fatalf("report %+v, %d dead letters; want all %d keys failed", rep, len(dead), n)
	}
	for _, d := range dead {
		if d.Reason != engine.ReasonHandlerError || !strings.Contains(d.Error, "module exceeded the per-call time limit") || strings.Contains(d.Error, "retry budget") {
			t.Errorf("dead letter of %s: reason %q, error %q", d.Key, d.Reason, d.Error)
		}
	}
	t.Logf("%d looping keys in %s", n, took)
}

// TestOneLoopingKeyAmongMany: a key whose call loops is pinned by retrying the keys of its
// call alone, and once its own call timed out the keys after it are called together again:
// every other key of the call gets its result. The retries have their budget to themselves:
// it starts when the first call failed, so the call timeout that call took does not shorten
// it (with call_timeout 1s and retry_timeout 1.8s, the retries need a little more than 1s;
// counted from the start of the batch, the budget would end before the looping key's own call
// timed out, and the keys after it would not be retried).
func TestOneLoopingKeyAmongMany(t *testing.T) {
	sp := specFromYAML(t, strings.Replace(budgetSpec, "call_timeout: 100ms, retry_timeout: 600ms", "call_timeout: 1s, retry_timeout: 1800ms", 1))
	sink := &collector{}
	eng := newEngine(t, sp, probeWasm(t), nil, sink)
	var in []string
	for i := range 40 {
		op := fmt.Sprintf(`{"emit":%d}`, i)
		if i == 7 {
			op = `{"loop":true}`
		}
		in = append(in, fmt.Sprintf(`{"k":"k%02d","ops":[%s]}`, i, op))
	}
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1000, Rows: rows(in...)})
	require(t, err)
	dead := sink.take(state.OutboxDeadLetter)
	if out := sink.take(state.OutboxOutput); len(out) != 39 || rep.FailedKeys != 1 || len(dead) != 1 ||
		string(dead[0].Key) != `"k07"` || !strings.Contains(dead[0].Error, "per-call time limit") {
		t.Fatalf("report %+v, %d outputs, dead letters %+v; want k07 alone failed", rep, len(out), dead)
	}
}

// cancelOn is a slog.Handler that cancels a context when it sees the message msg (the probe's
// log op), so a test cancels a batch while the guest call runs.
type cancelOn struct {
	msg    string
	cancel context.CancelFunc
}

func (c cancelOn) Enabled(context.Context, slog.Level) bool { return true }
func (c cancelOn) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c cancelOn) WithGroup(string) slog.Handler            { return c }
func (c cancelOn) Handle(_ context.Context, r slog.Record) error {
	if r.Message == c.msg {
		c.cancel()
	}
	return nil
}

// TestCancelInterruptsBatch: canceling RunBatch's context interrupts the guest call running
// (here one that would loop far beyond anything but its 30s call timeout) at once, and nothing
// of the batch commits, also when the call ended by itself after the cancellation; RunBatch
// returns an error wrapping ctx.Err(), and the same input runs again.
func TestCancelInterruptsBatch(t *testing.T) {
	for _, tc := range []struct{ name, ops string }{
		{"looping", `{"update":2},{"emit":"two"},{"log":"cancel now"},{"loop":true}`},
		{"finishing", `{"update":2},{"log":"cancel now"},{"emit":"two"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := specFromYAML(t, strings.Replace(budgetSpec, "call_timeout: 100ms, retry_timeout: 600ms", "call_timeout: 30s", 1))
			sink := &collector{}
			st := openStore(t, "")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			eng, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: probeWasm(t), Store: st, Sink: sink,
				Logger: slog.New(cancelOn{msg: "cancel now", cancel: cancel})})
			require(t, err)
			defer eng.Close(context.Background())
			_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1000, Position: 1, Rows: rows(`{"k":"a","ops":[{"update":1}]}`)})
			require(t, err)
			before, err := st.Deployment("probe").Progress()
			require(t, err)

			in := engine.BatchInput{ProcessingTimeMs: 2000, Position: 2, Rows: rows(`{"k":"a","ops":[` + tc.ops + `]}`)}
			start := time.Now()
			_, err = eng.RunBatch(ctx, in)
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("RunBatch returned %s after the cancellation", took)
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want one wrapping context.Canceled", err)
			}
			if after, _ := st.Deployment("probe").Progress(); after != before || eng.Progress() != before {
				t.Fatalf("progress moved: %+v -> %+v", before, after)
			}
			if out := sink.take(state.OutboxOutput); len(out) != 0 {
				t.Fatalf("a canceled batch delivered %v", payloads(out))
			}
			if got := stateOf(t, eng, sink, 3000, "a"); !strings.Contains(got, `"state":1`) {
				t.Fatalf("state after the canceled batch: %s", got)
			}
			if tc.name == "finishing" {
				_, err = eng.RunBatch(context.Background(), in)
				require(t, err, "the same input again")
				if out := payloads(sink.take(state.OutboxOutput)); len(out) != 1 || out[0] != `"two"` {
					t.Fatalf("the same input again emitted %v", out)
				}
			}
		})
	}
}
