package runner

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/state"
)

// TestReconcileFilteredFloor: the ack floor of a consumer filtered to some of its stream's
// subjects (a partition of GS_<NAME>_KG) can stand past its last message, over the other
// subjects' messages. That is not a consumer ahead of the committed position: no rewind, no
// new output generation. One of its own messages between the position and the floor is.
func TestReconcileFilteredFloor(t *testing.T) {
	j := testutil.StartJetStream(t)
	ctx := context.Background()
	_, err := j.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "KG", Subjects: []string{"kg.>"}})
	testutil.Require(t, err)
	pub := func(subj string) uint64 {
		ack, err := j.JS.Publish(ctx, subj, []byte(`{}`))
		testutil.Require(t, err)
		return ack.Sequence
	}
	own := pub("kg.0")
	other := pub("kg.1")
	pub("kg.1")
	st, err := state.Open(t.TempDir(), nil)
	testutil.Require(t, err)
	t.Cleanup(func() { st.Close() })
	ks := st.Deployment("d")
	b := ks.NewBatch(1)
	b.SetProgress(0, own) // the partition committed its one message
	_, err = b.Commit()
	testutil.Require(t, err)
	src, err := input.NewSource(ctx, j.JS, "KG", "d-p0", []string{"kg.0"})
	testutil.Require(t, err)
	logger := testutil.DiscardLogger()

	// The floor over the other subject's messages.
	testutil.Require(t, src.Rewind(ctx, other+2))
	notes, err := reconcile(ctx, j.JS, ks, "KG", src, logger)
	testutil.Require(t, err)
	if p, _ := ks.Progress(); strings.Contains(notes, "beyond the committed position") || p.Generation != 0 {
		t.Fatalf("a floor over other subjects taken for a consumer ahead: notes %q, generation %d", notes, p.Generation)
	}

	// One of its own messages acknowledged past the position: ahead.
	mine := pub("kg.0")
	testutil.Require(t, src.Rewind(ctx, mine+1))
	notes, err = reconcile(ctx, j.JS, ks, "KG", src, logger)
	testutil.Require(t, err)
	if p, _ := ks.Progress(); !strings.Contains(notes, "beyond the committed position") || p.Generation != 1 {
		t.Fatalf("a consumer ahead by its own message: notes %q, generation %d", notes, p.Generation)
	}
}
