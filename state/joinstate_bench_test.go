package state

import (
	"fmt"
	"testing"
)

// benchJoinState runs the state work of the adjoin sample's calls through KeyTxn, without
// a guest: 20k keys, each holding two short lists (3 elements each) and 6 timers; per key
// a data call (read the other side's list, append to its own, register a new timer) and
// then a timer call (delete the timer that fired, read both lists, evict the first
// element of each with evict). Calls of 1,000 keys per batch, each key once per phase, as
// the engine runs them; batches committed with a (not synced) replicated write. The
// ns/op is one key's two calls.
func benchJoinState(b *testing.B, evict func(tx *KeyTxn, v int, elems [][]byte) error) {
	const keys, perBatch = 20_000, 1_000
	s, err := Open(b.TempDir(), &Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Deployment("bench")
	batch := d.NewBatch(1)
	const imps, clicks = 0, 1
	vars, err := batch.DeclareVars([]VarDecl{{Name: "impressions", Kind: VarList}, {Name: "clicks", Kind: VarList}})
	if err != nil {
		b.Fatal(err)
	}
	key := func(i int) []byte { return fmt.Appendf(nil, `"a%06d"`, i%keys) }
	elem := []byte(`{"ts":1700000000000,"matched":false}`)
	id := uint64(1)
	for i := range keys {
		tx := batch.Key(vars, key(i), 0)
		for j := range 3 {
			if err := tx.ListAppend(imps, elem); err != nil {
				b.Fatal(err)
			}
			if err := tx.ListAppend(clicks, elem); err != nil {
				b.Fatal(err)
			}
			for k := range 2 {
				if err := tx.TimerRegister(int64(j*2 + k)); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		if (i+1)%perBatch == 0 {
			if _, err := batch.Commit(); err != nil {
				b.Fatal(err)
			}
			id++
			batch = d.NewBatch(id)
		}
	}
	batch.Close()
	d.SetReplicator(&copyReplicator{})
	b.ReportAllocs()
	b.ResetTimer()
	ts := int64(1000)
	for n := 0; n < b.N; n += perBatch {
		id++
		batch := d.NewBatch(id)
		m := min(perBatch, b.N-n)
		for i := n; i < n+m; i++ { // data calls
			tx := batch.Key(vars, key(i), 0)
			if _, _, err := tx.ListRead(imps, 0, 1<<20); err != nil {
				b.Fatal(err)
			}
			if err := tx.ListAppend(clicks, elem); err != nil {
				b.Fatal(err)
			}
			if err := tx.TimerRegister(ts + int64(i)); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		for i := n; i < n+m; i++ { // timer calls
			tx := batch.Key(vars, key(i), 0)
			if err := tx.TimerDelete(ts + int64(i)); err != nil {
				b.Fatal(err)
			}
			for _, v := range []int{imps, clicks} {
				elems, _, err := tx.ListRead(v, 0, 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				if len(elems) > 1 {
					if err := evict(tx, v, elems); err != nil {
						b.Fatal(err)
					}
				} else if err := tx.ListAppend(v, elem, elem); err != nil { // keep them short but not empty
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJoinStatePut: benchJoinState evicting with ListPut of the rest (what the sample
// did before LIST_DROP_FIRST).
func BenchmarkJoinStatePut(b *testing.B) {
	benchJoinState(b, func(tx *KeyTxn, v int, elems [][]byte) error { return tx.ListPut(v, elems[1:]...) })
}
