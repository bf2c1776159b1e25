package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// KeyTxn is one group call's view of a key's state variables and timers (ABI v2): it
// reads and writes the key's variables (by their index in its Vars) and timers. Reads
// see the transaction's own earlier writes, then what transactions of the same Batch
// committed before it, then the committed store; items whose TTL expired at the
// transaction's processing time are invisible. Writes are staged: Commit keeps them
// in the Batch (visible to its later transactions, and written by Batch.Commit),
// Discard drops them (a failed group call).
//
// Every operation costs O(1) Pebble operations besides the items it returns: an
// append or a map entry's write never reads or writes the rest of the collection.
//
// A KeyTxn is not safe for concurrent use, and neither is its Batch: one goroutine
// drives both. Byte slices passed in are copied; slices returned are owned by the
// caller.
type KeyTxn struct {
	b     *Batch        // nil for a read-only transaction (Deployment.KeyVars)
	d     *Deployment   //
	r     pebble.Reader // the batch's indexed batch, or a snapshot
	vars  *Vars
	key   []byte
	now   int64
	err   error
	done  bool
	mark  txnMark
	metas map[uint32]*txnMeta

	// Of a committed transaction, for Batch.RevertKeys: where the batch's variable writes
	// stood after it, and what it added to the progress counters.
	committed              bool
	endMark                txnMark
	keysDelta, timersDelta int64
	reverts                int // the batch's RevertKeys calls before the commit

	rec, rec0 keyRec
	recLoaded bool
	// heads is what the transaction knows of its value variables' heads: whether each one it
	// read or wrote is stored (expired or not), so that a write need not read it again (nor
	// a continuation of the transaction: Continue).
	heads    []headKnown
	headsArr [2]headKnown // heads' first room: a transaction touches few variables

	buf []byte
}

// headKnown is whether the head of value variable id is stored, as a transaction knows it.
type headKnown struct {
	id     uint32
	stored bool
}

// txnMark is where the batch's variable writes stood when the transaction began.
type txnMark struct {
	len   int
	count uint32
}

type txnMeta struct {
	m     collMeta
	dirty bool
}

// MapEntry is one entry of a map variable.
type MapEntry struct {
	Key, Value []byte
}

// Key begins the transaction of one group call for key at processing time nowMs (the
// batch's T), on the variables vars (from DeclareVars or Deployment.Vars). Only one
// transaction of a batch may be open at a time: end it with Commit or Discard before
// the next Key, DeclareVars, ExpireTTL or Commit of the batch. Errors (a closed batch,
// another transaction open) are returned by the transaction's operations. key is
// copied.
func (b *Batch) Key(vars *Vars, key []byte, nowMs int64) *KeyTxn {
	t := &KeyTxn{b: b, d: b.d, vars: vars, key: bytes.Clone(key), now: nowMs}
	t.heads = t.headsArr[:0]
	if t.key == nil {
		t.key = []byte{}
	}
	if b.tx != nil {
		t.err, t.done = ErrTxnOpen, true
		return t
	}
	if t.err = b.d.acquire(); t.err == nil {
		t.err = b.usable()
		b.d.s.release()
	}
	if t.err != nil {
		t.done = true
		return t
	}
	t.r = b.vb
	t.mark = txnMark{len: len(b.vb.Repr()), count: b.vb.Count()}
	b.tx = t
	return t
}

// enter begins one of the batch's own operations on its variables (not a key transaction's:
// Fork, DeclareVars, ExpiredTimers, ExpireTTL): none may run while a KeyTxn is open
// (ErrTxnOpen). It holds the store open until release is called, and fails as usable does.
func (b *Batch) enter() (release func(), err error) {
	if b.tx != nil {
		return nil, ErrTxnOpen
	}
	if err := b.d.acquire(); err != nil {
		return nil, err
	}
	if err := b.usable(); err != nil {
		b.d.s.release()
		return nil, err
	}
	return b.d.s.release, nil
}

// usable returns the batch's error, if any, and makes sure it has its indexed batch
// of variable writes.
func (b *Batch) usable() error {
	if b.err != nil {
		return b.err
	}
	if b.pb == nil && b.parent == nil {
		return ErrBatchDone
	}
	if b.vb == nil {
		b.vb = b.d.s.db.NewIndexedBatch()
	}
	return nil
}

// catalog returns the batch's view of the variable catalog.
func (b *Batch) catalog() (*catalog, error) {
	if b.cat == nil {
		c, err := readCatalog(b.vb, b.d.prefix)
		if err != nil {
			return nil, err
		}
		b.cat = c
	}
	return b.cat, nil
}

// keyRec reads key's record through the batch.
func (b *Batch) keyRec(key []byte) (keyRec, error) {
	raw, found, err := b.readVar(keyRecKey(nil, b.d.prefix, key))
	if err != nil || !found {
		return keyRec{}, err
	}
	return decodeKeyRec(raw)
}

// putKeyRec writes key's record next, which was prev, and counts the change in the
// progress counters.
func (b *Batch) putKeyRec(key []byte, prev, next keyRec) {
	if prev == next {
		return
	}
	k := keyRecKey(nil, b.d.prefix, key)
	if next.empty() {
		b.vdel(k)
	} else {
		b.vset(k, appendKeyRec(nil, next))
	}
	b.keysDelta += b2i(!next.empty()) - b2i(!prev.empty())
	b.timersDelta += b2i(next.timers > 0) - b2i(prev.timers > 0)
}

// truncateVars drops the variable writes made after m (a discarded transaction). A
// Pebble batch cannot be cut, so the indexed batch is rebuilt from the head of its
// representation: a cost in the size of the batch, paid only by failed group calls.
func (b *Batch) truncateVars(m txnMark) error {
	repr := b.vb.Repr()
	if len(repr) == m.len {
		return nil
	}
	nb := b.d.s.db.NewIndexedBatch()
	if m.count > 0 {
		data := slices.Clone(repr[:m.len])
		binary.LittleEndian.PutUint32(data[8:12], m.count)
		tmp := b.d.s.db.NewBatch()
		err := tmp.SetRepr(data)
		if err == nil {
			err = nb.Apply(tmp, nil)
		}
		_ = tmp.Close()
		if err != nil {
			_ = nb.Close()
			return err
		}
	}
	_ = b.vb.Close()
	b.vb = nb
	return b.rebuildOverlay()
}

// Continue begins a transaction of t's key, at t's time and on t's variables, in t's batch,
// that knows what t knew: the key's record, the meta records of its lists and maps and
// whether each value variable it read or wrote is stored. It spares a group whose writes come
// after its guest call (ABI v2: the ops of the call's result) the reads that its transaction
// during the call already made. t must have committed, and no transaction committed after it
// may have written t's key (a batch calls each key at most once per phase); when the batch
// reverted transactions since t committed (RevertKeys, which may have reverted t), or t did
// not commit, the transaction knows nothing, as one begun by Key. The rules of Key apply.
func (t *KeyTxn) Continue() *KeyTxn {
	if t.b == nil {
		return &KeyTxn{d: t.d, vars: t.vars, key: t.key, now: t.now, err: ErrReadOnly, done: true}
	}
	n := t.b.Key(t.vars, t.key, t.now)
	if n.done || !t.committed || t.reverts != t.b.reverts {
		return n
	}
	n.rec, n.rec0, n.recLoaded = t.rec, t.rec, t.recLoaded
	n.heads = append(n.heads, t.heads...)
	if len(t.metas) > 0 {
		n.metas = make(map[uint32]*txnMeta, len(t.metas))
		for id, m := range t.metas {
			n.metas[id] = &txnMeta{m: m.m}
		}
	}
	return n
}

// head returns what the transaction knows of value variable id's head.
func (t *KeyTxn) head(id uint32) (known, stored bool) {
	for _, h := range t.heads {
		if h.id == id {
			return true, h.stored
		}
	}
	return false, false
}

// setHead records whether value variable id's head is stored.
func (t *KeyTxn) setHead(id uint32, stored bool) {
	for i := range t.heads {
		if t.heads[i].id == id {
			t.heads[i].stored = stored
			return
		}
	}
	t.heads = append(t.heads, headKnown{id: id, stored: stored})
}

// readOwn reads k, a head or an item of one of the key's variables, as read does, but
// without reading the store when the key's record says that none of the key's variables
// holds anything (stored items, expired or not; as hasTimer does for timers): what the
// batch's overlay or the hot-state cache knows of k is read first; otherwise the key's
// record is loaded, and only a key whose record counts a variable has k read from the store.
// A key seen for the first time then costs one read of the store, its record's, for all of
// its variables. A read-only transaction (no batch) reads k.
func (t *KeyTxn) readOwn(k []byte) ([]byte, bool, error) {
	if t.b == nil {
		return t.read(k)
	}
	if v, found, known := t.b.readVarCached(k); known {
		return v, found, nil
	}
	if err := t.loadRec(); err != nil {
		return nil, false, err
	}
	if t.rec.vars == 0 {
		return nil, false, nil
	}
	return t.b.readVar(k)
}

// getCopy gets key through r and copies its value.
func getCopy(r pebble.Reader, key []byte) ([]byte, bool, error) {
	raw, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v := bytes.Clone(raw)
	if v == nil {
		v = []byte{}
	}
	return v, true, closer.Close()
}

// begin starts an operation on variable v of kind kind (0: a timer operation): it
// returns the variable's id and TTL. end must follow when it returns nil.
func (t *KeyTxn) begin(v int, kind VarKind, write bool) (id uint32, ttl int64, err error) {
	if t.done {
		if t.err != nil {
			return 0, 0, t.err
		}
		return 0, 0, ErrTxnDone
	}
	if write && t.b == nil {
		return 0, 0, ErrReadOnly
	}
	if kind != 0 {
		if v < 0 || v >= t.vars.Len() {
			return 0, 0, fmt.Errorf("%w: no variable %d", ErrVarOp, v)
		}
		if d := t.vars.decls[v]; d.Kind != kind {
			return 0, 0, fmt.Errorf("%w: state variable %s is a %s, not a %s", ErrVarOp, d.Name, d.Kind, kind)
		}
		id, ttl = t.vars.ids[v], t.vars.decls[v].TTLMs
	}
	if t.b != nil {
		if err := t.d.acquire(); err != nil {
			return 0, 0, err
		}
	}
	return id, ttl, nil
}

func (t *KeyTxn) end() {
	if t.b != nil {
		t.d.s.release()
	}
}

// expiry is the expiry of an item written now with TTL ttl (0: never).
func (t *KeyTxn) expiry(ttl int64) int64 {
	if ttl <= 0 {
		return 0
	}
	if e := t.now + ttl; e != 0 {
		return e
	}
	return 1
}

// loadRec loads the key's record once.
func (t *KeyTxn) loadRec() error {
	if t.recLoaded {
		return nil
	}
	r, err := t.b.keyRec(t.key)
	if err != nil {
		return err
	}
	t.rec, t.rec0, t.recLoaded = r, r, true
	return nil
}

// addVars counts a variable of the key gaining (+1) or losing (-1) content.
func (t *KeyTxn) addVars(delta int) error {
	if err := t.loadRec(); err != nil {
		return err
	}
	if delta > 0 {
		t.rec.vars++
	} else if t.rec.vars > 0 {
		t.rec.vars--
	}
	return nil
}

// setItem writes a data item (and its TTL index entry when it expires).
func (t *KeyTxn) setItem(k []byte, expiry int64, payload []byte) {
	p := t.d.prefix
	t.buf = appendItem(t.buf[:0], expiry, payload)
	t.b.vset(k, t.buf)
	if expiry != 0 {
		t.b.vset(ttlKey(nil, p, expiry, k[len(p)+1:]), nil)
	}
}

// read reads k as the transaction sees it: through its batch (Batch.readVar), or a
// read-only transaction's snapshot.
func (t *KeyTxn) read(k []byte) ([]byte, bool, error) {
	if t.b != nil {
		return t.b.readVar(k)
	}
	return getCopy(t.r, k)
}

// getItem reads a data item: found tells whether it is stored (expired or not).
func (t *KeyTxn) getItem(k []byte) (expiry int64, payload []byte, found bool, err error) {
	raw, found, err := t.readOwn(k)
	if err != nil || !found {
		return 0, nil, false, err
	}
	expiry, payload, err = decodeItem(raw)
	if err != nil {
		return 0, nil, false, fmt.Errorf("key %q: %w", t.key, err)
	}
	return expiry, payload, true, nil
}

// meta returns the meta record of list or map id, read once per transaction.
func (t *KeyTxn) meta(id uint32) (*txnMeta, error) {
	if m, ok := t.metas[id]; ok {
		return m, nil
	}
	raw, found, err := t.readOwn(varHeadKey(nil, t.d.prefix, id, t.key))
	if err != nil {
		return nil, err
	}
	m := &txnMeta{}
	if found {
		if m.m, err = decodeCollMeta(raw); err != nil {
			return nil, fmt.Errorf("key %q: %w", t.key, err)
		}
	}
	if t.metas == nil {
		t.metas = map[uint32]*txnMeta{}
	}
	t.metas[id] = m
	return m, nil
}

// ValueGet returns value variable v's value; present is false when it has none (or
// it expired).
func (t *KeyTxn) ValueGet(v int) (value []byte, present bool, err error) {
	id, _, err := t.begin(v, VarValue, false)
	if err != nil {
		return nil, false, err
	}
	defer t.end()
	if known, stored := t.head(id); known && !stored {
		return nil, false, nil
	}
	exp, payload, found, err := t.getItem(varHeadKey(nil, t.d.prefix, id, t.key))
	if err != nil {
		return nil, false, err
	}
	t.setHead(id, found)
	if !found || !live(exp, t.now) {
		return nil, false, nil
	}
	return payload, true, nil
}

// ValueExists reports whether value variable v has a value.
func (t *KeyTxn) ValueExists(v int) (bool, error) {
	_, ok, err := t.ValueGet(v)
	return ok, err
}

// ValueSet sets value variable v to value (which may be empty).
func (t *KeyTxn) ValueSet(v int, value []byte) error {
	id, ttl, err := t.begin(v, VarValue, true)
	if err != nil {
		return err
	}
	defer t.end()
	k := varHeadKey(nil, t.d.prefix, id, t.key)
	known, found := t.head(id)
	if !known {
		if _, _, found, err = t.getItem(k); err != nil {
			return err
		}
	}
	if !found {
		if err := t.addVars(+1); err != nil {
			return err
		}
	}
	t.setItem(k, t.expiry(ttl), value)
	t.setHead(id, true)
	return nil
}

// ValueClear removes value variable v's value.
func (t *KeyTxn) ValueClear(v int) error {
	id, _, err := t.begin(v, VarValue, true)
	if err != nil {
		return err
	}
	defer t.end()
	k := varHeadKey(nil, t.d.prefix, id, t.key)
	known, found := t.head(id)
	if !known {
		if _, _, found, err = t.getItem(k); err != nil {
			return err
		}
	}
	if !found {
		t.setHead(id, false)
		return nil
	}
	if err := t.addVars(-1); err != nil {
		return err
	}
	t.b.vdel(k)
	t.setHead(id, false)
	return nil
}

// pointClearMax is the largest collection a clear deletes item by item rather than
// with a range deletion. Range tombstones are not free: each one added to a batch or
// a memtable makes the next read re-fragment all of them (see AckOutbox), so a
// handler that replaces a short list on every call (ListPut) would slow every read
// down until the memtable is flushed. Up to pointClearMax items, reading their keys
// costs less.
const pointClearMax = 64

// clearColl deletes every item of list or map id: a range deletion of the key's
// part of the variable, or point deletions when it has at most pointClearMax items.
// Nothing is written when it has none.
func (t *KeyTxn) clearColl(id uint32, list bool) error {
	m, err := t.meta(id)
	if err != nil {
		return err
	}
	if m.m.count == 0 {
		return nil
	}
	if err := t.addVars(-1); err != nil {
		return err
	}
	var img *listImage
	if list {
		if img, err = t.readImage(id, m.m.count); err != nil {
			return err
		}
		defer t.resetImage(id)
	}
	switch {
	case m.m.count > pointClearMax:
		t.b.vdelKeyVar(id, t.key)
	case img != nil:
		var k []byte
		for _, seq := range img.seqs {
			k = listItemKey(k[:0], t.d.prefix, id, t.key, seq)
			t.b.vdel(k)
		}
	default:
		lower, upper := t.itemsBounds(id)
		iter, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return err
		}
		keys := make([][]byte, 0, m.m.count)
		for ok := iter.First(); ok; ok = iter.Next() {
			keys = append(keys, bytes.Clone(iter.Key()))
		}
		if err := errors.Join(iter.Error(), iter.Close()); err != nil {
			return err
		}
		for _, k := range keys {
			t.b.vdel(k)
		}
	}
	m.m, m.dirty = collMeta{}, true
	return nil
}

// itemsBounds returns the bounds of the items of variable id of the key.
func (t *KeyTxn) itemsBounds(id uint32) (lower, upper []byte) {
	lower = append(varKeyPrefix(nil, t.d.prefix, id, t.key), tagItem)
	return lower, prefixEnd(lower)
}

// ListRead returns list variable v's elements from cursor on (0: the first) and the
// cursor of the next element (0: none left). It returns at least one element when any
// is left, and otherwise stops before the elements' bytes (each counting its length
// plus 4, its ABI length prefix) would pass maxBytes. Cursors are valid within the
// transaction only.
func (t *KeyTxn) ListRead(v int, cursor uint64, maxBytes int) (elems [][]byte, next uint64, err error) {
	id, _, err := t.begin(v, VarList, false)
	if err != nil {
		return nil, 0, err
	}
	defer t.end()
	m, err := t.meta(id)
	if err != nil || m.m.count == 0 {
		return nil, 0, err
	}
	if img, err := t.readImage(id, m.m.count); err != nil || img != nil {
		if err != nil {
			return nil, 0, err
		}
		elems, next, err = img.read(cursor, maxBytes, t.now)
		if err != nil {
			err = fmt.Errorf("key %q: %w", t.key, err)
		}
		return elems, next, err
	}
	lower, upper := t.itemsBounds(id)
	n := len(lower)
	if cursor > 0 {
		lower = binary.BigEndian.AppendUint64(lower, cursor-1)
	}
	iter, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, 0, err
	}
	defer iter.Close()
	size := 0
	for ok := iter.First(); ok; ok = iter.Next() {
		k := iter.Key()
		if len(k) != n+8 {
			return nil, 0, fmt.Errorf("%w: list element key %q", ErrCorrupt, k)
		}
		raw, err := iter.ValueAndErr()
		if err != nil {
			return nil, 0, err
		}
		exp, payload, err := decodeItem(raw)
		if err != nil {
			return nil, 0, err
		}
		if !live(exp, t.now) {
			continue
		}
		if len(elems) > 0 && size+len(payload)+4 > maxBytes {
			return elems, binary.BigEndian.Uint64(k[n:]) + 1, nil
		}
		size += len(payload) + 4
		elems = append(elems, bytes.Clone(payload))
	}
	return elems, 0, iter.Error()
}

// ListAppend appends elems to list variable v.
func (t *KeyTxn) ListAppend(v int, elems ...[]byte) error {
	id, ttl, err := t.begin(v, VarList, true)
	if err != nil {
		return err
	}
	defer t.end()
	return t.appendList(id, ttl, elems)
}

func (t *KeyTxn) appendList(id uint32, ttl int64, elems [][]byte) error {
	if len(elems) == 0 {
		return nil
	}
	m, err := t.meta(id)
	if err != nil {
		return err
	}
	exp := t.expiry(ttl)
	count0 := m.m.count
	if m.m.count == 0 {
		if err := t.addVars(+1); err != nil {
			return err
		}
		m.m.maxExp = expiryBound(exp)
	}
	m.m.maxExp = max(m.m.maxExp, expiryBound(exp))
	img := t.writeImage(id, count0)
	var k []byte
	for _, e := range elems {
		k = listItemKey(k[:0], t.d.prefix, id, t.key, m.m.next)
		t.setItem(k, exp, e)
		if img != nil {
			img.set(m.m.next, t.buf) // the item setItem wrote
		}
		m.m.next++
		m.m.count++
	}
	imageWritten(img)
	m.dirty = true
	return nil
}

// ListPut replaces list variable v's elements with elems (none: the list is cleared).
func (t *KeyTxn) ListPut(v int, elems ...[]byte) error {
	id, ttl, err := t.begin(v, VarList, true)
	if err != nil {
		return err
	}
	defer t.end()
	if err := t.clearColl(id, true); err != nil {
		return err
	}
	return t.appendList(id, ttl, elems)
}

// ListClear removes every element of list variable v: one range deletion (point
// deletions for a short list).
func (t *KeyTxn) ListClear(v int) error {
	id, _, err := t.begin(v, VarList, true)
	if err != nil {
		return err
	}
	defer t.end()
	return t.clearColl(id, true)
}

// ListDropFirst removes list variable v's first n elements, as ListRead returns them:
// elements whose TTL expired are not counted, and those stored among or before the first
// n are removed with them. n = 0 does nothing. A negative n, or one above the number of
// the list's elements, is refused (ErrVarOp) and changes nothing. It reads the keys of
// the elements it removes and writes their deletions and the meta record, never the rest
// of the list, except to find the largest expiry left when the elements removed held it.
func (t *KeyTxn) ListDropFirst(v int, n int) error {
	id, _, err := t.begin(v, VarList, true)
	if err != nil {
		return err
	}
	defer t.end()
	name := t.vars.decls[v].Name
	if n < 0 {
		return fmt.Errorf("%w: drop the first %d elements of state variable %s: a negative count", ErrVarOp, n, name)
	}
	if n == 0 {
		return nil
	}
	m, err := t.meta(id)
	if err != nil {
		return err
	}
	if m.m.count == 0 {
		return fmt.Errorf("%w: drop the first %d elements of state variable %s, which has 0", ErrVarOp, n, name)
	}
	img, err := t.readImage(id, m.m.count)
	if err != nil {
		return err
	}
	if img != nil {
		return t.dropFirstImage(id, m, img, n, name)
	}
	t.dirtyImage(id)
	lower, upper := t.itemsBounds(id)
	iter, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer iter.Close()
	keys := make([][]byte, 0, min(uint64(n), m.m.count))
	seen, dropMax := 0, int64(0) // the live elements seen, the largest expiry bound dropped
	ok := iter.First()
	for ; ok && seen < n; ok = iter.Next() {
		exp, err := listIterItem(iter, len(lower))
		if err != nil {
			return err
		}
		if live(exp, t.now) {
			seen++
		}
		dropMax = max(dropMax, expiryBound(exp))
		keys = append(keys, bytes.Clone(iter.Key()))
	}
	if err := iter.Error(); err != nil {
		return err
	}
	if seen < n {
		return fmt.Errorf("%w: drop the first %d elements of state variable %s, which has %d", ErrVarOp, n, name, seen)
	}
	left := m.m
	left.count -= uint64(len(keys))
	if left.count > 0 && dropMax == m.m.maxExp {
		// The largest expiry may have gone with the elements removed: find the largest left,
		// from the end (where it is unless the variable's TTL changed), stopping at the old
		// bound.
		left.maxExp = 0
		last := keys[len(keys)-1]
		for ok := iter.Last(); ok && bytes.Compare(iter.Key(), last) > 0; ok = iter.Prev() {
			exp, err := listIterItem(iter, len(lower))
			if err != nil {
				return err
			}
			if left.maxExp = max(left.maxExp, expiryBound(exp)); left.maxExp == m.m.maxExp {
				break
			}
		}
		if err := iter.Error(); err != nil {
			return err
		}
	}
	for _, k := range keys {
		t.b.vdel(k)
	}
	return t.leaveList(m, left)
}

// leaveList sets list meta m to left, what a drop of its first elements leaves: a list left
// empty has a fresh meta record and no longer counts in the key's record.
func (t *KeyTxn) leaveList(m *txnMeta, left collMeta) error {
	if left.count == 0 {
		left = collMeta{}
		if err := t.addVars(-1); err != nil {
			return err
		}
	}
	m.m, m.dirty = left, true
	return nil
}

// dropFirstImage is ListDropFirst of list id on the batch's image of it, which it updates.
func (t *KeyTxn) dropFirstImage(id uint32, m *txnMeta, img *listImage, n int, name string) error {
	exps := make([]int64, len(img.items))
	for i, item := range img.items {
		exp, _, err := decodeItem(item)
		if err != nil {
			return fmt.Errorf("key %q: %w", t.key, err)
		}
		exps[i] = exp
	}
	drop, seen, dropMax := 0, 0, int64(0)
	for ; drop < len(exps) && seen < n; drop++ {
		if live(exps[drop], t.now) {
			seen++
		}
		dropMax = max(dropMax, expiryBound(exps[drop]))
	}
	if seen < n {
		return fmt.Errorf("%w: drop the first %d elements of state variable %s, which has %d", ErrVarOp, n, name, seen)
	}
	left := m.m
	left.count -= uint64(drop)
	if left.count > 0 && dropMax == m.m.maxExp {
		left.maxExp = 0
		for i := len(exps) - 1; i >= drop; i-- {
			if left.maxExp = max(left.maxExp, expiryBound(exps[i])); left.maxExp == m.m.maxExp {
				break
			}
		}
	}
	var k []byte
	for _, seq := range img.seqs[:drop] {
		k = listItemKey(k[:0], t.d.prefix, id, t.key, seq)
		t.b.vdel(k)
	}
	img.seqs, img.items, img.cached = slices.Delete(img.seqs, 0, drop), slices.Delete(img.items, 0, drop), false
	img.size = 0
	for _, item := range img.items {
		img.size += len(item)
	}
	return t.leaveList(m, left)
}

// listIterItem decodes the list element at iter (whose keys of the list's elements are
// lowerLen + 8 bytes long) and returns its expiry.
func listIterItem(iter *pebble.Iterator, lowerLen int) (int64, error) {
	if len(iter.Key()) != lowerLen+8 {
		return 0, fmt.Errorf("%w: list element key %q", ErrCorrupt, iter.Key())
	}
	raw, err := iter.ValueAndErr()
	if err != nil {
		return 0, err
	}
	exp, _, err := decodeItem(raw)
	return exp, err
}

// ListExists reports whether list variable v has an element that has not expired:
// one read of the list's meta record (a list's elements are only appended, so the
// largest expiry is held by an element still stored, or all have expired).
func (t *KeyTxn) ListExists(v int) (bool, error) {
	id, _, err := t.begin(v, VarList, false)
	if err != nil {
		return false, err
	}
	defer t.end()
	m, err := t.meta(id)
	if err != nil {
		return false, err
	}
	return m.m.count > 0 && t.now < m.m.maxExp, nil
}

// MapGet returns the value of map key mk in map variable v; present is false when it
// has none (or it expired).
func (t *KeyTxn) MapGet(v int, mk []byte) (value []byte, present bool, err error) {
	id, _, err := t.begin(v, VarMap, false)
	if err != nil {
		return nil, false, err
	}
	defer t.end()
	exp, payload, found, err := t.getItem(mapItemKey(nil, t.d.prefix, id, t.key, mk))
	if err != nil || !found || !live(exp, t.now) {
		return nil, false, err
	}
	return payload, true, nil
}

// MapContains reports whether map variable v has an entry for mk.
func (t *KeyTxn) MapContains(v int, mk []byte) (bool, error) {
	_, ok, err := t.MapGet(v, mk)
	return ok, err
}

// MapSet sets the entry mk of map variable v to value: one read of the entry (is it
// new?) and one write, whatever the map's size.
func (t *KeyTxn) MapSet(v int, mk, value []byte) error {
	id, ttl, err := t.begin(v, VarMap, true)
	if err != nil {
		return err
	}
	defer t.end()
	m, err := t.meta(id)
	if err != nil {
		return err
	}
	k := mapItemKey(nil, t.d.prefix, id, t.key, mk)
	oldExp, _, found, err := t.getItem(k)
	if err != nil {
		return err
	}
	exp := t.expiry(ttl)
	bound := expiryBound(exp)
	switch {
	case m.m.count == 0:
		if err := t.addVars(+1); err != nil {
			return err
		}
		m.m = collMeta{maxExp: bound}
	case bound >= m.m.maxExp:
		m.m.maxExp, m.m.loose = bound, false
	case found && expiryBound(oldExp) == m.m.maxExp:
		m.m.loose = true // the entry holding the largest expiry now expires earlier
	}
	if !found {
		m.m.count++
	}
	m.dirty = true
	t.setItem(k, exp, value)
	return nil
}

// MapRemove removes the entry mk of map variable v, if any.
func (t *KeyTxn) MapRemove(v int, mk []byte) error {
	id, _, err := t.begin(v, VarMap, true)
	if err != nil {
		return err
	}
	defer t.end()
	m, err := t.meta(id)
	if err != nil || m.m.count == 0 {
		return err
	}
	k := mapItemKey(nil, t.d.prefix, id, t.key, mk)
	oldExp, _, found, err := t.getItem(k)
	if err != nil || !found {
		return err
	}
	t.b.vdel(k)
	m.m.count--
	m.dirty = true
	if m.m.count == 0 {
		m.m = collMeta{}
		return t.addVars(-1)
	}
	if expiryBound(oldExp) == m.m.maxExp {
		m.m.loose = true
	}
	return nil
}

// MapRead returns map variable v's entries in bytewise map-key order, from the entry
// cursor on (empty: the first), and whether more follow, next being the cursor of the
// next one. It returns at least one entry when any is left, and otherwise stops before
// the entries' bytes (each counting its key and value lengths plus 8, their ABI
// length prefixes) would pass maxBytes. Cursors are valid within the transaction only.
func (t *KeyTxn) MapRead(v int, cursor []byte, maxBytes int) (entries []MapEntry, next []byte, more bool, err error) {
	id, _, err := t.begin(v, VarMap, false)
	if err != nil {
		return nil, nil, false, err
	}
	defer t.end()
	m, err := t.meta(id)
	if err != nil || m.m.count == 0 {
		return nil, nil, false, err
	}
	lower, upper := t.itemsBounds(id)
	n := len(lower)
	lower = append(lower, cursor...)
	iter, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, nil, false, err
	}
	defer iter.Close()
	size := 0
	for ok := iter.First(); ok; ok = iter.Next() {
		mk := iter.Key()[n:]
		raw, err := iter.ValueAndErr()
		if err != nil {
			return nil, nil, false, err
		}
		exp, payload, err := decodeItem(raw)
		if err != nil {
			return nil, nil, false, err
		}
		if !live(exp, t.now) {
			continue
		}
		sz := len(mk) + len(payload) + 8
		if len(entries) > 0 && size+sz > maxBytes {
			return entries, bytes.Clone(mk), true, nil
		}
		size += sz
		entries = append(entries, MapEntry{Key: bytes.Clone(mk), Value: bytes.Clone(payload)})
	}
	return entries, nil, false, iter.Error()
}

// MapClear removes every entry of map variable v: one range deletion (point
// deletions for a small map).
func (t *KeyTxn) MapClear(v int) error {
	id, _, err := t.begin(v, VarMap, true)
	if err != nil {
		return err
	}
	defer t.end()
	return t.clearColl(id, false)
}

// MapExists reports whether map variable v has an entry that has not expired. It
// reads the map's meta record, which answers alone unless the entry with the largest
// expiry was removed or rewritten with an earlier one; then it scans from the first
// entry to the first live one (the expired entries before it are those not yet
// removed by Batch.ExpireTTL).
func (t *KeyTxn) MapExists(v int) (bool, error) {
	id, _, err := t.begin(v, VarMap, false)
	if err != nil {
		return false, err
	}
	defer t.end()
	m, err := t.meta(id)
	if err != nil || m.m.count == 0 || t.now >= m.m.maxExp {
		return false, err
	}
	if !m.m.loose {
		return true, nil
	}
	lower, upper := t.itemsBounds(id)
	iter, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return false, err
	}
	defer iter.Close()
	for ok := iter.First(); ok; ok = iter.Next() {
		raw, err := iter.ValueAndErr()
		if err != nil {
			return false, err
		}
		exp, _, err := decodeItem(raw)
		if err != nil {
			return false, err
		}
		if live(exp, t.now) {
			return true, nil
		}
	}
	return false, iter.Error()
}

// Commit keeps the transaction's writes in the batch, where its later transactions
// see them and Batch.Commit writes them, and ends the transaction.
func (t *KeyTxn) Commit() error {
	if t.done {
		if t.err != nil {
			return t.err
		}
		return ErrTxnDone
	}
	t.done = true
	if t.b == nil {
		return nil
	}
	t.b.tx = nil
	keys0, timers0 := t.b.keysDelta, t.b.timersDelta
	defer func() {
		t.committed, t.reverts = true, t.b.reverts
		t.endMark = txnMark{len: len(t.b.vb.Repr()), count: t.b.vb.Count()}
		t.keysDelta, t.timersDelta = t.b.keysDelta-keys0, t.b.timersDelta-timers0
	}()
	p := t.d.prefix
	ids := make([]uint32, 0, len(t.metas))
	for id, m := range t.metas {
		if m.dirty {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		m := t.metas[id]
		k := varHeadKey(nil, p, id, t.key)
		if m.m.count == 0 {
			t.b.vdel(k)
		} else {
			t.b.vset(k, appendCollMeta(nil, m.m))
		}
	}
	if t.recLoaded {
		t.b.putKeyRec(t.key, t.rec0, t.rec)
	}
	return nil
}

// Discard drops the transaction's writes and ends it. It is safe to call after
// Commit (it does nothing then) and more than once. A Pebble batch cannot be cut
// short, so a Discard after writes rebuilds the batch's indexed batch from the
// writes before the transaction: a cost in the size of the batch's variable writes,
// paid by failed group calls only. If that fails, the batch is unusable (its later
// operations and Commit return the error).
func (t *KeyTxn) Discard() error {
	if t.done {
		return nil
	}
	t.done = true
	if t.b == nil {
		return nil
	}
	t.b.tx = nil
	if err := t.b.truncateVars(t.mark); err != nil {
		t.b.err = fmt.Errorf("state: discard key transaction: %w", err)
		return t.b.err
	}
	return nil
}

// RevertKeys drops the writes of committed transactions of the batch, as Discard would
// have before their Commit: for group calls whose failure is known only once later calls
// ran (a guest call runs many groups, and its results come at its end). The transactions
// must all have committed since the batch's last RevertKeys (revert what one guest call
// failed, at once, before the next call's transactions begin), and each one's key must not
// have been written by a transaction committed after it (a batch calls each key at most
// once per phase). No transaction may be open. The transactions may be given in any order;
// their writes go in one rebuild of the batch's indexed batch, a cost in the size of the
// batch's variable writes, paid only by failed group calls. If the rebuild fails, the batch
// is unusable (its later operations and Commit return the error).
func (b *Batch) RevertKeys(txns ...*KeyTxn) error {
	if len(txns) == 0 {
		return nil
	}
	if b.tx != nil {
		return ErrTxnOpen
	}
	if b.err != nil {
		return b.err
	}
	spans := make([]*KeyTxn, 0, len(txns))
	for _, t := range txns {
		if t.b != b || !t.committed || t.reverts != b.reverts {
			return fmt.Errorf("%w: RevertKeys of a transaction not committed in this batch since its last RevertKeys", ErrVarOp)
		}
	}
	b.reverts++
	for _, t := range txns {
		if !t.committed {
			continue // given twice
		}
		if t.endMark.count > t.mark.count {
			spans = append(spans, t)
		}
		b.keysDelta -= t.keysDelta
		b.timersDelta -= t.timersDelta
		t.committed = false // reverted: not again
	}
	if len(spans) == 0 {
		return nil
	}
	slices.SortFunc(spans, func(x, y *KeyTxn) int { return x.mark.len - y.mark.len })
	repr := b.vb.Repr()
	count := b.vb.Count()
	const header = 12 // a Pebble batch's: u64 sequence number, u32 count
	data := make([]byte, 0, len(repr))
	at := 0
	for _, t := range spans {
		start := max(t.mark.len, header)
		if start < at {
			return fmt.Errorf("%w: RevertKeys of overlapping transactions", ErrVarOp)
		}
		data = append(data, repr[at:start]...)
		at = t.endMark.len
		count -= t.endMark.count - t.mark.count
	}
	data = append(data, repr[at:]...)
	nb := b.d.s.db.NewIndexedBatch()
	if count > 0 {
		binary.LittleEndian.PutUint32(data[8:12], count)
		tmp := b.d.s.db.NewBatch()
		err := tmp.SetRepr(data)
		if err == nil {
			err = nb.Apply(tmp, nil)
		}
		_ = tmp.Close()
		if err != nil {
			_ = nb.Close()
			b.err = fmt.Errorf("state: revert key transactions: %w", err)
			return b.err
		}
	}
	_ = b.vb.Close()
	b.vb = nb
	if err := b.rebuildOverlay(); err != nil {
		b.err = fmt.Errorf("state: revert key transactions: %w", err)
		return b.err
	}
	return nil
}
