package state

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Every item written with a TTL (a value, a list element or a map entry of a variable
// whose TTLMs > 0) gets an entry in the TTL index (section 'e'), ordered by expiry:
// P 'e' u64(expiry^sign) followed by the item's key after P 'x'. An entry is not
// deleted when its item is rewritten, cleared or dropped: Batch.ExpireTTL deletes it
// when it finds the item gone or with another expiry.

// ttlChunk is the number of TTL index entries ExpireTTL reads before it writes.
const ttlChunk = 1024

// ExpireTTL removes, in the batch, every item whose TTL expired at nowMs (expiry <=
// nowMs), updating the meta records of their lists and maps and the key records, and
// returns the number of items removed (stale index entries, whose item was rewritten
// or deleted since, are deleted too but not counted). Its cost is proportional to the
// number of index entries that expired. Call it at the end of a micro-batch, once
// its group calls are done: it may not be called while a KeyTxn is open.
func (b *Batch) ExpireTTL(nowMs int64) (removed int, err error) {
	release, err := b.enter()
	if err != nil {
		return 0, err
	}
	defer release()
	d := b.d
	p := d.prefix
	lower := sectionKey(nil, p, sectionTTL)
	n := len(lower) + 8
	if nowMs == 1<<63-1 {
		return 0, fmt.Errorf("state: ExpireTTL: processing time out of range")
	}
	upper := ttlKey(nil, p, nowMs+1, nil)

	metas := map[string]*collMeta{} // by head key
	recs := map[string]*[2]keyRec{} // by group key: as read, as now
	rec := func(key []byte) (*[2]keyRec, error) {
		if r, ok := recs[string(key)]; ok {
			return r, nil
		}
		r0, err := b.keyRec(key)
		if err != nil {
			return nil, err
		}
		r := &[2]keyRec{r0, r0}
		recs[string(key)] = r
		return r, nil
	}
	var batch [][]byte
	for {
		batch = batch[:0]
		iter, err := b.vb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return removed, err
		}
		for ok := iter.First(); ok && len(batch) < ttlChunk; ok = iter.Next() {
			batch = append(batch, bytes.Clone(iter.Key()))
		}
		if err := errors.Join(iter.Error(), iter.Close()); err != nil {
			return removed, err
		}
		if len(batch) == 0 {
			break
		}
		for _, ik := range batch {
			if len(ik) < n {
				return removed, fmt.Errorf("%w: TTL index key %q", ErrCorrupt, ik)
			}
			expiry := int64(bytesToTimer(ik[n-8 : n]))
			rest := ik[n:]
			_, key, tag, sub, ok := parseVarData(rest)
			if !ok {
				return removed, fmt.Errorf("%w: TTL index key %q", ErrCorrupt, ik)
			}
			b.vdel(ik)
			dk := append(sectionKey(nil, p, sectionVarData), rest...)
			raw, found, err := b.readVar(dk)
			if err != nil {
				return removed, err
			}
			if !found {
				continue
			}
			exp, _, err := decodeItem(raw)
			if err != nil {
				return removed, fmt.Errorf("key %q: %w", dk, err)
			}
			if exp != expiry {
				continue
			}
			b.vdel(dk)
			b.dirtyItem(dk)
			removed++
			r, err := rec(key)
			if err != nil {
				return removed, err
			}
			if tag == tagHead {
				if r[1].vars > 0 {
					r[1].vars--
				}
				continue
			}
			hk := append(bytes.Clone(dk[:len(dk)-len(sub)-1]), tagHead)
			m, ok := metas[string(hk)]
			if !ok {
				raw, found, err := b.readVar(hk)
				if err != nil {
					return removed, err
				}
				m = &collMeta{}
				if found {
					if *m, err = decodeCollMeta(raw); err != nil {
						return removed, fmt.Errorf("key %q: %w", hk, err)
					}
				}
				metas[string(hk)] = m
			}
			if m.count > 0 {
				m.count--
				if m.count == 0 && r[1].vars > 0 {
					r[1].vars--
				}
			}
		}
		lower = append(batch[len(batch)-1], 0)
	}
	// In key order, so that the same removals make the same write.
	for _, hk := range slices.Sorted(maps.Keys(metas)) {
		if m := metas[hk]; m.count == 0 {
			b.vdel([]byte(hk))
		} else {
			b.vset([]byte(hk), appendCollMeta(nil, *m))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(recs)) {
		r := recs[key]
		b.putKeyRec([]byte(key), r[0], r[1])
	}
	return removed, nil
}

// bytesToTimer decodes a u64(ts^sign).
func bytesToTimer(b []byte) int64 {
	var u uint64
	for _, c := range b[:8] {
		u = u<<8 | uint64(c)
	}
	return int64(u ^ (1 << 63))
}
