package state

import (
	"encoding/binary"
	"fmt"
)

// Entry is the stored state of one group key.
type Entry struct {
	// Value is the state value; meaningful only when HasValue.
	Value []byte
	// HasValue reports whether the key has a state value. A value may be
	// empty and still present.
	HasValue bool
	// TimeoutMs is the key's timeout timestamp in milliseconds; 0 means no
	// timeout.
	TimeoutMs int64
	// UpdatedMs is when the value last changed (the processing time of the
	// batch that set it), 0 when unknown. Kept only with a value.
	UpdatedMs int64
}

// exists reports whether e is stored at all.
func (e Entry) exists() bool { return e.HasValue || e.TimeoutMs != 0 }

const (
	flagValue   = 1 << 0
	flagTimeout = 1 << 1
	flagUpdated = 1 << 2 // an i64 UpdatedMs follows the timeout

	entryHeaderLen = 9
)

// appendEntry appends the encoding of e (u8 flags | i64 timeout | [i64 updated] | value).
func appendEntry(dst []byte, e Entry) []byte {
	var flags byte
	if e.HasValue {
		flags |= flagValue
	}
	if e.TimeoutMs != 0 {
		flags |= flagTimeout
	}
	if e.HasValue && e.UpdatedMs != 0 {
		flags |= flagUpdated
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.TimeoutMs))
	if flags&flagUpdated != 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.UpdatedMs))
	}
	if e.HasValue {
		dst = append(dst, e.Value...)
	}
	return dst
}

// decodeEntry decodes b. The returned Value aliases b.
func decodeEntry(b []byte) (Entry, error) {
	if len(b) < entryHeaderLen {
		return Entry{}, fmt.Errorf("%w: entry of %d bytes", ErrCorrupt, len(b))
	}
	flags := b[0]
	if flags&^(flagValue|flagTimeout|flagUpdated) != 0 {
		return Entry{}, fmt.Errorf("%w: entry flags %#x", ErrCorrupt, flags)
	}
	e := Entry{TimeoutMs: int64(binary.BigEndian.Uint64(b[1:]))}
	if (flags&flagTimeout != 0) != (e.TimeoutMs != 0) {
		return Entry{}, fmt.Errorf("%w: entry timeout flag mismatch", ErrCorrupt)
	}
	off := entryHeaderLen
	if flags&flagUpdated != 0 {
		if flags&flagValue == 0 || len(b) < off+8 {
			return Entry{}, fmt.Errorf("%w: entry update time without a value", ErrCorrupt)
		}
		e.UpdatedMs = int64(binary.BigEndian.Uint64(b[off:]))
		off += 8
	}
	if flags&flagValue != 0 {
		e.HasValue = true
		e.Value = b[off:]
	} else if len(b) > entryHeaderLen {
		return Entry{}, fmt.Errorf("%w: entry without value flag has %d value bytes", ErrCorrupt, len(b)-entryHeaderLen)
	}
	return e, nil
}
