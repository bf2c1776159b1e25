package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/state"
)

// TestResetCountsDroppedOutputs: a reset of the state (deploy --reset-state) counts the
// outbox entries, committed but not yet delivered, that it drops, by kind, and says so; the
// outbox is empty afterwards. A reset with nothing undelivered drops nothing.
func TestResetCountsDroppedOutputs(t *testing.T) {
	j := startInput(t)
	ctx := context.Background()
	src, err := input.NewSource(ctx, j.JS, "IN", "d", nil)
	testutil.Require(t, err)
	st, err := state.Open(t.TempDir(), nil)
	testutil.Require(t, err)
	t.Cleanup(func() { st.Close() })
	ks := st.Deployment("d")

	b := ks.NewBatch(1)
	b.SetProcessingTime(5000)
	for _, k := range []state.OutboxKind{state.OutboxOutput, state.OutboxOutput, state.OutboxDeadLetter, state.OutboxManifest} {
		b.AppendOutbox(&state.OutboxEntry{Kind: k, Payload: []byte(`{}`)})
	}
	_, err = b.Commit()
	testutil.Require(t, err)

	for i, want := range []droppedOutbox{{outputs: 2, deadLetters: 1, other: 1}, {}} {
		got, err := resetState(ctx, ks, src)
		testutil.Require(t, err)
		if got != want {
			t.Fatalf("reset %d dropped %+v, want %+v", i, got, want)
		}
		if p, err := ks.Progress(); err != nil || p.ProcessingTimeMs != 5000 || p.Counters != (state.Counters{}) {
			t.Fatalf("reset %d: progress %+v, %v; want the processing time kept (5000), the counters at 0", i, p, err)
		}
		left := 0
		testutil.Require(t, ks.Outbox(func(state.OutboxEntry) error { left++; return nil }))
		if left != 0 {
			t.Fatalf("reset %d left %d outbox entries", i, left)
		}
	}
	if s := (droppedOutbox{outputs: 2, deadLetters: 1, other: 1}).String(); !strings.Contains(s, "dropped 2 outputs and 1 dead letters") {
		t.Fatalf("the note says %q", s)
	}
}
