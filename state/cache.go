package state

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// DefaultStateCacheSize is the default budget of the hot-state cache (see
// Options.StateCacheSize): 64 MiB.
const DefaultStateCacheSize = 64 << 20

// stateCache is a write-through cache of committed state entries, in front
// of Pebble for Deployment.Get (see RATIONALE.md, "The hot-state cache").
//
// It is sharded by key hash; each shard is a map from key to a slot and a
// CLOCK ring over the slots, bounded by the bytes charged to its entries.
// An absent key may be cached too (a slot with present false), so reads of
// new or removed keys skip Pebble as well.
//
// Coherence: a deployment's writes (Batch.Commit, Drop) are bracketed by
// beginWrite and endWrite on the deployment's stripe. While a write is in
// progress, Gets of that deployment bypass the cache (they read Pebble and
// fill nothing); endWrite stores the written entries after a successful
// write and empties the cache after a failed one. A Get that missed fills
// the cache only when no write of its deployment began since the Get
// started (the stripe's gen), so a value read from Pebble before a commit
// is never stored after it. The engine's own Gets never overlap its
// commits (one goroutine drives a deployment), so for it the cache is
// always in use.
type stateCache struct {
	seed    maphash.Seed
	shards  []cacheShard
	stripes [cacheStripes]cacheStripe
}

// cacheStripes is the number of write stripes; deployments share one
// when their names hash alike, which only costs some bypassed reads.
const cacheStripes = 64

// cacheStripe tracks the writes of the deployments hashed to it.
type cacheStripe struct {
	gen    atomic.Uint64 // counts write begins and ends
	active atomic.Int64  // writes in progress
	_      [48]byte      // keep stripes on separate cache lines
}

// cacheKey names a cached entry: deployment name and group key.
type cacheKey struct{ dep, key string }

// slotCharge is what a slot costs beyond its key and value bytes: the slot
// itself, the map entry, and their share of the slice's and the map's spare
// capacity (measured: about 160 bytes per entry with 10-byte keys and
// 40-byte values, at 150k to 500k entries).
const slotCharge = 160

// cacheSlot is one cached entry.
type cacheSlot struct {
	k       cacheKey
	value   []byte // the value (capacity reused across updates)
	timeout int64
	updated int64
	charge  int64 // bytes charged to the shard
	live    bool  // the slot holds an entry (else it is on the free list)
	present bool  // the key has a stored entry (else it is cached as absent)
	hasVal  bool
	ref     bool // CLOCK reference bit
}

type cacheShard struct {
	mu     sync.Mutex
	index  map[cacheKey]int32
	slots  []cacheSlot
	free   []int32
	hand   int
	used   int64
	budget int64
}

// newStateCache returns a cache of at most budget bytes, nil when budget
// is not positive (no cache).
func newStateCache(budget int64) *stateCache {
	if budget <= 0 {
		return nil
	}
	// One shard per 4 MiB, 1 to 16: enough to spread the deployments'
	// goroutines, while a small budget still holds entries of some size.
	n := int(min(max(budget>>22, 1), 16))
	c := &stateCache{seed: maphash.MakeSeed(), shards: make([]cacheShard, n)}
	for i := range c.shards {
		c.shards[i].budget = budget / int64(n)
	}
	return c
}

func (c *stateCache) shard(key []byte) *cacheShard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	return &c.shards[maphash.Bytes(c.seed, key)%uint64(len(c.shards))]
}

// stripe returns the write stripe of deployment dep.
func (c *stateCache) stripe(dep string) *cacheStripe {
	return &c.stripes[maphash.String(c.seed, dep)%cacheStripes]
}

// readToken is what a reader records before it reads, for fill.
type readToken struct {
	gen uint64
	ok  bool // no write was in progress: the cache may be used
}

// startRead returns the token of a read of a deployment of stripe st.
func (st *cacheStripe) startRead() readToken {
	g := st.gen.Load()
	return readToken{gen: g, ok: st.active.Load() == 0}
}

// get looks key up. On a hit it returns the entry with its value appended
// to dst (e.Value aliases the appended bytes), found reporting whether the
// key has a stored entry.
func (c *stateCache) get(dep string, key, dst []byte) (e Entry, found, hit bool, buf []byte) {
	sh := c.shard(key)
	sh.mu.Lock()
	i, ok := sh.index[cacheKey{dep, string(key)}]
	if !ok {
		sh.mu.Unlock()
		return Entry{}, false, false, dst
	}
	s := &sh.slots[i]
	s.ref = true
	if !s.present {
		sh.mu.Unlock()
		return Entry{}, false, true, dst
	}
	e = Entry{HasValue: s.hasVal, TimeoutMs: s.timeout, UpdatedMs: s.updated}
	if s.hasVal {
		n := len(dst)
		dst = append(dst, s.value...)
		e.Value = valueTail(dst, n)
	}
	sh.mu.Unlock()
	return e, true, true, dst
}

// valueTail returns buf[n:] with its capacity cut, never nil (a present
// empty value is an empty slice, not nil).
func valueTail(buf []byte, n int) []byte {
	if len(buf) == n {
		return []byte{}
	}
	return buf[n:len(buf):len(buf)]
}

// fill stores what a reader of stripe st read from Pebble after a miss,
// unless a write of the stripe began since tok was taken.
func (c *stateCache) fill(st *cacheStripe, tok readToken, dep string, key []byte, e Entry, found bool) {
	if !tok.ok {
		return
	}
	sh := c.shard(key)
	sh.mu.Lock()
	if st.gen.Load() == tok.gen {
		sh.store(dep, key, e, found)
	}
	sh.mu.Unlock()
}

// beginWrite announces a write of a deployment of stripe st; until the
// matching endWrite its reads bypass the cache. It must come before the
// write reaches Pebble.
func (st *cacheStripe) beginWrite() {
	st.active.Add(1)
	st.gen.Add(1)
}

// endWrite ends a write of deployment dep begun by beginWrite on st. If it
// committed, the entries of log are stored (in order, so the last Set of a
// key wins); otherwise, or when log is nil (Drop), the cache is emptied.
func (c *stateCache) endWrite(st *cacheStripe, dep string, log *setLog, committed bool) {
	if committed && log != nil {
		for i := range log.recs {
			r := &log.recs[i]
			key := log.key(i)
			e := r.e
			e.Value = log.value(i)
			sh := c.shard(key)
			sh.mu.Lock()
			sh.store(dep, key, e, e.exists())
			sh.mu.Unlock()
		}
	} else {
		c.clear()
	}
	st.gen.Add(1)
	st.active.Add(-1)
}

// clear empties the cache. Readers that missed before it may still fill
// entries they read; callers clear only after the write that makes those
// stale began (beginWrite), or when the store is failed and refuses reads.
func (c *stateCache) clear() {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.index, sh.slots, sh.free, sh.hand, sh.used = nil, nil, nil, 0, 0
		sh.mu.Unlock()
	}
}

// len returns the number of cached entries (for tests).
func (c *stateCache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.index)
		sh.mu.Unlock()
	}
	return n
}

// store puts key's entry (found false: its absence) into the shard, making
// room by CLOCK eviction. An entry larger than the shard is not cached.
// The caller holds sh.mu.
func (sh *cacheShard) store(dep string, key []byte, e Entry, found bool) {
	hasVal := found && e.HasValue
	vlen := 0
	if hasVal {
		vlen = len(e.Value)
	}
	i, ok := sh.index[cacheKey{dep, string(key)}]
	var buf []byte // the value buffer to reuse
	if ok {
		s := &sh.slots[i]
		sh.used -= s.charge
		s.charge = 0
		buf = s.value
		if cap(buf) < vlen || cap(buf) > 2*vlen+64 {
			buf = nil // too small, or much too large: reallocated below
		}
	}
	need := int64(slotCharge + len(key) + max(vlen, cap(buf)))
	if need > sh.budget || !sh.evict(need, i, ok) {
		if ok {
			sh.remove(i) // it does not fit even alone
		}
		return
	}
	if !ok {
		if sh.index == nil {
			sh.index = make(map[cacheKey]int32)
		}
		if n := len(sh.free); n > 0 {
			i = sh.free[n-1]
			sh.free = sh.free[:n-1]
		} else {
			sh.slots = append(sh.slots, cacheSlot{})
			i = int32(len(sh.slots) - 1)
		}
		k := cacheKey{dep, string(key)}
		sh.slots[i] = cacheSlot{k: k, live: true}
		sh.index[k] = i
	}
	s := &sh.slots[i]
	if hasVal && buf == nil {
		buf = make([]byte, 0, vlen)
	}
	if hasVal {
		buf = append(buf[:0], e.Value...)
	} else {
		buf = buf[:0]
	}
	*s = cacheSlot{k: s.k, value: buf, timeout: e.TimeoutMs, live: true, present: found, hasVal: hasVal, ref: true}
	if hasVal {
		s.updated = e.UpdatedMs
	}
	s.charge = int64(slotCharge + len(key) + cap(buf))
	sh.used += s.charge
}

// evict frees slots by CLOCK until need more bytes fit, never evicting
// slot keep when keepOK. It reports whether they fit.
func (sh *cacheShard) evict(need int64, keep int32, keepOK bool) bool {
	// Two turns of the hand clear every reference bit and evict every
	// other slot, so the loop ends.
	for steps := 2 * len(sh.slots); sh.used+need > sh.budget; steps-- {
		if steps < 0 || len(sh.slots) == 0 {
			return false
		}
		if sh.hand >= len(sh.slots) {
			sh.hand = 0
		}
		i := int32(sh.hand)
		sh.hand++
		s := &sh.slots[i]
		if !s.live || (keepOK && i == keep) {
			continue
		}
		if s.ref {
			s.ref = false
			continue
		}
		sh.remove(i)
	}
	return true
}

// remove frees slot i.
func (sh *cacheShard) remove(i int32) {
	s := &sh.slots[i]
	delete(sh.index, s.k)
	sh.used -= s.charge
	*s = cacheSlot{}
	sh.free = append(sh.free, i)
}

// setLog records the Sets of a Batch, written to Pebble in key order at
// Commit and then to the cache.
type setLog struct {
	recs  []setRec
	arena []byte // key and value bytes of every rec
	// Scratch of writeSets.
	timers []timerOp
	order  []int32
}

type setRec struct {
	off, keyLen, valLen int
	prevTimeout         int64 // the timeout of the entry before the Set
	e                   Entry // without Value
}

// timerOp is a timer-index write of writeSets.
type timerOp struct {
	ts       int64
	rec, seq int32
	del      bool
}

func (l *setLog) add(key []byte, prevTimeout int64, e Entry) {
	r := setRec{off: len(l.arena), keyLen: len(key), prevTimeout: prevTimeout, e: e}
	r.e.Value = nil
	l.arena = append(l.arena, key...)
	if e.HasValue {
		r.valLen = len(e.Value)
		l.arena = append(l.arena, e.Value...)
	}
	l.recs = append(l.recs, r)
}

func (l *setLog) key(i int) []byte {
	r := &l.recs[i]
	return l.arena[r.off : r.off+r.keyLen : r.off+r.keyLen]
}

// value returns rec i's value (nil without one).
func (l *setLog) value(i int) []byte {
	r := &l.recs[i]
	if !r.e.HasValue {
		return nil
	}
	start := r.off + r.keyLen
	return l.arena[start : start+r.valLen : start+r.valLen]
}

func (l *setLog) reset() {
	l.recs = l.recs[:0]
	l.arena = l.arena[:0]
	l.timers = l.timers[:0]
	l.order = l.order[:0]
}
