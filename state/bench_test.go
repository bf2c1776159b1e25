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

// copyReplicator keeps a copy of the last write's repr, as a Replicator that publishes it
// would copy it into its message, without the network.
type copyReplicator struct{ buf []byte }

func (r *copyReplicator) Replicate(w ReplicatedWrite) error {
	r.buf = append(r.buf[:0], w.Repr...)
	return nil
}

// nopReplicator accepts every write and does nothing.
type nopReplicator struct{}

func (nopReplicator) Replicate(ReplicatedWrite) error { return nil }

// BenchmarkCommitReplicated commits batches of 1000 Sets (and of 10, where the commit's
// fixed costs show) of 64-byte values with a moving timeout, to a store on disk: synced
// without a Replicator ("sync"), and not synced with one that copies the repr ("copy": what
// a changelog publisher costs on this side, minus the network) or does nothing ("nop": the
// NoSync commit alone). "copy" reports the repr's size as repr-B.
func BenchmarkCommitReplicated(b *testing.B) {
	for _, batchKeys := range []int{1000, 10} {
		for _, bc := range []struct {
			name string
			r    Replicator
		}{{"sync", nil}, {"copy", &copyReplicator{}}, {"nop", nopReplicator{}}} {
			b.Run(fmt.Sprintf("sets=%d/%s", batchKeys, bc.name), func(b *testing.B) {
				benchCommitReplicated(b, batchKeys, bc.r)
			})
		}
	}
}

func benchCommitReplicated(b *testing.B, batchKeys int, r Replicator) {
	s, err := Open(b.TempDir(), &Options{Logger: quietLogger()}) // default cache and memtable sizes
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Deployment("bench")
	d.SetReplicator(r)
	keys := make([][]byte, batchKeys)
	prev := make([]Entry, batchKeys)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf(`"user-%08d"`, i))
	}
	value := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		batch := d.NewBatch(uint64(n + 1))
		for i, k := range keys {
			binary.BigEndian.PutUint64(value, uint64(n))
			next := Entry{Value: value, HasValue: true, TimeoutMs: int64(n*batchKeys + i)}
			batch.Set(k, prev[i], next)
			prev[i].HasValue, prev[i].TimeoutMs = true, next.TimeoutMs
		}
		batch.SetProgress(int64(n), uint64(n))
		if _, err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if cr, ok := r.(*copyReplicator); ok {
		b.ReportMetric(float64(len(cr.buf)), "repr-B")
	}
}

// exportBenchStore returns a store on disk whose deployment "bench" holds nKeys keys of
// 64-byte values with timeouts, flushed to sstables.
func exportBenchStore(b *testing.B, nKeys int) *Deployment {
	s, err := Open(b.TempDir(), &Options{Logger: quietLogger()}) // default cache and memtable sizes
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	d := s.Deployment("bench")
	value := make([]byte, 64)
	for start, id := 0, uint64(1); start < nKeys; start, id = start+10_000, id+1 {
		batch := d.NewBatch(id)
		for i := start; i < min(start+10_000, nKeys); i++ {
			batch.Set([]byte(fmt.Sprintf(`"user-%08d"`, i)), Entry{}, Entry{Value: value, HasValue: true, TimeoutMs: int64(i)})
		}
		if _, err := batch.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkExport exports a 100k-key deployment (each key an entry and a timer) in 1 MiB
// chunks, handed to a function that only counts them.
func BenchmarkExport(b *testing.B) {
	const nKeys = 100_000
	d := exportBenchStore(b, nKeys)
	var bytes int64
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		bytes = 0
		if _, err := d.Export(0, func(repr []byte) error { bytes += int64(len(repr)); return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(bytes)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nKeys), "ns/key")
}

// BenchmarkApplyExport applies the export of a 100k-key deployment to the deployment of the
// same name in another store on disk (what a restore from a snapshot does locally).
func BenchmarkApplyExport(b *testing.B) {
	const nKeys = 100_000
	src := exportBenchStore(b, nKeys)
	var reprs [][]byte
	var bytes int64
	if _, err := src.Export(0, func(repr []byte) error {
		reprs = append(reprs, append([]byte(nil), repr...))
		bytes += int64(len(repr))
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	s, err := Open(b.TempDir(), &Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	d := s.Deployment("bench")
	b.SetBytes(bytes)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for _, r := range reprs {
			if err := d.ApplyReplicated(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nKeys), "ns/key")
}
