package state

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// TestBigValuesCopiedOnce: a batch of big outbox payloads and state values is copied once
// into its Pebble buffer, sized for them at AppendOutboxes, not grown by doubling (which
// allocated about twice their bytes), and reads back whole (issue 30, item 6).
func TestBigValuesCopiedOnce(t *testing.T) {
	s := openDisk(t, t.TempDir())
	t.Cleanup(func() { _ = s.Close() })
	d := s.Deployment("big")
	const n, size = 8, 1 << 20
	entries := make([]OutboxEntry, n)
	for i := range entries {
		entries[i] = OutboxEntry{Kind: OutboxOutput, Key: []byte(fmt.Sprintf("k%d", i%2)), Payload: bytes.Repeat([]byte{'a' + byte(i)}, size)}
	}
	value := bytes.Repeat([]byte{'v'}, size)
	total := uint64((n + 1) * size)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b := d.NewBatch(1)
	b.Set([]byte("k0"), Entry{}, Entry{Value: value, HasValue: true})
	b.AppendOutboxes(entries)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > total*5/4 {
		t.Errorf("building a batch of %d bytes of values allocated %d bytes (%.2fx), want at most 1.25x", total, got, float64(got)/float64(total))
	}
	if _, err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	for i := range entries {
		if entries[i].ID != (OutboxID{BatchID: 1, Seq: uint32(i)}) {
			t.Fatalf("entry %d: id %v", i, entries[i].ID)
		}
	}
	i := 0
	err := d.Outbox(func(e OutboxEntry) error {
		if !bytes.Equal(e.Payload, entries[i].Payload) || !bytes.Equal(e.Key, entries[i].Key) || e.ID != entries[i].ID {
			t.Errorf("outbox entry %d: id %v key %q, %d bytes; want id %v key %q, %d bytes", i, e.ID, e.Key, len(e.Payload), entries[i].ID, entries[i].Key, size)
		}
		i++
		return nil
	})
	requireNoError(t, err)
	if i != n {
		t.Fatalf("%d outbox entries, want %d", i, n)
	}
	e, found, err := d.Get([]byte("k0"))
	requireNoError(t, err)
	if !found || !e.HasValue || !bytes.Equal(e.Value, value) {
		t.Fatalf("k0: found %v, %d bytes, want %d", found, len(e.Value), size)
	}
}
