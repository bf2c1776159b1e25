package engine_test

import (
	"context"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/nativehook"
	"github.com/groupstate/groupstate/state"
)

// keepModule is an in-process handler that keeps every key's state and sets its timeout a
// minute after the batch's processing time. It allocates nothing per group itself, so the
// allocations of a batch that runs it are the engine's (and Pebble's).
type keepModule struct {
	w  abi.ResultWriter
	ir abi.InputReader
}

func (m *keepModule) Init([]byte) []byte { return abi.AppendInitResult(nil, abi.StatusOK, "") }

func (m *keepModule) Process(in []byte) []byte {
	if err := m.ir.Reset(in); err != nil {
		return abi.AppendCallError(nil, err.Error())
	}
	h := m.ir.Header()
	m.w.Reset()
	for range h.GroupCount {
		m.w.BeginGroup()
		m.w.EndGroup(abi.GroupResult{Action: abi.ActionKeep, Flags: abi.ResultTimeoutSet, TimeoutMs: h.ProcessingTimeMs + 60_000})
	}
	return m.w.Bytes()
}

const lateKeySpec = `
name: latekey
module: unused.wasm
key:
  field: k
event_time:
  field: ts
  watermark_delay: 0s
timeout: event_time
output:
  subject: latekey.out
late:
  subject: latekey.late
`

// TestLateRowKeys: each late row delivered after its batch carries its own key, not the key of
// a row read after it (the engine reads every row's key into one reused buffer).
func TestLateRowKeys(t *testing.T) {
	sink := &collector{}
	cfg := engine.Config{
		Spec: specFromYAML(t, lateKeySpec), Store: openStore(t, ""), Sink: sink,
	}
	nativehook.Use(&cfg, &keepModule{})
	eng, err := sharedRuntime(t).NewEngine(context.Background(), cfg)
	require(t, err)
	defer eng.Close(context.Background())
	ctx := context.Background()
	_, err = eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(`{"k":"x","ts":1000}`)})
	require(t, err)
	rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 2, Rows: rows(
		`{"k":"a","ts":10}`, `{"k":"b","ts":20}`, `{"k":"c","ts":2000}`, `{"k":"d","ts":2001}`)})
	require(t, err)
	if rep.LateRows != 2 {
		t.Fatalf("%d late rows, want 2", rep.LateRows)
	}
	late := sink.take(state.OutboxLate)
	if len(late) != 2 || string(late[0].Key) != `"a"` || string(late[1].Key) != `"b"` {
		var keys []string
		for _, e := range late {
			keys = append(keys, string(e.Key))
		}
		t.Fatalf("late rows delivered with keys %q, want [\"a\" \"b\"]", keys)
	}
}
