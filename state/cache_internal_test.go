package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// requireShardConsistent checks a shard's bookkeeping: the charges add up
// to used, every live slot is reachable from the index under its hash, the
// free list holds the other slots, the arena's regions are those of the
// live slots plus dead ones adding up to dead, and the deployment table
// counts the slots of each deployment.
func requireShardConsistent(t testing.TB, sh *cacheShard) {
	t.Helper()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.used > sh.budget || sh.used < 0 {
		t.Fatalf("shard uses %d bytes of %d", sh.used, sh.budget)
	}
	var sum int64
	live := 0
	refs := make(map[uint16]int)
	for i := range sh.slots {
		s := &sh.slots[i]
		if s.flags&slotLive == 0 {
			continue
		}
		live++
		refs[s.dep]++
		sum += slotCharge + s.regionSize()
		if s.valLen > s.room {
			t.Fatalf("slot %d: value of %d bytes in %d", i, s.valLen, s.room)
		}
		if got := binary.LittleEndian.Uint32(sh.arena[s.off:]); got != uint32(i) {
			t.Fatalf("slot %d: region header %#x", i, got)
		}
		reached := false
		for j := sh.index[s.hash]; j >= 0 && !reached; j = sh.slots[j].next {
			reached = j == int32(i)
		}
		if !reached {
			t.Fatalf("slot %d is not reachable from the index", i)
		}
	}
	requireEqual(t, sh.used, sum+sh.dead, "charges")
	requireEqual(t, int64(len(sh.arena)), sum-int64(live)*slotCharge+sh.dead, "arena bytes")
	requireEqual(t, live, sh.n, "live slots")
	free := 0
	for i := sh.free; i >= 0; i = sh.slots[i].next {
		if sh.slots[i].flags != 0 {
			t.Fatalf("free slot %d is live", i)
		}
		free++
	}
	requireEqual(t, len(sh.slots), live+free, "live and free slots")
	var dead int64
	regions := 0
	for r := 0; r < len(sh.arena); {
		h := binary.LittleEndian.Uint32(sh.arena[r:])
		if h&deadRegion != 0 {
			dead += int64(h &^ deadRegion)
			r += int(h &^ deadRegion)
			continue
		}
		s := &sh.slots[h]
		if int(s.off) != r {
			t.Fatalf("region at %d names slot %d at %d", r, h, s.off)
		}
		regions++
		r += int(s.regionSize())
	}
	requireEqual(t, sh.dead, dead, "dead bytes")
	requireEqual(t, live, regions, "live regions")
	for id, d := range sh.deps {
		requireEqual(t, refs[uint16(id)], d.refs, "slots of deployment %d (%q)", id, d.name)
	}
}

// TestCacheShardModel stores, refreshes and evicts random entries of
// several deployments in one small shard and checks it against a map after
// every operation: every entry the shard holds is the last one stored, and
// its bookkeeping (arena regions, compaction, free slots, deployment ids,
// hash chains) stays consistent. Hashes are taken from a tiny range, so
// keys collide and chains are exercised.
func TestCacheShardModel(t *testing.T) {
	sh := &cacheShard{budget: 6 << 10, free: -1}
	type mkey struct{ dep, key string }
	type mval struct {
		e     Entry
		found bool
	}
	model := map[mkey]mval{}
	r := rand.New(rand.NewPCG(1, 2))
	deps := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}
	for op := range 20_000 {
		dep := deps[r.IntN(len(deps))]
		key := []byte(fmt.Sprintf("key-%d", r.IntN(120)))
		kh := uint64(len(key) % 3) // collisions on purpose
		if op%3 == 0 {             // look one up
			i := sh.lookup(dep, key, kh)
			want, ok := model[mkey{dep, string(key)}]
			if i >= 0 {
				if !ok {
					t.Fatalf("op %d: %s/%s is cached, never stored", op, dep, key)
				}
				s := &sh.slots[i]
				requireEqual(t, want.found, s.flags&slotPresent != 0, "op %d: presence", op)
				e := Entry{TimeoutMs: s.timeout, UpdatedMs: s.updated, HasValue: s.flags&slotHasVal != 0}
				if e.HasValue {
					start := int(s.off) + regionHeader + int(s.keyLen)
					e.Value = bytes.Clone(sh.arena[start : start+int(s.valLen)])
					if len(e.Value) == 0 {
						e.Value = []byte{}
					}
				}
				if !want.found {
					want.e = Entry{}
				}
				requireEqual(t, want.e, e, "op %d: %s/%s", op, dep, key)
			}
			continue
		}
		var e Entry
		found := r.IntN(5) != 0
		if found {
			e.TimeoutMs = int64(r.IntN(100))
			if r.IntN(4) != 0 {
				e.HasValue = true
				e.Value = bytes.Repeat([]byte{byte('a' + op%26)}, r.IntN(300))
				e.UpdatedMs = int64(op)
			}
		}
		sh.store(dep, key, kh, e, found)
		if !e.HasValue {
			e.UpdatedMs = 0
		}
		model[mkey{dep, string(key)}] = mval{e, found}
		if op%97 == 0 {
			requireShardConsistent(t, sh)
		}
	}
	requireShardConsistent(t, sh)
	if sh.n == 0 || sh.n == len(model) {
		t.Fatalf("%d entries cached of %d: no eviction or nothing kept", sh.n, len(model))
	}
}

// TestCacheArenaShrinks: an arena that grew for a few large values does
// not keep its capacity once many small entries share the budget, so the
// heap the shard holds stays near its budget.
func TestCacheArenaShrinks(t *testing.T) {
	const budget = 1 << 20
	sh := &cacheShard{budget: budget, free: -1}
	big := bytes.Repeat([]byte{'b'}, 8<<10)
	for i := range 100 {
		sh.store("d", []byte(fmt.Sprint("big-", i)), uint64(i), Entry{Value: big, HasValue: true}, true)
	}
	grown := cap(sh.arena)
	for i := range 100_000 {
		sh.store("d", []byte(fmt.Sprint("small-", i)), uint64(i), Entry{Value: []byte("v"), HasValue: true}, true)
	}
	requireShardConsistent(t, sh)
	if heap := cap(sh.arena) + sh.n*slotCharge; heap > budget+budget/8+8<<10 {
		t.Fatalf("arena of %d bytes (%d after the large values) and %d slots: %d bytes for a budget of %d",
			cap(sh.arena), grown, sh.n, heap, budget)
	}
}
