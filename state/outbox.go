package state

import (
	"encoding/binary"
	"fmt"
	"sort"

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
)

// String returns "output", "dead_letter", "late" or "kind(N)".
func (k OutboxKind) String() string {
	switch k {
	case OutboxOutput:
		return "output"
	case OutboxDeadLetter:
		return "dead_letter"
	case OutboxLate:
		return "late"
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
	Key     []byte            // group key (canonical JSON scalar), may be empty
	Payload []byte            // message body
	Headers map[string]string // e.g. reason, original subject/sequence; may be nil
}

// appendOutboxValue encodes kind, key, headers (sorted by name) and payload.
func appendOutboxValue(dst []byte, kind OutboxKind, key, payload []byte, headers map[string]string) []byte {
	dst = append(dst, byte(kind))
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(headers)))
	if len(headers) > 0 {
		names := make([]string, 0, len(headers))
		for n := range headers {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			v := headers[n]
			dst = binary.AppendUvarint(dst, uint64(len(n)))
			dst = append(dst, n...)
			dst = binary.AppendUvarint(dst, uint64(len(v)))
			dst = append(dst, v...)
		}
	}
	return append(dst, payload...)
}

// decodeOutboxValue decodes b into e. e.Key and e.Payload alias b.
func decodeOutboxValue(b []byte, e *OutboxEntry) error {
	corrupt := func(what string) error { return fmt.Errorf("%w: outbox entry %s: %s", ErrCorrupt, e.ID, what) }
	if len(b) < 1 {
		return corrupt("empty")
	}
	e.Kind = OutboxKind(b[0])
	b = b[1:]
	bytesField := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, false
		}
		f := b[w : w+int(n)]
		b = b[w+int(n):]
		return f, true
	}
	var ok bool
	if e.Key, ok = bytesField(); !ok {
		return corrupt("key")
	}
	nh, w := binary.Uvarint(b)
	if w <= 0 || nh > uint64(len(b)) {
		return corrupt("header count")
	}
	b = b[w:]
	if nh > 0 {
		e.Headers = make(map[string]string, nh)
		for i := uint64(0); i < nh; i++ {
			n, ok1 := bytesField()
			v, ok2 := bytesField()
			if !ok1 || !ok2 {
				return corrupt("header")
			}
			e.Headers[string(n)] = string(v)
		}
	}
	e.Payload = b
	return nil
}

// Outbox calls fn for every pending outbox entry in commit order (batch id,
// then seq). The entry passed to fn is owned by fn: its slices and map are
// copies and may be retained. An error from fn stops the scan and is
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
// been delivered. It is one range deletion from the first pending entry, not
// synced: after a crash some acknowledged entries may reappear and be
// delivered again (which deterministic message ids make harmless).
func (d *Deployment) AckOutbox(upTo OutboxID) error {
	if err := d.acquireWrite(); err != nil {
		return err
	}
	defer d.s.release()
	lower := sectionKey(nil, d.prefix, sectionOutbox)
	sectionEnd := prefixEnd(lower)
	// Start the range at the first pending entry rather than at the section
	// start: successive acks then write disjoint tombstones instead of a
	// growing stack of overlapping ones.
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: sectionEnd})
	if err != nil {
		return err
	}
	var start []byte
	if iter.First() {
		start = append([]byte(nil), iter.Key()...)
	}
	err = iter.Error()
	if cerr := iter.Close(); err == nil {
		err = cerr
	}
	if err != nil || start == nil {
		return err
	}
	var end []byte
	switch {
	case upTo.Seq < ^uint32(0):
		end = outboxKey(nil, d.prefix, OutboxID{BatchID: upTo.BatchID, Seq: upTo.Seq + 1})
	case upTo.BatchID < ^uint64(0):
		end = outboxKey(nil, d.prefix, OutboxID{BatchID: upTo.BatchID + 1})
	default:
		end = sectionEnd
	}
	if string(start) >= string(end) {
		return nil
	}
	return d.s.write(func() error { return d.s.db.DeleteRange(start, end, pebble.NoSync) })
}
