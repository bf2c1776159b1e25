package state

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A key transaction reads a value committed by an earlier batch from the hot-state cache,
// not from Pebble: written behind the cache's back, Pebble's copy is not what it reads.
// Without the cache in front of the variables, it reads Pebble's.
func TestVarCacheServesReads(t *testing.T) {
	_, d, vars, _ := openVars(t)
	b := d.NewBatch(2)
	tx := b.Key(vars, []byte("k"), 0)
	requireNoError(t, tx.ValueSet(vVal, []byte("committed")))
	requireNoError(t, tx.Commit())
	_, err := b.Commit()
	requireNoError(t, err)

	head := varHeadKey(nil, d.prefix, vars.ids[vVal], []byte("k"))
	requireNoError(t, d.s.db.Set(head, appendItem(nil, 0, []byte("behind")), nil))

	b = d.NewBatch(3)
	defer b.Close()
	tx = b.Key(vars, []byte("k"), 0)
	v, ok, err := tx.ValueGet(vVal)
	requireNoError(t, err)
	requireEqual(t, true, ok)
	requireEqual(t, "committed", string(v), "the value read")
	requireNoError(t, tx.Discard())

	// A key never written is cached as absent once read: its record, which says that the
	// key holds nothing, so that its value is not read at all (TestNoKeyRecordNoReads).
	tx = b.Key(vars, []byte("new"), 0)
	_, ok, err = tx.ValueGet(vVal)
	requireNoError(t, err)
	requireEqual(t, false, ok)
	requireNoError(t, tx.Discard())
	_, found, hit, _ := d.s.cache.get(d.varsDep(), keyRecKey(nil, d.prefix, []byte("new"))[len(d.prefix):], nil)
	requireEqual(t, true, hit, "the absent key record is cached")
	requireEqual(t, false, found)
}

// varSnapshot reads everything of key that a transaction of b sees, for the variables of
// vars (a dropped one is left out).
func varSnapshot(t testing.TB, b *Batch, vars *Vars, key string, now int64) string {
	t.Helper()
	tx := b.Key(vars, []byte(key), now)
	var sb strings.Builder
	for i := range vars.Len() {
		switch vars.Decl(i).Kind {
		case VarValue:
			val, ok, err := tx.ValueGet(i)
			requireNoError(t, err)
			fmt.Fprintf(&sb, "v%d=%q/%v ", i, val, ok)
		case VarList:
			ex, err := tx.ListExists(i)
			requireNoError(t, err)
			fmt.Fprintf(&sb, "l%d=%v/%v ", i, readList(t, tx, i, 1<<20), ex)
		case VarMap:
			ex, err := tx.MapExists(i)
			requireNoError(t, err)
			fmt.Fprintf(&sb, "m%d=%v/%v ", i, readMap(t, tx, i, 1<<20), ex)
		}
	}
	ts, err := tx.Timers()
	requireNoError(t, err)
	fmt.Fprintf(&sb, "timers=%v", ts)
	requireNoError(t, tx.Discard())
	return sb.String()
}

// TestVarCacheModel runs the same random sequence of ABI v2 batches — every kind of
// write (ListDropFirst included, and timers, whose per-key entries the cache holds),
// failed calls (Discard, RevertKeys), collections cleared with a range deletion, TTL expiry, a dropped and re-added variable — on a store with the hot-state cache and
// on one without, and on a third store with the cache that applies the first's
// replicated writes while reading between them; after every batch, and within batches,
// every key reads the same on all of them, and the progress counters agree.
func TestVarCacheModel(t *testing.T) {
	open := func(cache int64) *Store {
		s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quietLogger(), CacheSize: 1 << 20, MemTableSize: 1 << 20, StateCacheSize: cache})
		requireNoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	cached, plain, standby := open(0), open(-1), open(0)
	r := &collectReplicator{}
	dc, dp, ds := cached.Deployment("dep"), plain.Deployment("dep"), standby.Deployment("dep")
	dc.SetReplicator(r)
	deps := []*Deployment{dc, dp}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	rng := rand.New(rand.NewPCG(32, 3))
	decls := testDecls
	applied := 0
	for batch := uint64(1); batch <= 60; batch++ {
		now := int64(batch) * 30
		switch batch {
		case 20:
			decls = testDecls[:5] // drops "last" (vVTTL): a range deletion over every key
		case 25:
			decls = testDecls // "last" again, empty, under a new id
		}
		// The same random choices for both stores: one seed per batch.
		seed := rng.Uint64()
		snaps := make([][]string, len(deps))
		progress := make([]Progress, len(deps))
		for di, d := range deps {
			br := rand.New(rand.NewPCG(seed, batch))
			b := d.NewBatch(batch)
			vars, err := b.DeclareVars(decls)
			requireNoError(t, err)
			nvars := vars.Len()
			for call := 0; call < 3; call++ {
				var committed []*KeyTxn
				for _, k := range keys {
					if br.IntN(3) == 0 {
						continue
					}
					tx := b.Key(vars, []byte(k), now)
					for range 1 + br.IntN(4) {
						switch op := br.IntN(13); op {
						case 0, 1:
							requireNoError(t, tx.ValueSet(vVal, fmt.Appendf(nil, "%d", br.IntN(100))))
						case 2:
							requireNoError(t, tx.ValueClear(vVal))
						case 3:
							n := 1
							if br.IntN(4) == 0 {
								n = pointClearMax + 5
							}
							for j := range n {
								requireNoError(t, tx.ListAppend(vList, fmt.Appendf(nil, "e%d", j)))
							}
						case 4:
							requireNoError(t, tx.ListClear(vList))
						case 5:
							requireNoError(t, tx.MapSet(vMap, fmt.Appendf(nil, "m%d", br.IntN(3)), []byte("x")))
						case 6:
							requireNoError(t, tx.MapRemove(vMap, fmt.Appendf(nil, "m%d", br.IntN(3))))
						case 7:
							requireNoError(t, tx.MapClear(vMap))
						case 8:
							requireNoError(t, tx.ListAppend(vTTL, []byte("t")))
							requireNoError(t, tx.MapSet(vMTTL, []byte("t"), []byte("t")))
						case 9:
							if nvars > vVTTL {
								requireNoError(t, tx.ValueSet(vVTTL, []byte("ttl")))
							}
						case 10:
							requireNoError(t, tx.TimerRegister(int64(br.IntN(3))))
						case 11:
							requireNoError(t, tx.TimerDelete(int64(br.IntN(3))))
						case 12:
							v := []int{vList, vTTL}[br.IntN(2)]
							have := len(readList(t, tx, v, 1<<20))
							if n := br.IntN(have + 2); n > have {
								requireErrorIs(t, tx.ListDropFirst(v, n), ErrVarOp)
							} else {
								requireNoError(t, tx.ListDropFirst(v, n))
							}
						}
					}
					if br.IntN(6) == 0 {
						requireNoError(t, tx.Discard())
						continue
					}
					requireNoError(t, tx.Commit())
					committed = append(committed, tx)
				}
				var revert []*KeyTxn
				for _, tx := range committed {
					if br.IntN(5) == 0 {
						revert = append(revert, tx)
					}
				}
				requireNoError(t, b.RevertKeys(revert...))
			}
			if br.IntN(2) == 0 {
				_, err := b.ExpireTTL(now)
				requireNoError(t, err)
			}
			for _, k := range keys {
				snaps[di] = append(snaps[di], varSnapshot(t, b, vars, k, now))
			}
			progress[di], err = b.Commit()
			requireNoError(t, err)
		}
		requireEqual(t, snaps[1], snaps[0], "batch %d: reads within the batch, with and without the cache", batch)
		requireEqual(t, progress[1].Keys, progress[0].Keys, "batch %d: keys", batch)
		requireEqual(t, progress[1].TimerKeys, progress[0].TimerKeys, "batch %d: timer keys", batch)

		// The standby reads (filling its cache), then applies the new writes.
		for ; applied < len(r.writes); applied++ {
			requireNoError(t, ds.ApplyReplicated(r.writes[applied].Repr))
		}
		// After the commit, a new batch of each store reads the same.
		var after [][]string
		for _, d := range []*Deployment{dc, dp, ds} {
			b := d.NewBatch(batch + 1)
			vars, err := b.DeclareVars(decls)
			requireNoError(t, err)
			var got []string
			for _, k := range keys {
				got = append(got, varSnapshot(t, b, vars, k, now))
			}
			b.Close()
			after = append(after, got)
		}
		requireEqual(t, after[1], after[0], "batch %d: reads after the commit, with and without the cache", batch)
		requireEqual(t, after[1], after[2], "batch %d: reads of the standby", batch)
	}
}
