package state

import (
	"bytes"
	"encoding/binary"
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
// It is sharded by key hash; each shard indexes slots by a 64-bit hash of
// deployment and key, keeps the key and value bytes in one byte arena, and
// runs a CLOCK ring over the slots, bounded by the bytes charged to its
// entries. No entry holds a pointer (slots are plain integers, the index a
// map of integers, the arena a byte slice), so the garbage collector never
// scans the entries, however many there are. An absent key may be cached
// too (a slot without the present flag), so reads of new or removed keys
// skip Pebble as well.
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

// slotCharge is what a slot costs beyond its region in the arena (key and
// value bytes plus regionHeader): the slot itself, its index entry, and
// their share of the slot slice's and the index map's spare capacity
// (measured: 75 to 92 bytes per entry outside the arena, with 10-byte keys
// and 40-byte values, at 100k to 300k entries).
const slotCharge = 96

// regionHeader is the size of the header before each region (an entry's
// key and value bytes) in a shard's arena: the slot of a live region, or
// deadRegion and the size of a dead one, so compaction can walk the arena.
const regionHeader = 4

// deadRegion marks a region header whose slot was removed; the low bits
// hold the region's size, header included.
const deadRegion = 1 << 31

// maxShardBudget bounds a shard's budget so arena offsets fit in a uint32
// (with room for the dead-region mark).
const maxShardBudget = 1 << 30

// Slot flags.
const (
	slotLive    = 1 << iota // the slot holds an entry (else it is on the free list)
	slotPresent             // the key has a stored entry (else it is cached as absent)
	slotHasVal
	slotRef // CLOCK reference bit
)

// cacheSlot is one cached entry. Its key and value are in the shard's
// arena at off: a region header, the key, then room bytes for the value.
type cacheSlot struct {
	hash    uint64 // index key: of the deployment id and the key
	timeout int64
	updated int64
	off     uint32 // of the region (its header) in the arena
	keyLen  uint32
	valLen  uint32
	room    uint32 // value bytes reserved, at least valLen
	next    int32  // next slot of the same hash, or of the free list; -1 ends
	dep     uint16 // the deployment's id in the shard's table
	flags   uint8
}

// regionSize returns the arena bytes of s's region.
func (s *cacheSlot) regionSize() int64 {
	return int64(regionHeader) + int64(s.keyLen) + int64(s.room)
}

// cacheDep is a deployment name of a shard's table, with the number of
// slots that refer to it.
type cacheDep struct {
	name string
	refs int
}

type cacheShard struct {
	mu     sync.Mutex
	index  map[uint64]int32 // hash to the first slot of that hash
	slots  []cacheSlot
	arena  []byte // regions of the slots, and dead regions
	free   int32  // first free slot, -1 for none
	n      int    // live slots
	dead   int64  // arena bytes of dead regions
	hand   int
	used   int64 // n*slotCharge + len(arena): regions, dead ones too
	budget int64
	// Deployments of the slots, by id; ids of free entries are in depFree.
	deps    []cacheDep
	depIDs  map[string]uint16
	depFree []uint16
}

// newStateCache returns a cache of at most budget bytes, nil when budget
// is not positive (no cache).
func newStateCache(budget int64) *stateCache {
	if budget <= 0 {
		return nil
	}
	// One shard per 4 MiB, 1 to 16: enough to spread the deployments'
	// goroutines, while a small budget still holds entries of some size.
	// More for huge budgets, so that offsets fit.
	n := min(max(budget>>22, 1), 16)
	n = max(n, (budget+maxShardBudget-1)/maxShardBudget)
	c := &stateCache{seed: maphash.MakeSeed(), shards: make([]cacheShard, n)}
	for i := range c.shards {
		c.shards[i].budget = budget / n
		c.shards[i].free = -1
	}
	return c
}

// shard returns the shard of a key and the key's hash.
func (c *stateCache) shard(key []byte) (*cacheShard, uint64) {
	h := maphash.Bytes(c.seed, key)
	return &c.shards[h%uint64(len(c.shards))], h
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
	sh, kh := c.shard(key)
	sh.mu.Lock()
	i := sh.lookup(dep, key, kh)
	if i < 0 {
		sh.mu.Unlock()
		return Entry{}, false, false, dst
	}
	s := &sh.slots[i]
	s.flags |= slotRef
	if s.flags&slotPresent == 0 {
		sh.mu.Unlock()
		return Entry{}, false, true, dst
	}
	e = Entry{TimeoutMs: s.timeout, UpdatedMs: s.updated}
	if s.flags&slotHasVal != 0 {
		e.HasValue = true
		n := len(dst)
		start := int(s.off) + regionHeader + int(s.keyLen)
		dst = append(dst, sh.arena[start:start+int(s.valLen)]...)
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
	sh, kh := c.shard(key)
	sh.mu.Lock()
	if st.gen.Load() == tok.gen {
		sh.store(dep, key, kh, e, found)
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

// depLog is the writes of one cache name (a deployment's state entries, or its variable
// records) for endWrite; a nil log empties the cache.
type depLog struct {
	dep string
	log *setLog
}

// endWrite ends a write of a deployment begun by beginWrite on st. If it
// committed, the entries of each log are stored under its name (in order, so
// the last Set of a key wins); otherwise, or when a log is nil (Drop), the
// cache is emptied.
func (c *stateCache) endWrite(st *cacheStripe, committed bool, logs ...depLog) {
	emptied := !committed
	for _, l := range logs {
		if l.log == nil {
			emptied = true
		}
	}
	if emptied {
		c.clear()
	} else {
		for _, l := range logs {
			log := l.log
			for i := range log.recs {
				r := &log.recs[i]
				key := log.key(i)
				e := r.e
				e.Value = log.value(i)
				sh, kh := c.shard(key)
				sh.mu.Lock()
				if r.drop {
					if i := sh.lookup(l.dep, key, kh); i >= 0 {
						sh.remove(i)
					}
				} else {
					sh.store(l.dep, key, kh, e, e.exists())
				}
				sh.mu.Unlock()
			}
		}
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
		sh.index, sh.slots, sh.arena, sh.free, sh.n, sh.dead = nil, nil, nil, -1, 0, 0
		sh.hand, sh.used, sh.deps, sh.depIDs, sh.depFree = 0, 0, nil, nil, nil
		sh.mu.Unlock()
	}
}

// len returns the number of cached entries (for tests).
func (c *stateCache) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// slotHash is the index key of key (of hash kh) of deployment id.
func slotHash(kh uint64, id uint16) uint64 {
	return kh ^ (uint64(id)+1)*0x9e3779b97f4a7c15
}

// depID returns the id of deployment dep in the shard's table.
func (sh *cacheShard) depID(dep string) (uint16, bool) {
	if len(sh.deps) <= 8 {
		for i := range sh.deps {
			if d := &sh.deps[i]; d.refs > 0 && d.name == dep {
				return uint16(i), true
			}
		}
		return 0, false
	}
	id, ok := sh.depIDs[dep]
	return id, ok
}

// lookup returns the slot of dep's key (of hash kh), -1 for none. The
// caller holds sh.mu.
func (sh *cacheShard) lookup(dep string, key []byte, kh uint64) int32 {
	id, ok := sh.depID(dep)
	if !ok {
		return -1
	}
	i, ok := sh.index[slotHash(kh, id)]
	if !ok {
		return -1
	}
	for i >= 0 {
		s := &sh.slots[i]
		if s.dep == id && int(s.keyLen) == len(key) {
			start := int(s.off) + regionHeader
			if bytes.Equal(sh.arena[start:start+len(key)], key) {
				return i
			}
		}
		i = s.next
	}
	return -1
}

// addDep returns the id of dep, adding it to the table; ok is false when
// the table is full.
func (sh *cacheShard) addDep(dep string) (id uint16, ok bool) {
	if id, ok := sh.depID(dep); ok {
		return id, true
	}
	if n := len(sh.depFree); n > 0 {
		id = sh.depFree[n-1]
		sh.depFree = sh.depFree[:n-1]
		sh.deps[id].name = dep
	} else {
		if len(sh.deps) > 1<<16-1 {
			return 0, false
		}
		id = uint16(len(sh.deps))
		sh.deps = append(sh.deps, cacheDep{name: dep})
	}
	if sh.depIDs == nil {
		sh.depIDs = make(map[string]uint16)
	}
	sh.depIDs[dep] = id
	return id, true
}

// store puts key's entry (found false: its absence) into the shard, making
// room by CLOCK eviction. An entry larger than the shard is not cached.
// The caller holds sh.mu.
func (sh *cacheShard) store(dep string, key []byte, kh uint64, e Entry, found bool) {
	hasVal := found && e.HasValue
	var value []byte
	if hasVal {
		value = e.Value
	}
	vlen := len(value)
	flags := uint8(slotLive | slotRef)
	if found {
		flags |= slotPresent
	}
	if hasVal {
		flags |= slotHasVal
	}
	if i := sh.lookup(dep, key, kh); i >= 0 {
		s := &sh.slots[i]
		if vlen <= int(s.room) && int(s.room) <= 2*vlen+64 {
			// The value fits where the last one is: no charge changes.
			start := int(s.off) + regionHeader + int(s.keyLen)
			copy(sh.arena[start:], value)
			sh.setEntry(s, e, vlen, flags)
			return
		}
		sh.remove(i) // too small, or much too large: stored anew below
	}
	size := int64(regionHeader + len(key) + vlen)
	need := slotCharge + size
	if need > sh.budget || !sh.evict(need) {
		return
	}
	id, ok := sh.addDep(dep)
	if !ok {
		return
	}
	i := sh.free
	if i >= 0 {
		sh.free = sh.slots[i].next
	} else {
		sh.slots = append(sh.slots, cacheSlot{})
		i = int32(len(sh.slots) - 1)
	}
	off := sh.alloc(int(size))
	binary.LittleEndian.PutUint32(sh.arena[off:], uint32(i))
	copy(sh.arena[off+regionHeader:], key)
	copy(sh.arena[off+regionHeader+len(key):], value)
	s := &sh.slots[i]
	*s = cacheSlot{hash: slotHash(kh, id), off: uint32(off), keyLen: uint32(len(key)), room: uint32(vlen), next: -1, dep: id}
	sh.setEntry(s, e, vlen, flags)
	if sh.index == nil {
		sh.index = make(map[uint64]int32)
	}
	if head, ok := sh.index[s.hash]; ok {
		s.next = head
	}
	sh.index[s.hash] = i
	sh.deps[id].refs++
	sh.n++
	sh.used += slotCharge // alloc charged the region
}

// setEntry sets the fields of slot s from e, of a value of vlen bytes.
func (sh *cacheShard) setEntry(s *cacheSlot, e Entry, vlen int, flags uint8) {
	s.flags = flags
	s.valLen = uint32(vlen)
	s.timeout = e.TimeoutMs
	s.updated = 0
	if flags&slotHasVal != 0 {
		s.updated = e.UpdatedMs
	}
}

// alloc appends a region of size bytes to the arena and returns its
// offset, charging it to the shard. The caller made room for it (evict),
// so the arena never grows past what the budget leaves to regions.
func (sh *cacheShard) alloc(size int) int {
	if len(sh.arena)+size > cap(sh.arena) {
		if sh.dead*4 >= int64(len(sh.arena)) {
			sh.compact()
		}
		if len(sh.arena)+size > cap(sh.arena) {
			limit := int(sh.budget) - sh.n*slotCharge
			c := min(max(2*cap(sh.arena), 4<<10), limit)
			c = max(c, len(sh.arena)+size)
			arena := make([]byte, len(sh.arena), c)
			copy(arena, sh.arena)
			sh.arena = arena
		}
	}
	off := len(sh.arena)
	sh.arena = sh.arena[:off+size]
	sh.used += int64(size)
	return off
}

// compact moves the live regions of the arena to its start, dropping the
// dead ones and the unused room of values. It works in place, unless the
// arena's capacity is well over what the budget now leaves to regions
// (it grew while entries were few and large): then it moves them to a
// smaller arena.
func (sh *cacheShard) compact() {
	dst := sh.arena
	if limit := int(sh.budget) - sh.n*slotCharge; cap(dst) > limit+limit/8+4<<10 {
		dst = make([]byte, len(sh.arena)-int(sh.dead), max(limit, len(sh.arena)-int(sh.dead)))
	}
	w := 0
	for r := 0; r < len(sh.arena); {
		h := binary.LittleEndian.Uint32(sh.arena[r:])
		if h&deadRegion != 0 {
			r += int(h &^ deadRegion)
			continue
		}
		s := &sh.slots[h]
		size := int(s.regionSize())
		keep := regionHeader + int(s.keyLen) + int(s.valLen)
		copy(dst[w:cap(dst)], sh.arena[r:r+keep]) // w <= r: safe in place
		s.off, s.room = uint32(w), s.valLen
		r += size
		w += keep
	}
	sh.used -= int64(len(sh.arena) - w)
	sh.arena = dst[:w]
	sh.dead = 0
}

// evict makes room for need more bytes, by compacting the arena when a
// quarter of it is dead and else by CLOCK eviction. It reports whether
// they fit.
func (sh *cacheShard) evict(need int64) bool {
	// Two turns of the hand clear every reference bit and evict every
	// other slot, and a compaction needs an eviction before the next, so
	// the loop ends.
	for steps := 2 * len(sh.slots); sh.used+need > sh.budget; {
		if sh.dead > 0 && sh.dead*4 >= int64(len(sh.arena)) {
			sh.compact()
			continue
		}
		if steps--; steps < 0 || len(sh.slots) == 0 {
			return false
		}
		if sh.hand >= len(sh.slots) {
			sh.hand = 0
		}
		i := int32(sh.hand)
		sh.hand++
		s := &sh.slots[i]
		if s.flags&slotLive == 0 {
			continue
		}
		if s.flags&slotRef != 0 {
			s.flags &^= slotRef
			continue
		}
		sh.remove(i)
	}
	return true
}

// remove frees slot i; its region becomes dead (still charged until a
// compaction).
func (sh *cacheShard) remove(i int32) {
	s := &sh.slots[i]
	if head := sh.index[s.hash]; head == i {
		if s.next >= 0 {
			sh.index[s.hash] = s.next
		} else {
			delete(sh.index, s.hash)
		}
	} else {
		p := head
		for sh.slots[p].next != i {
			p = sh.slots[p].next
		}
		sh.slots[p].next = s.next
	}
	size := s.regionSize()
	binary.LittleEndian.PutUint32(sh.arena[s.off:], deadRegion|uint32(size))
	sh.dead += size
	sh.used -= slotCharge
	d := &sh.deps[s.dep]
	if d.refs--; d.refs == 0 {
		delete(sh.depIDs, d.name)
		d.name = ""
		sh.depFree = append(sh.depFree, s.dep)
	}
	*s = cacheSlot{next: sh.free}
	sh.free = i
	sh.n--
	if sh.n == 0 { // nothing live: the whole arena is dead
		sh.used -= int64(len(sh.arena))
		sh.arena = sh.arena[:0]
		sh.dead = 0
	}
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
	drop                bool  // the cache forgets the key (rather than caching e)
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

// addDrop records that the cache must forget key: a deleted record that is seldom read
// again (a key's timer), whose cached absence would only take room.
func (l *setLog) addDrop(key []byte) {
	l.recs = append(l.recs, setRec{off: len(l.arena), keyLen: len(key), drop: true})
	l.arena = append(l.arena, key...)
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
