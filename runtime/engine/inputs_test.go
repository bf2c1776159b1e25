package engine_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// twoInputsSpec has inputs a (key k, delay 10s) and b (key id, delay 20s) under event-time
// timeouts; the probe module emits the watermark its call sees.
const twoInputsSpec = `
name: two
module: unused.wasm
inputs:
  - name: a
    subjects: [a.>]
    key: {field: k}
    event_time: {field: ts, watermark_delay: 10s}
  - name: b
    subjects: [b.>]
    key: {field: id}
    event_time: {field: ts, watermark_delay: 20s}
timeout: event_time
output: {subject: two.out}
`

// inputRows makes rows of the given inputs: pairs of (input index, JSON).
func inputRows(pairs ...any) []engine.Row {
	var out []engine.Row
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, engine.Row{Data: []byte(pairs[i+1].(string)), Input: pairs[i].(int), Sequence: uint64(len(out) + 1)})
	}
	return out
}

// TestInputsWatermark: each input's watermark follows its own rows and delay; the
// deployment's is their min (or max), never decreasing, 0 while an input has had no rows
// under min; rows are late against the deployment's watermark, not their input's, and counted
// per input; the inputs' watermarks survive a restart (docs/semantics.md, "Several inputs").
func TestInputsWatermark(t *testing.T) {
	type batch struct {
		rows  []engine.Row
		wantW int64
		want  []engine.InputReport // nil: not checked
	}
	cases := []struct {
		name    string
		policy  string
		batches []batch
	}{
		{"min", "", []batch{
			// a: 100000-10000; b: 50000-20000; W = min = 30000.
			{inputRows(0, `{"k":"x","ts":100000}`, 1, `{"id":"x","ts":50000}`), 30000,
				[]engine.InputReport{{Name: "a", RowsIn: 1, WatermarkMs: 90000}, {Name: "b", RowsIn: 1, WatermarkMs: 30000}}},
			// a at 40000 is not late (W is 30000, although a's own watermark is 90000); b at
			// 30000 is (<= W). b's late row still moves b: 30000-20000 < 30000, so it does not.
			{inputRows(0, `{"k":"y","ts":40000}`, 1, `{"id":"y","ts":30000}`), 30000,
				[]engine.InputReport{{Name: "a", RowsIn: 1, WatermarkMs: 90000}, {Name: "b", RowsIn: 1, LateRows: 1, WatermarkMs: 30000}}},
			{nil, 30000, nil}, // restart (below): the watermarks are as committed
			{inputRows(1, `{"id":"z","ts":500000}`), 90000,
				[]engine.InputReport{{Name: "a", WatermarkMs: 90000}, {Name: "b", RowsIn: 1, WatermarkMs: 480000}}},
		}},
		{"max", "watermark_policy: max\n", []batch{
			{inputRows(0, `{"k":"x","ts":100000}`, 1, `{"id":"x","ts":50000}`), 90000, nil},
			// b at 60000 is late now: the deployment's watermark is a's.
			{inputRows(1, `{"id":"y","ts":60000}`), 90000,
				[]engine.InputReport{{Name: "a", WatermarkMs: 90000}, {Name: "b", RowsIn: 1, LateRows: 1, WatermarkMs: 40000}}},
		}},
		{"an input without rows holds min at 0", "", []batch{
			{inputRows(0, `{"k":"x","ts":100000}`), 0,
				[]engine.InputReport{{Name: "a", RowsIn: 1, WatermarkMs: 90000}, {Name: "b"}}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sp := specFromYAML(t, twoInputsSpec+c.policy)
			st := openStore(t, dir)
			sink := &collector{}
			eng, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: probeWasm(t), Store: st, Sink: sink})
			require(t, err)
			defer func() { eng.Close(context.Background()) }()
			at := int64(1000)
			for i, b := range c.batches {
				if b.rows == nil {
					require(t, eng.Close(context.Background()))
					eng, err = sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: probeWasm(t), Store: st, Sink: sink})
					require(t, err)
					if w := eng.Progress().WatermarkMs; w != b.wantW {
						t.Fatalf("after the restart: watermark %d, want %d", w, b.wantW)
					}
					continue
				}
				at += 1000
				rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: at, Rows: b.rows})
				require(t, err)
				if rep.WatermarkMs != b.wantW {
					t.Fatalf("batch %d: watermark %d, want %d", i+1, rep.WatermarkMs, b.wantW)
				}
				if b.want != nil && !reflect.DeepEqual(rep.Inputs, b.want) {
					t.Fatalf("batch %d: inputs %+v, want %+v", i+1, rep.Inputs, b.want)
				}
				late := 0
				for _, in := range rep.Inputs {
					late += in.LateRows
				}
				if rep.LateRows != late {
					t.Fatalf("batch %d: %d late rows, inputs say %d", i+1, rep.LateRows, late)
				}
			}
		})
	}
}

// TestInputsKeyFields: each input's rows are keyed by its own key field, and grouped by key
// across inputs; a row without its input's key field is dead-lettered naming that field.
func TestInputsKeyFields(t *testing.T) {
	sink := &collector{}
	eng := newEngine(t, specFromYAML(t, twoInputsSpec), probeWasm(t), nil, sink)
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1000, Rows: inputRows(
		0, `{"k":"x","ts":100000,"ops":[{"emit":"from a"}]}`,
		1, `{"id":"x","ts":100000,"ops":[{"emit":"from b"}]}`,
		1, `{"k":"x","ts":100000}`)})
	require(t, err)
	if rep.DataCalls != 1 || rep.DeadLetters != 1 {
		t.Fatalf("report %+v: want one data call (key x of both inputs) and one dead letter", rep)
	}
	dl := sink.take(state.OutboxDeadLetter)
	if len(dl) != 1 || !strings.Contains(dl[0].Error, `key field "id" is missing`) {
		t.Fatalf("dead letters %+v", dl)
	}
	if _, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 2000, Rows: inputRows(2, `{"k":"x","ts":1}`)}); !errors.Is(err, engine.ErrUnknownInput) {
		t.Fatalf("a row of input 2: %v, want ErrUnknownInput", err)
	}
}
