package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/state"
)

// commitN commits n batches to ks, each setting key k<i mod 50> to the batch id.
func commitN(t *testing.T, ks *state.Deployment, n int) {
	t.Helper()
	for range n {
		p, err := ks.Progress()
		testutil.Require(t, err)
		id := p.BatchID + 1
		b := ks.NewBatch(id)
		key := []byte(fmt.Sprintf(`"k%d"`, id%50))
		prev, _, err := ks.Get(key)
		testutil.Require(t, err)
		b.Set(key, prev, state.Entry{HasValue: true, Value: []byte(fmt.Sprint(id))})
		b.SetProgress(0, id)
		_, err = b.Commit()
		testutil.Require(t, err)
	}
}

func sameState(t *testing.T, want, got *state.Deployment) {
	t.Helper()
	wp, err := want.Progress()
	testutil.Require(t, err)
	gp, err := got.Progress()
	testutil.Require(t, err)
	if wp != gp {
		t.Fatalf("progress %+v, want %+v", gp, wp)
	}
	for i := range 50 {
		key := []byte(fmt.Sprintf(`"k%d"`, i))
		w, _, _ := want.Get(key)
		g, _, _ := got.Get(key)
		if string(w.Value) != string(g.Value) || w.HasValue != g.HasValue {
			t.Fatalf("key %s: %q, want %q", key, g.Value, w.Value)
		}
	}
}

// TestSnapshotsBoundTheLog: snapshots let the changelog be purged below the oldest one
// kept, and a restore from the newest snapshot plus the log after it, or from a local copy
// that is a prefix of the log, equals the source.
func TestSnapshotsBoundTheLog(t *testing.T) {
	j := testutil.StartJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := changelog.OpenChangelog(ctx, j.JS, "d", 0)
	testutil.Require(t, err)
	snaps, err := changelog.OpenSnapshots(ctx, j.JS, 0)
	testutil.Require(t, err)
	open := func() *state.Store {
		st, err := state.Open(t.TempDir(), nil)
		testutil.Require(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	src := open().Deployment("d")
	seq, err := cl.Fence(ctx, 0, 1)
	testutil.Require(t, err)
	repl := changelog.NewReplicator(cl, 0, 1, seq)
	src.SetReplicator(repl)
	sn := &snapshotter{cl: cl, snaps: snaps, repl: repl, metrics: noMetrics{}}

	var metas []changelog.SnapshotMeta
	for range 3 {
		commitN(t, src, 40)
		m, err := sn.take(ctx, "d", src)
		testutil.Require(t, err)
		metas = append(metas, m)
	}
	commitN(t, src, 7) // after the last snapshot

	kept, err := snaps.List(ctx, "d", 0)
	testutil.Require(t, err)
	if len(kept) != snapshotKeep || kept[0].ID != metas[2].ID || kept[1].ID != metas[1].ID {
		t.Fatalf("kept %v, want the newest %d of %v", kept, snapshotKeep, metas)
	}
	first := uint64(0)
	_, err = cl.Read(ctx, 0, 1, func(rec changelog.ChangelogRecord) error {
		if first == 0 {
			first = rec.Seq
		}
		return nil
	})
	testutil.Require(t, err)
	if first <= metas[0].Seq {
		t.Fatalf("the log starts at %d: not purged below the oldest kept snapshot (seq %d)", first, metas[1].Seq)
	}

	replica := open().Deployment("d")
	res, err := changelog.Restore(ctx, cl, snaps, 0, replica, changelog.Position{})
	applied := res.Applied
	testutil.Require(t, err)
	sameState(t, src, replica)
	if applied > 1+7 { // the snapshot's chunk(s), then the 7 batches after it
		t.Fatalf("restore applied %d records and chunks, want the newest snapshot and the 7 batches after it", applied)
	}

	commitN(t, src, 3)
	res, err = changelog.Restore(ctx, cl, snaps, 0, replica, changelog.Position{}) // a restart: the local copy is a prefix
	applied = res.Applied
	testutil.Require(t, err)
	sameState(t, src, replica)
	if applied != 3 {
		t.Fatalf("restore of a local prefix applied %d records, want the 3 new ones", applied)
	}

	// From a standby's position: only what follows it is read and applied; a position the
	// log does not have as said (a purged record, another batch) finds the copy's place anyway.
	for _, tc := range []struct {
		name string
		hint func(changelog.Position) changelog.Position
	}{
		{"the copy's own", func(h changelog.Position) changelog.Position { return h }},
		{"purged", func(h changelog.Position) changelog.Position { return changelog.Position{Held: 1, Batch: h.Batch} }},
		{"another batch's", func(h changelog.Position) changelog.Position {
			return changelog.Position{Held: h.Held, Batch: h.Batch + 1}
		}},
	} {
		hint := tc.hint(res.Held)
		commitN(t, src, 2)
		res, err = changelog.Restore(ctx, cl, snaps, 0, replica, hint)
		testutil.Require(t, err)
		sameState(t, src, replica)
		if res.Applied != 2 {
			t.Fatalf("%s position: restore applied %d records, want the 2 new ones", tc.name, res.Applied)
		}
		if p, _ := replica.Progress(); res.Held.Batch != p.BatchID || res.Held.Held != res.Last {
			t.Fatalf("%s position: restore says the copy holds %+v, want batch %d up to %d", tc.name, res.Held, p.BatchID, res.Last)
		}
	}
}
