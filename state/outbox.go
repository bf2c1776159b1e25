package state

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// OutboxKind says where an outbox entry is to be delivered.
type OutboxKind uint8

const (
	// OutboxOutput is a row emitted by the handler, for the output subject.
	OutboxOutput OutboxKind = 1
	// OutboxDeadLetter is a dead letter, for the dead-letter subject.
	OutboxDeadLetter OutboxKind = 2
	// OutboxLate is a late row, for the late subject.
	OutboxLate OutboxKind = 3
	// OutboxManifest is a batch's manifest (what it read and the time it ran at; see
	// runtime/engine.Manifest), for the deployment's manifest subject.
	OutboxManifest OutboxKind = 4
)

// String returns "output", "dead_letter", "late", "manifest" or "kind(N)".
func (k OutboxKind) String() string {
	switch k {
	case OutboxOutput:
		return "output"
	case OutboxDeadLetter:
		return "dead_letter"
	case OutboxLate:
		return "late"
	case OutboxManifest:
		return "manifest"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// OutboxID identifies an outbox entry: the batch that wrote it and its
// sequence number within that batch (0, 1, 2, ... in AppendOutbox order).
// IDs order entries in commit order.
type OutboxID struct {
	BatchID uint64
	Seq     uint32
}

// Less reports whether id sorts before o.
func (id OutboxID) Less(o OutboxID) bool {
	return id.BatchID < o.BatchID || (id.BatchID == o.BatchID && id.Seq < o.Seq)
}

// String returns "batch.seq".
func (id OutboxID) String() string { return fmt.Sprintf("%d.%d", id.BatchID, id.Seq) }

// OutboxEntry is one pending delivery.
type OutboxEntry struct {
	ID      OutboxID
	Kind    OutboxKind
	Key     []byte // group key (canonical JSON scalar), may be empty
	Payload []byte // message body
	// Reason says why a dead letter or late row is in the outbox (a reason code such as
	// "invalid_json"; empty for outputs).
	Reason string
	// Error is the human-readable error of a dead letter or late row.
	Error string
	// Subject and Sequence are the input subject and stream sequence of the row (empty and 0
	// when unknown, and for outputs).
	Subject  string
	Sequence uint64
	// TimeoutCall marks the dead letter of a failed timeout call (it has no payload).
	TimeoutCall bool
}

// Flags of an outbox value (format version 2; see the package documentation). A
// has-bit is set exactly when its field is non-empty (non-zero for the sequence),
// and only then is the field stored.
const (
	outboxTimeoutCall = 1 << 0
	outboxHasReason   = 1 << 1
	outboxHasError    = 1 << 2
	outboxHasSubject  = 1 << 3
	outboxHasSequence = 1 << 4

	outboxKnownFlags = outboxTimeoutCall | outboxHasReason | outboxHasError | outboxHasSubject | outboxHasSequence
)

// appendOutboxValue appends the value of outbox entry e (all but its ID) to dst.
func appendOutboxValue(dst []byte, e *OutboxEntry) []byte {
	return append(appendOutboxHead(dst, e), e.Payload...)
}

// appendOutboxHead appends the encoding of e up to its payload (which follows it) to dst.
func appendOutboxHead(dst []byte, e *OutboxEntry) []byte {
	var flags byte
	if e.TimeoutCall {
		flags |= outboxTimeoutCall
	}
	if e.Reason != "" {
		flags |= outboxHasReason
	}
	if e.Error != "" {
		flags |= outboxHasError
	}
	if e.Subject != "" {
		flags |= outboxHasSubject
	}
	if e.Sequence != 0 {
		flags |= outboxHasSequence
	}
	dst = append(dst, byte(e.Kind), flags)
	dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
	dst = append(dst, e.Key...)
	for _, f := range [...]string{e.Reason, e.Error, e.Subject} {
		if f != "" {
			dst = binary.AppendUvarint(dst, uint64(len(f)))
			dst = append(dst, f...)
		}
	}
	if e.Sequence != 0 {
		dst = binary.AppendUvarint(dst, e.Sequence)
	}
	return dst
}

// decodeOutboxValue decodes the value b into e, leaving e.ID alone. e.Key and
// e.Payload alias b (e.Key's capacity is cut, so appending to it never
// overwrites what follows); the strings are copies.
func decodeOutboxValue(b []byte, e *OutboxEntry) error {
	corrupt := func(what string) error { return fmt.Errorf("%w: outbox entry %s: %s", ErrCorrupt, e.ID, what) }
	if len(b) < 2 {
		return corrupt("shorter than kind and flags")
	}
	kind, flags := OutboxKind(b[0]), b[1]
	if flags&^outboxKnownFlags != 0 {
		return corrupt(fmt.Sprintf("unknown flags %#x", flags))
	}
	b = b[2:]
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, false
		}
		f := b[w : w+int(n) : w+int(n)]
		b = b[w+int(n):]
		return f, true
	}
	key, ok := field()
	if !ok {
		return corrupt("key")
	}
	var strs [3]string // reason, error, subject: flagged by bits 1, 2, 3
	for i, what := range [...]string{"reason", "error", "subject"} {
		if flags&(outboxHasReason<<i) == 0 {
			continue
		}
		f, ok := field()
		if !ok || len(f) == 0 {
			return corrupt(what)
		}
		strs[i] = string(f)
	}
	var seq uint64
	if flags&outboxHasSequence != 0 {
		var w int
		if seq, w = binary.Uvarint(b); w <= 0 || seq == 0 {
			return corrupt("sequence")
		}
		b = b[w:]
	}
	*e = OutboxEntry{
		ID:          e.ID,
		Kind:        kind,
		Key:         key,
		Payload:     b,
		Reason:      strs[0],
		Error:       strs[1],
		Subject:     strs[2],
		Sequence:    seq,
		TimeoutCall: flags&outboxTimeoutCall != 0,
	}
	return nil
}

// Outbox calls fn for every pending outbox entry in commit order (batch id,
// then seq). The entry passed to fn is owned by fn: its slices and strings
// are copies and may be retained. An error from fn stops the scan and is
// returned. Entries appended by batches committed after the scan started
// are not seen.
func (d *Deployment) Outbox(fn func(OutboxEntry) error) error {
	if err := d.acquire(); err != nil {
		return err
	}
	defer d.s.release()
	lower := sectionKey(nil, d.prefix, sectionOutbox)
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return err
	}
	defer iter.Close()
	for ok := iter.First(); ok; ok = iter.Next() {
		var e OutboxEntry
		var idOK bool
		if e.ID, idOK = parseOutboxKey(iter.Key()[len(lower):]); !idOK {
			return fmt.Errorf("%w: outbox key %q", ErrCorrupt, iter.Key())
		}
		v, err := iter.ValueAndErr()
		if err != nil {
			return err
		}
		if err := decodeOutboxValue(append([]byte(nil), v...), &e); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return iter.Error()
}

// AckOutbox deletes every outbox entry with an id <= upTo, once they have
// been delivered. With a Replicator (see SetReplicator) the deletions are
// replicated first. It is not synced: after a power loss acknowledged entries
// may reappear and be delivered again, which deterministic message ids make
// harmless within the outputs' duplicate window. The next synced Commit makes
// it durable; when none follows soon (the deployment goes idle or stops), call
// SyncAcks.
//
// Entries are deleted one by one, starting where the previous AckOutbox of
// the deployment ended (the store remembers it). Not with a range deletion:
// every range tombstone in a memtable makes the next read of any key
// re-fragment all of the memtable's range tombstones, so one per batch made
// reads slower with every batch until the memtable was flushed, which a
// deployment with little data does rarely. And not from a scan for the first
// live entry: deleted entries stay in Pebble as tombstones until compaction,
// and the scan would walk over all of them.
func (d *Deployment) AckOutbox(upTo OutboxID) error {
	if err := d.lockWrite(); err != nil {
		return err
	}
	defer d.unlockWrite()
	lower := sectionKey(nil, d.prefix, sectionOutbox)
	sectionEnd := prefixEnd(lower)
	var end []byte
	switch {
	case upTo.Seq < ^uint32(0):
		end = outboxKey(nil, d.prefix, OutboxID{BatchID: upTo.BatchID, Seq: upTo.Seq + 1})
	case upTo.BatchID < ^uint64(0):
		end = outboxKey(nil, d.prefix, OutboxID{BatchID: upTo.BatchID + 1})
	default:
		end = sectionEnd
	}
	start := d.s.outboxFloor(d.name)
	if start == nil || string(start) >= string(end) {
		// Not known yet (first ack since the store opened), or ahead of upTo (an ack of
		// entries that came again after a crash): find the first entry. The range starts at
		// it rather than at the section start, so tombstones stay disjoint.
		var err error
		if start, err = d.firstOutboxKey(lower, sectionEnd); err != nil || start == nil {
			return err
		}
	}
	if string(start) >= string(end) {
		return nil
	}
	b := d.s.db.NewBatch()
	defer b.Close()
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return err
	}
	for ok := iter.First(); ok; ok = iter.Next() {
		_ = b.Delete(iter.Key(), nil)
	}
	err = iter.Error()
	if cerr := iter.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if !b.Empty() {
		r := d.replicator()
		var last uint64
		if r != nil {
			p, err := d.progress()
			if err != nil {
				return err
			}
			last = p.BatchID
		}
		opts, err := d.replicate(r, WriteAck, last, b, pebble.NoSync)
		if err != nil {
			return fmt.Errorf("state: ack outbox up to %s (deployment %s): %w", upTo, d.name, err)
		}
		if err := d.s.write(func() error { return b.Commit(opts) }); err != nil {
			return err
		}
	}
	d.s.setOutboxFloor(d.name, end)
	return nil
}

// firstOutboxKey returns the key of the first outbox entry, or nil when there is none.
func (d *Deployment) firstOutboxKey(lower, upper []byte) ([]byte, error) {
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	var first []byte
	if iter.First() {
		first = append([]byte(nil), iter.Key()...)
	}
	err = iter.Error()
	if cerr := iter.Close(); err == nil {
		err = cerr
	}
	return first, err
}

// outboxFloor returns the outbox key below which every entry of deployment was
// acknowledged by this store, or nil when unknown.
func (s *Store) outboxFloor(deployment string) []byte {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	return s.floors[deployment]
}

// setOutboxFloor records the floor of deployment (nil forgets it).
func (s *Store) setOutboxFloor(deployment string, key []byte) {
	s.floorMu.Lock()
	defer s.floorMu.Unlock()
	if key == nil {
		delete(s.floors, deployment)
		return
	}
	if s.floors == nil {
		s.floors = map[string][]byte{}
	}
	s.floors[deployment] = key
}

// SyncAcks makes the acknowledgements made so far durable: it syncs the store's log, which
// holds them (and every other write before it, of any deployment). AckOutbox does not sync,
// and needs no SyncAcks when a synced Commit follows it (the log is sequential, so the
// commit's sync covers the acknowledgement too); call it after the last acknowledgement
// before a deployment goes idle or stops, so that a power loss cannot bring acknowledged
// entries back after the outputs' duplicate window has passed. While the deployment has a
// Replicator it does nothing: its acknowledgements are durable in the replica.
func (d *Deployment) SyncAcks() error {
	if err := d.acquireWrite(); err != nil {
		return err
	}
	defer d.s.release()
	if d.replicator() != nil {
		return nil
	}
	return d.s.write(func() error { return d.s.db.LogData(nil, pebble.Sync) })
}
