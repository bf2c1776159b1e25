package state

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// BenchmarkCommit commits batches of 4096 Sets (each with a value and a
// moving timeout) to a store on disk, with a synced commit per batch.
func BenchmarkCommit(b *testing.B) {
	const batchKeys = 4096
	s, err := Open(b.TempDir(), &Options{Logger: quietLogger()}) // default cache and memtable sizes
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Deployment("bench")
	keys := make([][]byte, batchKeys)
	prev := make([]Entry, batchKeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf(`"user-%08d"`, i))
	}
	value := make([]byte, 64)
	b.SetBytes(batchKeys * int64(len(value)))
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		batch := d.NewBatch(uint64(n + 1))
		for i, k := range keys {
			binary.BigEndian.PutUint64(value, uint64(n))
			next := Entry{Value: value, HasValue: true, TimeoutMs: int64(n*1000 + i)}
			batch.Set(k, prev[i], next)
			prev[i].HasValue, prev[i].TimeoutMs = true, next.TimeoutMs
		}
		batch.SetProgress(int64(n), uint64(n))
		if _, err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchKeys), "ns/key")
}

// BenchmarkGet reads random keys of a 100k-key deployment.
func BenchmarkGet(b *testing.B) {
	const nKeys = 100_000
	s, err := Open(b.TempDir(), &Options{Logger: quietLogger()}) // default cache and memtable sizes
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Deployment("bench")
	value := make([]byte, 64)
	for start, id := 0, uint64(1); start < nKeys; start, id = start+10_000, id+1 {
		batch := d.NewBatch(id)
		for i := start; i < start+10_000; i++ {
			batch.Set([]byte(fmt.Sprintf(`"user-%08d"`, i)), Entry{}, Entry{Value: value, HasValue: true, TimeoutMs: int64(i)})
		}
		if _, err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	key := make([]byte, 0, 32)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		key = fmt.Appendf(key[:0], `"user-%08d"`, (n*7919)%nKeys)
		_, found, err := d.Get(key)
		if err != nil || !found {
			b.Fatal(err, found)
		}
	}
}
