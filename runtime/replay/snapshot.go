package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// SnapshotStart is a partition whose replay started from a snapshot of the deployment's
// state (a replicated deployment's, see [Run]) instead of from empty state.
type SnapshotStart struct {
	Partition int `json:"partition"`
	// Batch is the last batch the snapshot holds: the replay ran the recorded batches after
	// it. TakenAt is when the snapshot was taken.
	Batch   uint64    `json:"batch"`
	TakenAt time.Time `json:"taken_at"`
}

// snapshotStart, for a partition whose replay cannot or need not start from empty state,
// loads into the replay's store a snapshot of partition p from which the recorded history
// runs on: one taken at the end of a recorded batch (not between its chunks). When the
// history does not start from empty state, the oldest such snapshot; else (the comparison
// starts after the history's beginning), the newest one before the first compared batch.
// It returns the index in hist of the first batch to run after it, and found false when the
// deployment is not replicated or has no such snapshot.
func (r *replayer) snapshotStart(ctx context.Context, p int, hist []batch) (start int, found bool, err error) {
	sp := r.opts.Spec
	if sp.Replication != spec.ReplicationChangelog {
		return 0, false, nil
	}
	snaps, err := changelog.OpenSnapshots(ctx, r.opts.JS, 0)
	if err != nil {
		return 0, false, err
	}
	metas, err := snaps.List(ctx, sp.Name, p)
	if err != nil {
		return 0, false, err
	}
	firstCompared := len(hist)
	for i, b := range hist {
		if b.compared {
			firstCompared = i
			break
		}
	}
	if hist[0].HadState {
		// Needed: the oldest one the history runs on from, to compare the most batches.
		slices.Reverse(metas)
		firstCompared = len(hist)
	}
	for _, m := range metas {
		start, ok := startAfter(hist, m.BatchID)
		if !ok || start > firstCompared {
			continue
		}
		ks := r.store.Deployment(topology.Keyspace(sp.Name, p, sp.Partitions))
		err := snaps.Read(ctx, sp.Name, p, m, ks.ApplyReplicated)
		if errors.Is(err, changelog.ErrSnapshotNotFound) || errors.Is(err, changelog.ErrCorruptSnapshot) {
			continue // pruned meanwhile, or damaged: an older one
		}
		if err != nil {
			return 0, false, fmt.Errorf("replay: loading partition %d's snapshot of batch %d: %w", p, m.BatchID, err)
		}
		if err := dropOutbox(ks); err != nil {
			return 0, false, err
		}
		r.rep.FromSnapshots = append(r.rep.FromSnapshots, SnapshotStart{Partition: p, Batch: m.BatchID, TakenAt: m.CreatedAt})
		return start, true, nil
	}
	return 0, false, nil
}

// startAfter returns the index in hist of the first batch after a snapshot that holds the
// batches up to id: ok when hist holds the batch id ends (so nothing between the snapshot
// and hist[start] is missing) as its last chunk.
func startAfter(hist []batch, id uint64) (start int, ok bool) {
	for i, b := range hist {
		if b.ids[len(b.ids)-1] == id {
			return i + 1, true
		}
		if b.Batch > id {
			return 0, false
		}
	}
	return 0, false
}

// dropOutbox drops what a loaded snapshot held of the deployment's outbox: outputs it had
// not delivered yet, of batches before the replay's, which the replay must not count as its
// own.
func dropOutbox(ks *state.Deployment) error {
	var last state.OutboxID
	var any bool
	if err := ks.Outbox(func(e state.OutboxEntry) error {
		last, any = e.ID, true
		return nil
	}); err != nil {
		return err
	}
	if !any {
		return nil
	}
	return ks.AckOutbox(last)
}
