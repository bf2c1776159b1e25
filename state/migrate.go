package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// Header names of format version 1, which stored an outbox entry's
// metadata as the NATS headers the engine built. Only the migration reads
// them.
const (
	v1HeaderReason      = "Groupstate-Reason"
	v1HeaderError       = "Groupstate-Error"
	v1HeaderSubject     = "Groupstate-Subject"
	v1HeaderSequence    = "Groupstate-Sequence"
	v1HeaderTimeoutCall = "Groupstate-Timeout-Call"
)

// migrateV1 migrates a store of format version 1 to version 2: it rewrites
// every outbox entry of every deployment from the version-1 value (a
// headers map) to the version-2 one, and records FormatVersion, all in one
// synced Pebble batch. Nothing else changed between the versions. Open
// calls it before the Store is shared, on a writable store.
func (s *Store) migrateV1() error {
	lower := []byte{deploymentTag}
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return err
	}
	defer iter.Close()
	b := s.db.NewBatch()
	defer b.Close()
	var (
		val      []byte
		entries  int
		nDeploys int
	)
	// One seek per deployment to its outbox section, then one to the next
	// deployment: state entries and timers are never read.
	for ok := iter.First(); ok; {
		k := iter.Key()
		if len(k) < 2 || len(k) < 2+int(k[1]) {
			return fmt.Errorf("state: migrate format 1: %w: key %q", ErrCorrupt, k)
		}
		prefix := append([]byte(nil), k[:2+int(k[1])]...)
		section := sectionKey(nil, prefix, sectionOutbox)
		n := 0
		for ok = iter.SeekGE(section); ok && bytes.HasPrefix(iter.Key(), section); ok = iter.Next() {
			var e OutboxEntry
			var idOK bool
			if e.ID, idOK = parseOutboxKey(iter.Key()[len(section):]); !idOK {
				return fmt.Errorf("state: migrate format 1: %w: outbox key %q", ErrCorrupt, iter.Key())
			}
			v, err := iter.ValueAndErr()
			if err != nil {
				return err
			}
			if err := decodeOutboxValueV1(v, &e); err != nil {
				return fmt.Errorf("state: migrate format 1 (deployment %s): %w", prefix[2:], err)
			}
			val = appendOutboxValue(val[:0], &e)
			if err := b.Set(iter.Key(), val, nil); err != nil {
				return err
			}
			n++
		}
		if err := iter.Error(); err != nil {
			return err
		}
		if n > 0 {
			entries += n
			nDeploys++
		}
		end := prefixEnd(prefix)
		if end == nil {
			break
		}
		ok = iter.SeekGE(end)
	}
	if err := iter.Error(); err != nil {
		return err
	}
	if err := b.Set(formatKey, formatValue(FormatVersion), nil); err != nil {
		return err
	}
	if err := s.write(func() error { return b.Commit(pebble.Sync) }); err != nil {
		return fmt.Errorf("state: migrate format 1: %w", err)
	}
	s.opts.Logger.Info("state: migrated store from format version 1", "to", FormatVersion,
		"outbox_entries", entries, "deployments", nDeploys)
	return nil
}

// decodeOutboxValueV1 decodes an outbox value of format version 1 into e,
// for the migration: u8 kind | uvarint len(key) key | uvarint n headers |
// n × (uvarint len(name) name uvarint len(value) value) | payload. The
// headers of the engine's metadata become e's typed fields; others are
// ignored. e.Key and e.Payload alias b.
func decodeOutboxValueV1(b []byte, e *OutboxEntry) error {
	corrupt := func(what string) error {
		return fmt.Errorf("%w: outbox entry %s (format 1): %s", ErrCorrupt, e.ID, what)
	}
	if len(b) < 1 {
		return corrupt("empty")
	}
	e.Kind = OutboxKind(b[0])
	b = b[1:]
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return nil, false
		}
		f := b[w : w+int(n) : w+int(n)]
		b = b[w+int(n):]
		return f, true
	}
	var ok bool
	if e.Key, ok = field(); !ok {
		return corrupt("key")
	}
	nh, w := binary.Uvarint(b)
	if w <= 0 || nh > uint64(len(b)) {
		return corrupt("header count")
	}
	b = b[w:]
	for i := uint64(0); i < nh; i++ {
		name, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return corrupt("header")
		}
		switch string(name) {
		case v1HeaderReason:
			e.Reason = string(v)
		case v1HeaderError:
			e.Error = string(v)
		case v1HeaderSubject:
			e.Subject = string(v)
		case v1HeaderSequence:
			seq, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return corrupt(fmt.Sprintf("header %s: %q is not a sequence number", v1HeaderSequence, v))
			}
			e.Sequence = seq
		case v1HeaderTimeoutCall:
			e.TimeoutCall = string(v) == "true"
		}
	}
	e.Payload = b
	return nil
}
