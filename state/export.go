package state

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// DefaultExportChunk is the average chunk size of Deployment.Export when it is given 0 or
// less.
const DefaultExportChunk = 1 << 20

// maxChunkFactor bounds an export's repr at maxChunkFactor×chunkBytes, and
// minChunkDivisor keeps a repr from being cut by its keys before chunkBytes/minChunkDivisor.
const (
	maxChunkFactor  = 4
	minChunkDivisor = 8
)

// Export is ExportAt without a callback: it copies the deployment's keyspace as it is
// between two of its writes, while writes go on.
func (d *Deployment) Export(chunkBytes int, fn func(repr []byte) error) (Progress, error) {
	return d.ExportAt(chunkBytes, nil, fn)
}

// ExportAt hands fn a consistent point-in-time copy of the deployment's whole keyspace
// (state entries, timer index, skipped timeouts, outbox, state variables, progress record) as a sequence of
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
// record, whose Progress is zero. The progress record goes alone in the last repr (but
// after the last keys when they are fewer than chunkBytes/8 bytes). A repr
// is only valid during the call to fn; an error from fn stops the export and is returned.
//
// The reprs are cut where the keys say, not where the offsets fall: after an entry whose
// key hashes to one of the entry's length out of chunkBytes values (0 or less:
// DefaultExportChunk), once the repr holds chunkBytes/8 bytes. So a repr is about
// chunkBytes long on average, and at most 4×chunkBytes (cut there whatever the keys; an
// entry larger than that goes alone in one), and two exports give byte-identical reprs
// for every key range that did not change in between: a change of entries moves the cuts
// of the repr holding them, and at most of the next, not of the others. A snapshot of the
// export need upload only the reprs the last one lacks. The same content gives the same
// bytes (an uncommitted batch's repr has sequence number 0).
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
	emit := func() error {
		if err := fn(pb.Repr()); err != nil {
			return err
		}
		pb.Reset()
		return nil
	}
	cut := false // the last entry ends a repr
	add := func(key, value []byte) error {
		n := batchOpLen(key, value)
		if pb.Count() > 0 && (cut || pb.Len()+n > maxChunkFactor*chunkBytes) {
			if err := emit(); err != nil {
				return err
			}
		}
		if err := pb.Set(key, value, nil); err != nil {
			return err
		}
		cut = pb.Len() >= chunkBytes/minChunkDivisor && keyHash(key[len(d.prefix):])%uint64(chunkBytes) < uint64(n)
		return nil
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
		// Alone, unless the repr it would end is short, so that the repr before it, the end
		// of the keyspace, can be the same as in the last export.
		cut = cut || pb.Len() >= chunkBytes/minChunkDivisor
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

// keyHash is FNV-1a 64 of key, its bits mixed by MurmurHash3's finalizer (FNV-1a's
// low bits, which the cut takes, depend only on the low bits of each step): the same in
// every process, so that exports of the same keys are cut alike anywhere.
func keyHash(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h = (h ^ uint64(c)) * 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
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
