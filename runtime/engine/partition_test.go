package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// TestWrongPartition: a row whose key Config.WrongPartition refuses is dead-lettered with
// ReasonWrongPartition and the hook's error, with its key, and never reaches the handler;
// the other rows of its batch are processed.
func TestWrongPartition(t *testing.T) {
	sp := specFromYAML(t, `
name: probe-partition
module: unused.wasm
key: {field: k}
output: {subject: probe.out}
`)
	sink := &collector{}
	var asked []string
	eng, err := sharedRuntime(t).NewEngine(context.Background(), engine.Config{Spec: sp, Wasm: probeWasm(t), Store: openStore(t, ""), Sink: sink,
		WrongPartition: func(key []byte) error {
			asked = append(asked, string(key))
			if string(key) == `"b"` {
				return errors.New("key b is partition 3's, not partition 1's")
			}
			return nil
		}})
	require(t, err)
	t.Cleanup(func() { eng.Close(context.Background()) })
	rep, err := eng.RunBatch(context.Background(), engine.BatchInput{ProcessingTimeMs: 1, Rows: rows(
		`{"k":"a","ops":[{"emit":"a"}]}`,
		`{"k":"b","ops":[{"emit":"b"}]}`,
		`{"k":"c","ops":[{"emit":"c"}]}`,
		`{"ops":[{"emit":"none"}]}`, // no key: missing_key, not asked about
	)})
	require(t, err)
	if got := payloads(sink.take(state.OutboxOutput)); len(got) != 2 || got[0] != `"a"` || got[1] != `"c"` {
		t.Fatalf("outputs %v, want a and c", got)
	}
	dead := sink.take(state.OutboxDeadLetter)
	if len(dead) != 2 || rep.DeadLetters != 2 {
		t.Fatalf("dead letters %+v (report %d), want b's and the keyless row", dead, rep.DeadLetters)
	}
	if d := dead[0]; d.Reason != engine.ReasonWrongPartition || string(d.Key) != `"b"` || !strings.Contains(d.Error, "partition 3's") || d.Subject != "in.test" || d.Sequence != 2 {
		t.Errorf("dead letter %+v, want b's with reason %s", d, engine.ReasonWrongPartition)
	}
	if dead[1].Reason != engine.ReasonMissingKey {
		t.Errorf("keyless row: reason %s", dead[1].Reason)
	}
	if strings.Join(asked, " ") != `"a" "b" "c"` {
		t.Errorf("asked about %v", asked)
	}
}
