package state

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"
)

// The hot-state cache in front of ABI v2 state (RATIONALE.md, "ABI v2 reads through the
// hot-state cache"). A key transaction's point reads of the records every call of a key
// reads — a value variable's value, a list's or map's meta record (tag head of section
// 'x'), the key's record (section 'k') and whether the key has a timer at a timestamp (its
// per-key timer entry, section 'j': RATIONALE.md, "The join's state on the host") — are
// served, in this order, from:
//
//  1. the batch's overlay: its own writes of those keys, kept beside the indexed batch;
//  2. the store's hot-state cache, under the deployment's variables name (varsDep);
//  3. Pebble itself, not through the indexed batch (the overlay says the batch did not
//     write the key), filling the cache as Deployment.Get does; but a key transaction's
//     read of one of its variables' records loads the key's record first (through the same
//     tiers), and a key whose record counts no variable is not read further
//     (KeyTxn.readOwn).
//
// Every other read (list elements, map entries, a key's list of timers, the timer and TTL
// indexes) goes through the indexed batch as before. Batch.Commit stores the overlay in the cache with the commit
// (write-through, under the stripe's write bracket); ApplyReplicated stores the same
// records of a replicated write. What the overlay cannot follow — a range deletion over
// more than one key's variable (a dropped variable), or a batch rebuilt after a failed
// group (Discard, RevertKeys) that held one — makes it unsafe: the batch's reads go through
// the indexed batch and its commit empties the cache, as Drop does.

// varsDep returns the name the cache keeps d's variable records under: apart from its
// state entries (ABI v1), whose keys are the group keys themselves.
func (d *Deployment) varsDep() string { return d.vdep }

// varsDepOf returns varsDep of deployment name.
func varsDepOf(name string) string { return name + "\x00vars" }

// cachedVarKey reports whether k, a key of d's keyspace, is one of the records the cache
// holds: a variable's head, a key record or a key's timer (section 'j').
func cachedVarKey(prefix, k []byte) bool {
	if len(k) <= len(prefix) {
		return false
	}
	switch k[len(prefix)] {
	case sectionKeyRec:
		return true
	case sectionVarData:
		_, _, tag, _, ok := parseVarData(k[len(prefix)+1:])
		return ok && tag == tagHead
	case sectionKeyTimer:
		_, _, ok := parseKeyTimer(k[len(prefix)+1:])
		return ok
	}
	return false
}

// overlayEntry is the batch's last write of a cached record: its value, or its deletion.
type overlayEntry struct {
	value   []byte
	present bool
}

// varOverlay is a batch's own writes of the cached records (see above).
type varOverlay struct {
	m map[string]overlayEntry
	// unsafe: the batch wrote what the overlay cannot follow; reads go through the
	// indexed batch, and the commit empties the cache.
	unsafe bool
}

func (o *varOverlay) put(k []byte, value []byte, present bool) {
	if o.m == nil {
		o.m = make(map[string]overlayEntry)
	}
	var v []byte
	if present {
		v = bytes.Clone(value)
		if v == nil {
			v = []byte{}
		}
	}
	o.m[string(k)] = overlayEntry{value: v, present: present}
}

// vset sets k to value in the batch's variable writes.
func (b *Batch) vset(k, value []byte) {
	_ = b.vb.Set(k, value, nil)
	if cachedVarKey(b.d.prefix, k) {
		b.ov.put(k, value, true)
	}
}

// vdel deletes k in the batch's variable writes.
func (b *Batch) vdel(k []byte) {
	_ = b.vb.Delete(k, nil)
	if cachedVarKey(b.d.prefix, k) {
		b.ov.put(k, nil, false)
	}
}

// vdelKeyVar deletes every item of variable id of key, and its head, with one range
// deletion: the only cached record in the range is the head.
func (b *Batch) vdelKeyVar(id uint32, key []byte) {
	start := varKeyPrefix(nil, b.d.prefix, id, key)
	_ = b.vb.DeleteRange(start, prefixEnd(start), nil)
	b.ov.put(varHeadKey(nil, b.d.prefix, id, key), nil, false)
}

// vdelRange deletes [lower, upper) in the batch's variable writes, a range the overlay
// does not follow.
func (b *Batch) vdelRange(lower, upper []byte) {
	_ = b.vb.DeleteRange(lower, upper, nil)
	b.ov.unsafe = true
}

// rebuildOverlay makes the overlay anew from the batch's variable writes, after they were
// rebuilt without a failed transaction's (truncateVars, RevertKeys). A fork's overlay holds
// its own writes only: those it started with are its parent's, read there.
func (b *Batch) rebuildOverlay() error {
	unsafe := b.ov.unsafe
	b.ov = varOverlay{unsafe: unsafe}
	b.dirtyImages()
	r := b.vb.Reader()
	for skip := b.seed.count; skip > 0; skip-- {
		if _, _, _, ok, err := r.Next(); err != nil || !ok {
			return err
		}
	}
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		switch kind {
		case pebble.InternalKeyKindSet:
			if cachedVarKey(b.d.prefix, k) {
				b.ov.put(k, v, true)
			}
		case pebble.InternalKeyKindDelete:
			if cachedVarKey(b.d.prefix, k) {
				b.ov.put(k, nil, false)
			}
		default:
			b.ov.unsafe = true
		}
	}
}

// readVar reads k through the batch: its own writes, then the store; a cached record by
// way of the overlay and the hot-state cache.
func (b *Batch) readVar(k []byte) ([]byte, bool, error) {
	d := b.d
	c := d.s.cache
	if c == nil || b.ov.unsafe || !cachedVarKey(d.prefix, k) {
		return getCopy(b.vb, k)
	}
	v, found, known, tok := b.readCached(k)
	if known {
		return v, found, nil
	}
	return b.readStore(k, tok)
}

// readVarCached is readVar without Pebble: known is false when only a read of Pebble (or
// of the indexed batch, for a record the cache does not hold) would tell.
func (b *Batch) readVarCached(k []byte) (v []byte, found, known bool) {
	d := b.d
	if d.s.cache == nil || b.ov.unsafe || !cachedVarKey(d.prefix, k) {
		return nil, false, false
	}
	v, found, known, _ = b.readCached(k)
	return v, found, known
}

// readCached reads the cached record k from the batch's overlay, its parent's, then the
// hot-state cache; when none knows it, tok is the cache read's token for readStore.
func (b *Batch) readCached(k []byte) (v []byte, found, known bool, tok readToken) {
	d := b.d
	if e, ok := b.ov.m[string(k)]; ok {
		if !e.present {
			return nil, false, true, tok
		}
		return bytes.Clone(e.value), true, true, tok
	}
	if p := b.parent; p != nil { // a fork: its parent's writes before the fork
		if e, ok := p.ov.m[string(k)]; ok {
			if !e.present {
				return nil, false, true, tok
			}
			return bytes.Clone(e.value), true, true, tok
		}
	}
	tok = d.stripe.startRead()
	if tok.ok {
		if e, found, hit, _ := d.s.cache.get(d.varsDep(), k[len(d.prefix):], nil); hit {
			if !found {
				return nil, false, true, tok
			}
			if e.Value == nil {
				e.Value = []byte{}
			}
			return e.Value, true, true, tok
		}
	}
	return nil, false, false, tok
}

// readStore reads the cached record k from Pebble, filling the cache (tok: the token of the
// cache read that missed, readCached).
func (b *Batch) readStore(k []byte, tok readToken) ([]byte, bool, error) {
	d := b.d
	c := d.s.cache
	rest := k[len(d.prefix):]
	dep := d.varsDep()
	v, found, err := getCopy(d.s.db, k)
	if err != nil {
		return nil, false, err
	}
	c.fill(d.stripe, tok, dep, rest, Entry{HasValue: found, Value: v}, found)
	return v, found, nil
}

// overlayLog returns the batch's cached records for the cache (nil when the overlay is
// unsafe: the commit empties the cache), in log (reset first).
func (b *Batch) overlayLog(log *setLog) *setLog {
	if b.ov.unsafe {
		return nil
	}
	p := len(b.d.prefix)
	for k, e := range b.ov.m {
		logVar(log, []byte(k[p:]), e.present, e.value)
	}
	b.imagesLog(log)
	return log
}

// logVar adds a write of the cached record rest (a key of the keyspace after its prefix)
// to log: its value, or its absence; a deleted timer is forgotten instead, as a key seldom
// registers a timer it had again.
func logVar(log *setLog, rest []byte, present bool, value []byte) {
	if !present && rest[0] == sectionKeyTimer {
		log.addDrop(rest)
		return
	}
	log.add(rest, 0, Entry{HasValue: present, Value: value})
}

// emptyLog is a log of no writes (never written to).
var emptyLog = &setLog{}

// getLog returns a set log from the store's pool.
func (s *Store) getLog() *setLog {
	if l, _ := s.logs.Get().(*setLog); l != nil {
		return l
	}
	return &setLog{}
}

// putLog returns l to the store's pool.
func (s *Store) putLog(l *setLog) {
	if l != nil && l != emptyLog && cap(l.arena) <= maxPooledLog {
		l.reset()
		s.logs.Put(l)
	}
}
