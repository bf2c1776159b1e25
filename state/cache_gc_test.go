package state

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// fillCache stores n entries with 10-byte keys and 40-byte values in c.
func fillCache(c *stateCache, n int) {
	st := c.stripe("gc")
	value := make([]byte, 40)
	key := make([]byte, 0, 16)
	for i := range n {
		key = fmt.Appendf(key[:0], "k%09d", i)
		c.fill(st, st.startRead(), "gc", key, Entry{Value: value, HasValue: true, TimeoutMs: int64(i)}, true)
	}
}

// BenchmarkCacheGC measures a full garbage collection with 300k entries in
// the cache (the cache's share of every GC cycle), and the heap each entry
// takes (which slotCharge should match).
func BenchmarkCacheGC(b *testing.B) {
	const n = 300_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newStateCache(DefaultStateCacheSize)
	fillCache(c, n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if got := c.len(); got != n {
		b.Fatalf("%d entries cached of %d", got, n)
	}
	perEntry := float64(after.HeapAlloc-before.HeapAlloc) / n
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		runtime.GC()
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/GC")
	b.ReportMetric(perEntry, "heapB/entry")
	runtime.KeepAlive(c)
}
