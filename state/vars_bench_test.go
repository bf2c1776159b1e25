package state

import (
	"context"
	"fmt"
	"testing"
)

// benchVarOp fills one key's collection with size items (untimed), then times op,
// one group call (a KeyTxn) per op and opsPerBatch ops per commit, on a store on disk.
// The commits are replicated (to a copyReplicator) and so not synced: an fsync per
// commit would add a few ms of noise per 100 ops. The cost per op must not depend on
// size; the writes/op metric counts the Pebble operations written.
func benchVarOp(b *testing.B, size int, fill func(tx *KeyTxn, i int) error, op func(tx *KeyTxn, n int) error) {
	const opsPerBatch = 100
	s, err := Open(b.TempDir(), &Options{Logger: quietLogger()}) // default cache and memtable sizes
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Deployment("bench")
	key := []byte(`"user-00000001"`)
	batch := d.NewBatch(1)
	vars, err := batch.DeclareVars(testDecls)
	if err != nil {
		b.Fatal(err)
	}
	id := uint64(1)
	for i := 0; i < size; i++ {
		if i > 0 && i%10_000 == 0 {
			if _, err := batch.Commit(); err != nil {
				b.Fatal(err)
			}
			id++
			batch = d.NewBatch(id)
		}
		tx := batch.Key(vars, key, 0)
		if err := fill(tx, i); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := batch.Commit(); err != nil {
		b.Fatal(err)
	}
	// Flushed and compacted, so that the timed part reads the collection from
	// sstables and runs no compaction of the fill (on 2 cores it competes).
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.db.Compact(context.Background(), d.prefix, prefixEnd(d.prefix), false); err != nil {
		b.Fatal(err)
	}
	d.SetReplicator(&copyReplicator{})
	writes := 0
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += opsPerBatch {
		id++
		batch := d.NewBatch(id)
		for i := n; i < n+opsPerBatch && i < b.N; i++ {
			tx := batch.Key(vars, key, 0)
			if err := op(tx, i); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		writes += int(batch.vb.Count())
		if _, err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(writes)/float64(b.N), "writes/op")
}

// BenchmarkListAppend appends one 64-byte element per group call to a list of 1k or
// 100k elements.
func BenchmarkListAppend(b *testing.B) {
	elem := make([]byte, 64)
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("size=%dk", size/1000), func(b *testing.B) {
			benchVarOp(b, size,
				func(tx *KeyTxn, i int) error { return tx.ListAppend(vList, elem) },
				func(tx *KeyTxn, n int) error { return tx.ListAppend(vList, elem) })
		})
	}
}

// BenchmarkMapSet sets one entry (64-byte value) per group call of a map of 1k or 100k
// entries, at spread-out keys.
func BenchmarkMapSet(b *testing.B) {
	value := make([]byte, 64)
	for _, size := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("size=%dk", size/1000), func(b *testing.B) {
			benchVarOp(b, size,
				func(tx *KeyTxn, i int) error { return tx.MapSet(vMap, fmt.Appendf(nil, "k%08d", i), value) },
				func(tx *KeyTxn, n int) error {
					return tx.MapSet(vMap, fmt.Appendf(nil, "k%08d", (n*7919)%size), value)
				})
		})
	}
}
