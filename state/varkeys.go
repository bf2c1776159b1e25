package state

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Sections of ABI v2 state (see the package documentation, "Key layout").
const (
	sectionCatalog  = 'c' // the variable catalog
	sectionVarData  = 'x' // variable data: P 'x' u32(var) uvarint(len(key)) key tag [sub]
	sectionTTL      = 'e' // TTL expiry index: P 'e' u64(expiry^sign) u32(var) uvarint(len(key)) key tag [sub]
	sectionKeyRec   = 'k' // per-key record: P 'k' key
	sectionKeyTimer = 'j' // per-key timer index: P 'j' uvarint(len(key)) key u64(ts^sign)
)

// Tags after the group key in a variable's data key.
const (
	tagHead = 0x00 // a value variable's value, or a list's or map's meta record
	tagItem = 0x01 // a list element (then u64 seq) or a map entry (then the map key)
)

// varIDPrefix appends P 'x' u32(id) to dst.
func varIDPrefix(dst, prefix []byte, id uint32) []byte {
	dst = sectionKey(dst, prefix, sectionVarData)
	return binary.BigEndian.AppendUint32(dst, id)
}

// varKeyPrefix appends P 'x' u32(id) uvarint(len(key)) key to dst: every data key of
// the variable for key starts with it.
func varKeyPrefix(dst, prefix []byte, id uint32, key []byte) []byte {
	if dst == nil {
		// Room for the prefix, a head's tag or a list element's tag and seq: one allocation.
		dst = make([]byte, 0, len(prefix)+1+4+binary.MaxVarintLen64+len(key)+1+8)
	}
	dst = varIDPrefix(dst, prefix, id)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// varHeadKey appends the key of a value, or of a list's or map's meta record.
func varHeadKey(dst, prefix []byte, id uint32, key []byte) []byte {
	return append(varKeyPrefix(dst, prefix, id, key), tagHead)
}

// listItemKey appends the key of list element seq.
func listItemKey(dst, prefix []byte, id uint32, key []byte, seq uint64) []byte {
	dst = append(varKeyPrefix(dst, prefix, id, key), tagItem)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// mapItemKey appends the key of map entry mk.
func mapItemKey(dst, prefix []byte, id uint32, key, mk []byte) []byte {
	dst = append(varKeyPrefix(dst, prefix, id, key), tagItem)
	return append(dst, mk...)
}

// parseVarData splits the part of a data key after P 'x'.
func parseVarData(rest []byte) (id uint32, key []byte, tag byte, sub []byte, ok bool) {
	if len(rest) < 4 {
		return 0, nil, 0, nil, false
	}
	id = binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n >= uint64(len(rest)-w) {
		return 0, nil, 0, nil, false
	}
	key = rest[w : w+int(n)]
	tag = rest[w+int(n)]
	sub = rest[w+int(n)+1:]
	switch {
	case tag == tagHead && len(sub) == 0, tag == tagItem:
		return id, key, tag, sub, true
	}
	return 0, nil, 0, nil, false
}

// ttlKey appends P 'e' u64(expiry^sign) followed by dataRest, the part of a data key
// after P 'x'.
func ttlKey(dst, prefix []byte, expiry int64, dataRest []byte) []byte {
	dst = sectionKey(dst, prefix, sectionTTL)
	dst = binary.BigEndian.AppendUint64(dst, timerBits(expiry))
	return append(dst, dataRest...)
}

// keyRecKey appends P 'k' key.
func keyRecKey(dst, prefix, key []byte) []byte {
	if dst == nil {
		dst = make([]byte, 0, len(prefix)+1+len(key))
	}
	return append(sectionKey(dst, prefix, sectionKeyRec), key...)
}

// keyTimerPrefix appends P 'j' uvarint(len(key)) key.
func keyTimerPrefix(dst, prefix, key []byte) []byte {
	dst = sectionKey(dst, prefix, sectionKeyTimer)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// keyTimerKey appends P 'j' uvarint(len(key)) key u64(ts^sign).
func keyTimerKey(dst, prefix, key []byte, ts int64) []byte {
	return binary.BigEndian.AppendUint64(keyTimerPrefix(dst, prefix, key), timerBits(ts))
}

// parseKeyTimer splits the part of a per-key timer key after P 'j'.
func parseKeyTimer(rest []byte) (key []byte, ts int64, ok bool) {
	n, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) != n+8 {
		return nil, 0, false
	}
	key = rest[w : w+int(n)]
	return key, int64(binary.BigEndian.Uint64(rest[w+int(n):]) ^ (1 << 63)), true
}

// An item (a value, a list element or a map value) is u8 flags | [i64 expiry] |
// payload; flags bit 0 says that the expiry (> 0) is present.
const itemExpiry = 1 << 0

// appendItem appends the encoding of an item expiring at expiry (0: never).
func appendItem(dst []byte, expiry int64, payload []byte) []byte {
	if expiry == 0 {
		return append(append(dst, 0), payload...)
	}
	dst = append(dst, itemExpiry)
	dst = binary.BigEndian.AppendUint64(dst, uint64(expiry))
	return append(dst, payload...)
}

// decodeItem decodes an item; payload aliases b.
func decodeItem(b []byte) (expiry int64, payload []byte, err error) {
	if len(b) < 1 || b[0]&^itemExpiry != 0 {
		return 0, nil, fmt.Errorf("%w: state variable item", ErrCorrupt)
	}
	if b[0] == 0 {
		return 0, b[1:], nil
	}
	if len(b) < 9 {
		return 0, nil, fmt.Errorf("%w: state variable item expiry", ErrCorrupt)
	}
	expiry = int64(binary.BigEndian.Uint64(b[1:]))
	if expiry == 0 {
		return 0, nil, fmt.Errorf("%w: state variable item expiry 0", ErrCorrupt)
	}
	return expiry, b[9:], nil
}

// live reports whether an item expiring at expiry (0: never) is visible at nowMs.
func live(expiry, nowMs int64) bool { return expiry == 0 || nowMs < expiry }

// expiryBound is expiry with "never" (0) as the largest value.
func expiryBound(expiry int64) int64 {
	if expiry == 0 {
		return math.MaxInt64
	}
	return expiry
}

// collMeta is the meta record of a list or a map: u8 flags | u64 next | u64 count | i64
// max expiry. count is the number of items stored (expired ones not yet removed
// included); next is the sequence number of a list's next element; maxExp bounds the
// expiry of every item (math.MaxInt64 when one never expires). Flag bit 0 (loose, maps
// only) says that the item with expiry maxExp may be gone, so that maxExp is only an
// upper bound.
type collMeta struct {
	next, count uint64
	maxExp      int64
	loose       bool
}

const collMetaLen = 1 + 8 + 8 + 8

func appendCollMeta(dst []byte, m collMeta) []byte {
	var flags byte
	if m.loose {
		flags = 1
	}
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, m.next)
	dst = binary.BigEndian.AppendUint64(dst, m.count)
	return binary.BigEndian.AppendUint64(dst, uint64(m.maxExp))
}

func decodeCollMeta(b []byte) (collMeta, error) {
	if len(b) != collMetaLen || b[0]&^1 != 0 {
		return collMeta{}, fmt.Errorf("%w: list or map meta record", ErrCorrupt)
	}
	m := collMeta{
		loose:  b[0] == 1,
		next:   binary.BigEndian.Uint64(b[1:]),
		count:  binary.BigEndian.Uint64(b[9:]),
		maxExp: int64(binary.BigEndian.Uint64(b[17:])),
	}
	if m.count == 0 {
		return collMeta{}, fmt.Errorf("%w: empty list or map meta record", ErrCorrupt)
	}
	return m, nil
}

// keyRec is the per-key record: uvarint vars | uvarint timers, the number of variables
// holding content (stored, expired or not) and of timers of the key. A key with
// neither has no record.
type keyRec struct{ vars, timers uint64 }

func (r keyRec) empty() bool { return r.vars == 0 && r.timers == 0 }

func appendKeyRec(dst []byte, r keyRec) []byte {
	dst = binary.AppendUvarint(dst, r.vars)
	return binary.AppendUvarint(dst, r.timers)
}

func decodeKeyRec(b []byte) (keyRec, error) {
	v, w := binary.Uvarint(b)
	if w <= 0 {
		return keyRec{}, fmt.Errorf("%w: key record", ErrCorrupt)
	}
	t, w2 := binary.Uvarint(b[w:])
	if w2 <= 0 || w+w2 != len(b) {
		return keyRec{}, fmt.Errorf("%w: key record", ErrCorrupt)
	}
	r := keyRec{vars: v, timers: t}
	if r.empty() {
		return keyRec{}, fmt.Errorf("%w: empty key record", ErrCorrupt)
	}
	return r, nil
}
