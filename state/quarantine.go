package state

import (
	"encoding/binary"
	"fmt"
)

// sectionQuarantine holds a deployment's quarantine record (Batch.SetQuarantine).
const sectionQuarantine = 'q'

// MaxQuarantinedKeys bounds the keys of a quarantine record: SetQuarantine keeps the newest.
const MaxQuarantinedKeys = 1000

// QuarantinedKey is a key whose calls kept failing as a whole (a trap, or the time, memory
// or stack limit): its rows are dead-lettered without a call.
type QuarantinedKey struct {
	// Key is the key, in canonical form.
	Key []byte
	// Reason says why: its calls' faults, the last one's error.
	Reason string
	// SinceMs is the processing time of the batch that quarantined it, or the wall clock of
	// the runtime's start that did (the key was running alone when the runtime stopped).
	SinceMs int64
}

// Quarantine is a deployment's quarantined keys, and the revision of the deployment they
// were quarantined under (a later revision starts with none).
type Quarantine struct {
	Revision string
	Keys     []QuarantinedKey
}

// SetQuarantine records q with the batch, replacing the record before it whole; a q without
// keys deletes it. Of more than [MaxQuarantinedKeys] keys the last ones are kept. q is
// encoded at once: the caller may reuse it after SetQuarantine returns.
func (b *Batch) SetQuarantine(q Quarantine) {
	keys := q.Keys
	if len(keys) > MaxQuarantinedKeys {
		keys = keys[len(keys)-MaxQuarantinedKeys:]
	}
	if len(keys) == 0 {
		b.quarantine, b.hasQuarantine = nil, true
		return
	}
	v := []byte{1} // version
	v = appendBytes(v, []byte(q.Revision))
	v = binary.AppendUvarint(v, uint64(len(keys)))
	for _, k := range keys {
		v = appendBytes(v, k.Key)
		v = appendBytes(v, []byte(k.Reason))
		v = binary.BigEndian.AppendUint64(v, uint64(k.SinceMs))
	}
	b.quarantine, b.hasQuarantine = v, true
}

// Quarantine returns the quarantine the last batch that set one recorded (empty when none
// did). It belongs to the caller.
func (d *Deployment) Quarantine() (Quarantine, error) {
	if err := d.acquire(); err != nil {
		return Quarantine{}, err
	}
	defer d.s.release()
	v, found, err := d.s.readValue(sectionKey(nil, d.prefix, sectionQuarantine))
	if err != nil || !found {
		return Quarantine{}, err
	}
	return decodeQuarantine(v)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// decodeQuarantine decodes a record of SetQuarantine.
func decodeQuarantine(v []byte) (Quarantine, error) {
	corrupt := fmt.Errorf("%w: quarantine record of %d bytes", ErrCorrupt, len(v))
	if len(v) == 0 || v[0] != 1 {
		return Quarantine{}, corrupt
	}
	v = v[1:]
	next := func() ([]byte, bool) {
		n, w := binary.Uvarint(v)
		if w <= 0 || n > uint64(len(v)-w) {
			return nil, false
		}
		b := v[w : w+int(n)]
		v = v[w+int(n):]
		return b, true
	}
	rev, ok := next()
	if !ok {
		return Quarantine{}, corrupt
	}
	n, w := binary.Uvarint(v)
	if w <= 0 || n > MaxQuarantinedKeys {
		return Quarantine{}, corrupt
	}
	v = v[w:]
	q := Quarantine{Revision: string(rev), Keys: make([]QuarantinedKey, 0, n)}
	for range n {
		key, ok1 := next()
		reason, ok2 := next()
		if !ok1 || !ok2 || len(v) < 8 {
			return Quarantine{}, corrupt
		}
		q.Keys = append(q.Keys, QuarantinedKey{Key: append([]byte(nil), key...), Reason: string(reason), SinceMs: int64(binary.BigEndian.Uint64(v))})
		v = v[8:]
	}
	if len(v) != 0 {
		return Quarantine{}, corrupt
	}
	return q, nil
}
