package changelog

import (
	"context"
	"errors"

	"github.com/groupstate/groupstate/state"
)

// Position says how far a local copy of a partition's state goes in its changelog: it holds
// every record up to sequence Held, and its last committed batch is Batch. The zero value
// says nothing (a [Restore] then finds the copy's place in the log itself).
type Position struct {
	// Held is the Seq of the last record the copy holds.
	Held uint64
	// Batch is the copy's last committed batch id.
	Batch uint64
}

// Applier brings a local copy of a partition's state (a keyspace) up to the partition's
// changelog: it is the one loop that reads records, skips fences, applies the rest and
// tracks the last record held, used by [Restore] and by a standby following the log. Not
// safe for concurrent use: while it applies, it is the keyspace's only writer.
type Applier struct {
	cl        *Changelog
	partition int
	ks        *state.Deployment

	// Held is the Seq of the last record the copy holds (applied, or found held already).
	Held uint64
	// Applied counts the records applied since the Applier was made (fences carry no write
	// and are not counted).
	Applied int
}

// NewApplier returns the applier of partition's changelog in cl to ks, the copy holding the
// records up to held.
func NewApplier(cl *Changelog, partition int, ks *state.Deployment, held uint64) *Applier {
	return &Applier{cl: cl, partition: partition, ks: ks, Held: held}
}

// Apply reads the partition's records from sequence from on, up to its last one when Apply
// is called (see [Changelog.Read]), and returns that last sequence. Each record is asked to
// held first (nil: none is): when held says the copy has it already it is only taken as held;
// otherwise it is held and, unless it is a fence, its data applied to the keyspace. An error
// of held or of an apply stops the read and is returned.
func (a *Applier) Apply(ctx context.Context, from uint64, held func(ChangelogRecord) (bool, error)) (uint64, error) {
	return a.cl.Read(ctx, a.partition, from, func(rec ChangelogRecord) error {
		if held != nil {
			has, err := held(rec)
			if err != nil {
				return err
			}
			if has {
				a.Held = rec.Seq
				return nil
			}
		}
		a.Held = rec.Seq
		if rec.Kind == ChangelogFence {
			return nil
		}
		a.Applied++
		return a.ks.ApplyReplicated(rec.Data)
	})
}

// Restored is what a [Restore] did.
type Restored struct {
	// Last is the log's last sequence read: the next writer expects it.
	Last uint64
	// Held is what the local copy holds after the restore.
	Held Position
	// Applied counts the records (and snapshot chunks) applied.
	Applied int
}

// errHintStale: the record a restore's hint names is not in the log as the hint says.
var errHintStale = errors.New("changelog: the local copy's position is not in the changelog")

// Restore brings ks, the local copy of partition's state, up to the end of cl's changelog of
// the partition. With a hint (what the local copy is known to hold: a standby's position, or
// the owner's own last append), when the log still has the record at hint.Held with the
// copy's batch, only the records after it are applied. Otherwise, when ks's last batch is in
// the log after the newest snapshot in snaps (the local copy is a prefix of the log: writes
// reach the log first), only the records after it are applied; otherwise the newest readable
// snapshot is loaded (its first chunk empties the keyspace) and the log after it applied;
// with no snapshot, ks is emptied and the whole log applied. ks must have no other writer
// meanwhile.
func Restore(ctx context.Context, cl *Changelog, snaps *Snapshots, partition int, ks *state.Deployment, hint Position) (Restored, error) {
	p, err := ks.Progress()
	if err != nil {
		return Restored{}, err
	}
	a := NewApplier(cl, partition, ks, 0)
	done := func(last uint64) (Restored, error) {
		p, err := ks.Progress()
		return Restored{Last: last, Held: Position{Held: a.Held, Batch: p.BatchID}, Applied: a.Applied}, err
	}
	if hint.Held > 0 && hint.Batch == p.BatchID {
		first := true
		last, err := a.Apply(ctx, hint.Held, func(rec ChangelogRecord) (bool, error) {
			if !first {
				return false, nil
			}
			first = false
			if rec.Seq != hint.Held || (rec.Kind != ChangelogFence && rec.BatchID != hint.Batch) {
				return false, errHintStale
			}
			return true, nil // the local copy has it
		})
		switch {
		case err == nil && !first:
			return done(last)
		case err != nil && !errors.Is(err, errHintStale):
			return Restored{}, err
		}
		a.Applied = 0 // nothing was applied: the first record did not match
	}
	metas, err := snaps.List(ctx, cl.deployment, partition)
	if err != nil {
		return Restored{}, err
	}
	// pass applies the records from sequence from on; with applying false, only those after
	// the record of the local copy's last batch, and found tells whether that was there.
	pass := func(from uint64, applying bool) (uint64, bool, error) {
		found := applying
		last, err := a.Apply(ctx, from, func(rec ChangelogRecord) (bool, error) {
			if found {
				return false, nil
			}
			found = rec.Kind == ChangelogBatch && rec.BatchID == p.BatchID
			return true, nil // the local copy has it
		})
		return last, found, err
	}
	from := uint64(1)
	if len(metas) > 0 {
		from = metas[0].Seq + 1
	}
	if p.BatchID > 0 && (len(metas) == 0 || p.BatchID > metas[0].BatchID) {
		last, found, err := pass(from, false)
		if err != nil {
			return Restored{}, err
		}
		if found {
			return done(last)
		}
	}
	for _, m := range metas { // newest first
		a.Applied, a.Held = 0, m.Seq
		err := snaps.Read(ctx, cl.deployment, partition, m, func(repr []byte) error {
			a.Applied++
			return ks.ApplyReplicated(repr)
		})
		if errors.Is(err, ErrSnapshotNotFound) || errors.Is(err, ErrCorruptSnapshot) {
			continue // pruned meanwhile, or damaged: the one before it, with more log after it
		}
		if err != nil {
			return Restored{}, err
		}
		last, _, err := pass(m.Seq+1, true)
		if err != nil {
			return Restored{}, err
		}
		return done(last)
	}
	// No snapshot (the log is whole then: it is purged only below a snapshot), or a local
	// copy that is not a prefix of the log: rebuild from the log alone.
	if err := ks.Drop(); err != nil {
		return Restored{}, err
	}
	a.Applied, a.Held = 0, 0
	last, _, err := pass(1, true)
	if err != nil {
		return Restored{}, err
	}
	return done(last)
}
