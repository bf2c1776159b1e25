package state

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// DefaultExportChunk is the chunk size of Deployment.Export when it is given 0 or less.
const DefaultExportChunk = 1 << 20

// Export is ExportAt without a callback: it copies the deployment's keyspace as it is
// between two of its writes, while writes go on.
func (d *Deployment) Export(chunkBytes int, fn func(repr []byte) error) (Progress, error) {
	return d.ExportAt(chunkBytes, nil, fn)
}

// ExportAt hands fn a consistent point-in-time copy of the deployment's whole keyspace
// (state entries, timer index, skipped timeouts, outbox, progress record) as a sequence of
// Pebble batch representations, each acceptable to ApplyReplicated of the deployment of
// the same name in any Store, and returns the Progress the copy holds (the zero Progress
// when nothing was committed).
//
// The copy is taken between two writes of the deployment: ExportAt waits for a write in
// progress (Batch.Commit, AckOutbox, Drop, ApplyReplicated, through any handle) to end,
// takes a Pebble snapshot, calls at (when not nil) with the snapshot's Progress while no
// write of the deployment can start, then lets writes go on and reads the snapshot. With
// a Replicator set, at therefore sees the Replicator after the last write the copy holds
// and before the next: the place to read the log position the copy corresponds to. at
// must be quick, and must not write to the deployment (that deadlocks); when it returns
// an error, nothing is exported and ExportAt returns it.
//
// The first repr begins with a range deletion of the whole keyspace, so that applying the
// reprs in order, with ApplyReplicated, to a keyspace holding anything yields exactly the
// copy. Then come Sets of every key in key order, the progress record last: applying only
// a prefix of the reprs (a restore that crashed) leaves a keyspace without a progress
// record, whose Progress is zero. Each repr is at most about chunkBytes long (0 or less:
// DefaultExportChunk), except that an entry larger than that goes alone in one. A repr is
// only valid during the call to fn; an error from fn stops the export and is returned.
//
// Applying the reprs is not atomic (each ApplyReplicated is): a reader of the target sees
// the keyspace build up.
func (d *Deployment) ExportAt(chunkBytes int, at func(Progress) error, fn func(repr []byte) error) (Progress, error) {
	if chunkBytes <= 0 {
		chunkBytes = DefaultExportChunk
	}
	if err := d.acquire(); err != nil {
		return Progress{}, err
	}
	defer d.s.release()
	snap, p, err := d.snapshotAt(at)
	if err != nil {
		return Progress{}, err
	}
	defer snap.Close()

	progressKey := sectionKey(nil, d.prefix, sectionProgress)
	pb := d.s.db.NewBatch()
	defer pb.Close()
	_ = pb.DeleteRange(d.prefix, prefixEnd(d.prefix), nil)
	add := func(key, value []byte) error {
		if pb.Count() > 0 && pb.Len()+batchOpLen(key, value) > chunkBytes {
			if err := fn(pb.Repr()); err != nil {
				return err
			}
			pb.Reset()
		}
		return pb.Set(key, value, nil)
	}
	iter, err := snap.NewIter(&pebble.IterOptions{LowerBound: d.prefix, UpperBound: prefixEnd(d.prefix)})
	if err != nil {
		return Progress{}, err
	}
	var progressValue []byte
	for ok := iter.First(); ok; ok = iter.Next() {
		v, verr := iter.ValueAndErr()
		if verr != nil {
			err = verr
			break
		}
		if bytes.Equal(iter.Key(), progressKey) {
			progressValue = append([]byte(nil), v...)
			continue
		}
		if err = add(iter.Key(), v); err != nil {
			break
		}
	}
	err = errors.Join(err, iter.Error(), iter.Close())
	if err != nil {
		return Progress{}, err
	}
	if progressValue != nil {
		if err := add(progressKey, progressValue); err != nil {
			return Progress{}, err
		}
	}
	if err := fn(pb.Repr()); err != nil {
		return Progress{}, err
	}
	return p, nil
}

// snapshotAt takes a Pebble snapshot between two writes of d and reads its Progress,
// calling at (when not nil) before any later write of d can start. The caller holds a
// ref.
func (d *Deployment) snapshotAt(at func(Progress) error) (*pebble.Snapshot, Progress, error) {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	snap := d.s.db.NewSnapshot()
	p, err := func() (Progress, error) {
		v, closer, err := snap.Get(sectionKey(nil, d.prefix, sectionProgress))
		if errors.Is(err, pebble.ErrNotFound) {
			return Progress{}, nil
		}
		if err != nil {
			return Progress{}, err
		}
		defer closer.Close()
		return decodeProgress(v)
	}()
	if err == nil && at != nil {
		err = at(p)
	}
	if err != nil {
		_ = snap.Close()
		return nil, Progress{}, fmt.Errorf("state: export deployment %s: %w", d.name, err)
	}
	return snap, p, nil
}

// batchOpLen is the length of a Set of key to value in a Pebble batch representation:
// the kind, then key and value each preceded by its uvarint length.
func batchOpLen(key, value []byte) int {
	return 1 + uvarintLen(len(key)) + len(key) + uvarintLen(len(value)) + len(value)
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}
