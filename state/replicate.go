package state

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// WriteKind says which operation made a ReplicatedWrite.
type WriteKind uint8

const (
	// WriteBatch is the write of Batch.Commit: a micro-batch (or a chunk of
	// one), its progress record included.
	WriteBatch WriteKind = 1
	// WriteAck is the write of Deployment.AckOutbox: deletions of outbox
	// entries.
	WriteAck WriteKind = 2
	// WriteDrop is the write of Deployment.Drop: one range deletion of the
	// whole keyspace.
	WriteDrop WriteKind = 3
)

// String returns "batch", "ack", "drop" or "kind(N)".
func (k WriteKind) String() string {
	switch k {
	case WriteBatch:
		return "batch"
	case WriteAck:
		return "ack"
	case WriteDrop:
		return "drop"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Replicator receives every write to a deployment's keyspace before it is
// applied locally (see Deployment.SetReplicator).
type Replicator interface {
	// Replicate makes w durable elsewhere (for example in a changelog
	// stream). When it returns an error, nothing of the write is applied
	// locally and the write returns an error wrapping ErrReplication and
	// it. w.Repr is only valid during the call, and must not be modified:
	// copy it to keep it.
	//
	// An error must mean that w will not be applied by whoever reads the
	// log: the writer goes on, and may commit the same batch id again with
	// other contents. A Replicator that cannot tell (a publish that timed
	// out) must make sure the record is never applied, or fail the
	// deployment rather than return.
	Replicate(w ReplicatedWrite) error
}

// ReplicatedWrite is one write of a deployment, as handed to its
// Replicator.
type ReplicatedWrite struct {
	// Kind is the operation that made the write.
	Kind WriteKind
	// BatchID is the batch a WriteBatch commits; for the other kinds the
	// id of the last committed batch (0 when none).
	BatchID uint64
	// Repr is the Pebble batch representation (pebble.Batch.Repr) of the
	// write: exactly the operations then committed locally. Pass it to
	// Deployment.ApplyReplicated of the deployment of the same name in
	// another Store to apply the write there. It is only valid during the
	// call to Replicate. Its header's sequence number is 0: Pebble sets it
	// when a batch commits.
	Repr []byte
}

// SetReplicator makes r receive every write of the deployment before it is
// applied locally; nil removes it. It applies to every handle of the
// deployment's name in this Store. While one is set, Batch.Commit (chunks
// of an open batch included), AckOutbox and Drop hand their Pebble batch to
// r.Replicate first and, once it returned nil, commit it locally with
// pebble.NoSync instead of pebble.Sync: the replica is the commit point,
// and after a crash the local copy catches up from it with
// ApplyReplicated. SyncAcks does nothing while a Replicator is set.
//
// Set or remove it while the deployment's writer is not writing. After it
// is removed, the writes made while it was set become durable locally with
// the next synced write (Pebble's log is sequential), or at once with
// SyncAcks.
func (d *Deployment) SetReplicator(r Replicator) {
	s := d.s
	s.replMu.Lock()
	defer s.replMu.Unlock()
	if r == nil {
		delete(s.repls, d.name)
		return
	}
	if s.repls == nil {
		s.repls = map[string]Replicator{}
	}
	s.repls[d.name] = r
}

// replicator returns d's Replicator, nil when none.
func (d *Deployment) replicator() Replicator {
	s := d.s
	s.replMu.RLock()
	defer s.replMu.RUnlock()
	return s.repls[d.name]
}

// replicate hands pb to d's Replicator r, if any, and returns the options
// of the local commit: NoSync when replicated, sync otherwise.
func (d *Deployment) replicate(r Replicator, kind WriteKind, batchID uint64, pb *pebble.Batch, sync *pebble.WriteOptions) (*pebble.WriteOptions, error) {
	if r == nil {
		return sync, nil
	}
	if err := r.Replicate(ReplicatedWrite{Kind: kind, BatchID: batchID, Repr: pb.Repr()}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReplication, err)
	}
	return pebble.NoSync, nil
}

// ApplyReplicated applies a write taken from d's replica (ReplicatedWrite.Repr,
// as when restoring a deployment into an empty keyspace or when a standby
// tails the log), atomically, in one Pebble batch. It keeps the hot-state
// cache coherent (the entries the write sets replace the cached ones; a
// range deletion empties the cache, as Drop does) and forgets the outbox
// floor AckOutbox keeps when the write could put entries below it.
//
// repr must hold only keys of d's keyspace, of the sections of the key
// layout, with values that decode: a key outside it fails with an error
// wrapping ErrForeignWrite, a malformed write with one wrapping ErrCorrupt,
// and nothing is applied. repr is not retained; the caller may reuse it.
//
// It does not check batch ids (the log's order is the truth) and does not
// go through d's Replicator. It commits with pebble.NoSync: a crash may
// lose the last writes applied, always a suffix of them (Pebble's log is
// sequential), and applying again every write from any earlier one on
// yields the same state, since every write sets or deletes whole keys.
func (d *Deployment) ApplyReplicated(repr []byte) error {
	if err := d.lockWrite(); err != nil {
		return err
	}
	defer d.unlockWrite()
	c := d.s.cache
	var log, vlog *setLog
	if c != nil {
		log, vlog = d.s.getLog(), d.s.getLog()
		defer d.s.putLog(log)
		defer d.s.putLog(vlog)
	}
	info, err := d.checkRepr(repr, d.s.outboxFloor(d.name), log, vlog)
	if err != nil {
		return fmt.Errorf("state: apply replicated write (deployment %s): %w", d.name, err)
	}
	if info.ops == 0 {
		return nil
	}
	pb := d.s.db.NewBatch()
	defer pb.Close()
	// SetRepr takes ownership of the slice (and the batch pool reuses it
	// after Close), so it gets a copy.
	if err := pb.SetRepr(append([]byte(nil), repr...)); err != nil {
		return fmt.Errorf("state: apply replicated write (deployment %s): %w: %w", d.name, ErrCorrupt, err)
	}
	if info.floorStale {
		d.s.setOutboxFloor(d.name, nil)
	}
	if c != nil {
		d.stripe.beginWrite()
	}
	err = d.s.write(func() error { return pb.Commit(pebble.NoSync) })
	if c != nil {
		cached, vcached := log, vlog
		if info.rangeDel {
			cached = nil // empty the cache, as Drop does
		}
		c.endWrite(d.stripe, err == nil, depLog{d.name, cached}, depLog{d.varsDep(), vcached})
	}
	if err != nil {
		return fmt.Errorf("state: apply replicated write (deployment %s): %w", d.name, err)
	}
	return nil
}

// reprInfo is what checkRepr learned of a write.
type reprInfo struct {
	ops        int  // operations (none: nothing to apply)
	rangeDel   bool // it holds a range deletion
	floorStale bool // it may put outbox entries below the outbox floor
}

// checkRepr checks that repr is a well-formed Pebble batch of d's
// keyspace (see ApplyReplicated), appending its state-entry writes to log
// and its writes of the variable records the cache holds to vlog (when not
// nil) for the hot-state cache. floor is d's outbox floor.
func (d *Deployment) checkRepr(repr, floor []byte, log, vlog *setLog) (reprInfo, error) {
	var info reprInfo
	const headerLen = 12 // u64 sequence number | u32 count, little-endian
	if len(repr) < headerLen {
		return info, fmt.Errorf("%w: batch of %d bytes", ErrCorrupt, len(repr))
	}
	count := binary.LittleEndian.Uint32(repr[8:headerLen])
	r := repr[headerLen:]
	str := func() ([]byte, bool) {
		n, w := binary.Uvarint(r)
		if w <= 0 || n > uint64(len(r)-w) {
			return nil, false
		}
		s := r[w : w+int(n) : w+int(n)]
		r = r[w+int(n):]
		return s, true
	}
	p := d.prefix
	for len(r) > 0 {
		kind := pebble.InternalKeyKind(r[0])
		r = r[1:]
		key, ok := str()
		if !ok {
			return info, fmt.Errorf("%w: batch operation %d: key", ErrCorrupt, info.ops)
		}
		var value []byte
		switch kind {
		case pebble.InternalKeyKindSet, pebble.InternalKeyKindRangeDelete:
			if value, ok = str(); !ok {
				return info, fmt.Errorf("%w: batch operation %d: value", ErrCorrupt, info.ops)
			}
		case pebble.InternalKeyKindDelete:
		default:
			return info, fmt.Errorf("%w: batch operation %d: kind %v", ErrCorrupt, info.ops, kind)
		}
		if kind == pebble.InternalKeyKindRangeDelete {
			end := value
			if !bytes.HasPrefix(key, p) || !(bytes.HasPrefix(end, p) || bytes.Equal(end, prefixEnd(p))) {
				return info, fmt.Errorf("%w: range deletion [%q, %q)", ErrForeignWrite, key, end)
			}
			if bytes.Compare(key, end) > 0 {
				return info, fmt.Errorf("%w: range deletion [%q, %q) ends before it starts", ErrCorrupt, key, end)
			}
			// A range deletion of a list's or map's items or of a dropped variable
			// (section 'x') touches no state entry (ABI v1) and no key record, and
			// of the variable records the hot-state cache holds (varcache.go) only
			// heads that the same write sets again (a cleared collection's meta
			// record) or that are never read again (a dropped variable's id is not
			// reused): the cache follows it entry by entry. Any other range
			// deletion of the state (of entries, key records or a key's timers) empties
			// the cache.
			if overlapsSection(key, end, p, sectionValue) || overlapsSection(key, end, p, sectionKeyRec) || overlapsSection(key, end, p, sectionKeyTimer) {
				info.rangeDel = true
			}
			if overlapsSection(key, end, p, sectionOutbox) {
				info.floorStale = true
			}
			if vlog != nil && len(key) > len(p) && key[len(p)] == sectionVarData {
				if ik := replicatedImage(key[len(p)+1:], true); ik != nil {
					vlog.addDrop(ik) // a cleared list
				}
			}
			info.ops++
			continue
		}
		if !bytes.HasPrefix(key, p) || len(key) == len(p) {
			return info, fmt.Errorf("%w: key %q", ErrForeignWrite, key)
		}
		if err := checkReprOp(kind == pebble.InternalKeyKindSet, key[len(p)], key[len(p)+1:], value, log); err != nil {
			return info, fmt.Errorf("key %q: %w", key, err)
		}
		if vlog != nil && cachedVarKey(p, key) {
			logVar(vlog, key[len(p):], kind == pebble.InternalKeyKindSet, value)
		}
		if vlog != nil && key[len(p)] == sectionVarData {
			if ik := replicatedImage(key[len(p)+1:], false); ik != nil {
				vlog.addDrop(ik) // a list's element (or a map's entry) written
			}
		}
		if kind == pebble.InternalKeyKindSet && key[len(p)] == sectionOutbox && floor != nil && bytes.Compare(key, floor) < 0 {
			info.floorStale = true
		}
		info.ops++
	}
	if uint64(info.ops) != uint64(count) {
		return info, fmt.Errorf("%w: batch of %d operations says %d", ErrCorrupt, info.ops, count)
	}
	return info, nil
}

// checkReprOp checks a Set (set) or Delete of rest in section, and records
// a state entry's in log (when not nil).
func checkReprOp(set bool, section byte, rest, value []byte, log *setLog) error {
	switch section {
	case sectionValue:
		var e Entry
		if set {
			var err error
			if e, err = decodeEntry(value); err != nil {
				return err
			}
			if !e.exists() {
				return fmt.Errorf("%w: entry with neither value nor timeout", ErrCorrupt)
			}
		}
		if log != nil {
			log.add(rest, 0, e)
		}
	case sectionTimer:
		if len(rest) < 8 || len(value) > 0 {
			return fmt.Errorf("%w: timer index key", ErrCorrupt)
		}
	case sectionSkip:
		if len(value) > 0 {
			return fmt.Errorf("%w: skipped timeout with a value", ErrCorrupt)
		}
	case sectionInitial:
		if len(rest) > 0 || len(value) > 0 {
			return fmt.Errorf("%w: initial-state mark", ErrCorrupt)
		}
	case sectionTimeMode:
		if len(rest) > 0 || (set && len(value) != 1) {
			return fmt.Errorf("%w: timeout mode record", ErrCorrupt)
		}
	case sectionInputs:
		if len(rest) > 0 {
			return fmt.Errorf("%w: input watermarks key", ErrCorrupt)
		}
		if set {
			if _, err := decodeInputWatermarks(value); err != nil {
				return err
			}
		}
	case sectionAttempt:
		// This runtime's own record of a batch's attempts; a copy from a snapshot is harmless.
	case sectionQuarantine:
		if len(rest) > 0 {
			return fmt.Errorf("%w: quarantine key", ErrCorrupt)
		}
		if set {
			if _, err := decodeQuarantine(value); err != nil {
				return err
			}
		}
	case sectionProgress:
		if len(rest) > 0 {
			return fmt.Errorf("%w: progress key", ErrCorrupt)
		}
		if set {
			if _, err := decodeProgress(value); err != nil {
				return err
			}
		}
	case sectionOutbox:
		id, ok := parseOutboxKey(rest)
		if !ok {
			return fmt.Errorf("%w: outbox key", ErrCorrupt)
		}
		if set {
			e := OutboxEntry{ID: id}
			if err := decodeOutboxValue(value, &e); err != nil {
				return err
			}
		}
	case sectionCatalog:
		if len(rest) > 0 {
			return fmt.Errorf("%w: variable catalog key", ErrCorrupt)
		}
		if set {
			if _, err := decodeCatalog(value); err != nil {
				return err
			}
		}
	case sectionVarData:
		_, _, tag, _, ok := parseVarData(rest)
		if !ok {
			return fmt.Errorf("%w: variable data key", ErrCorrupt)
		}
		if set {
			// A head record is a value (an item) or a meta record: tell them by length.
			if tag == tagHead && len(value) == collMetaLen {
				if _, err := decodeCollMeta(value); err == nil {
					return nil
				}
			}
			if _, _, err := decodeItem(value); err != nil {
				return err
			}
		}
	case sectionTTL:
		if len(rest) < 8 || len(value) > 0 {
			return fmt.Errorf("%w: TTL index key", ErrCorrupt)
		}
		if _, _, _, _, ok := parseVarData(rest[8:]); !ok {
			return fmt.Errorf("%w: TTL index key", ErrCorrupt)
		}
	case sectionKeyRec:
		if set {
			if _, err := decodeKeyRec(value); err != nil {
				return err
			}
		}
	case sectionKeyTimer:
		if _, _, ok := parseKeyTimer(rest); !ok || len(value) > 0 {
			return fmt.Errorf("%w: key timer", ErrCorrupt)
		}
	default:
		return fmt.Errorf("%w: unknown section %q", ErrCorrupt, section)
	}
	return nil
}

// overlapsSection reports whether the range [start, end) holds keys of section of
// the keyspace prefix.
func overlapsSection(start, end, prefix []byte, section byte) bool {
	lo := sectionKey(nil, prefix, section)
	return bytes.Compare(start, prefixEnd(lo)) < 0 && bytes.Compare(end, lo) > 0
}
