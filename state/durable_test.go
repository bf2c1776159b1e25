package state

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// crashOpen opens a store on a crashable in-memory filesystem; crash returns the store a
// power loss at that moment would leave (only what was synced), opened.
func crashOpen(t *testing.T) (s *Store, crash func() *Store) {
	t.Helper()
	fs := vfs.NewCrashableMem()
	opts := func(fs vfs.FS) *Options {
		return &Options{FS: fs, Logger: quietLogger(), CacheSize: 1 << 20, MemTableSize: 1 << 20}
	}
	s, err := Open("db", opts(fs))
	requireNoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, func() *Store {
		t.Helper()
		c, err := Open("db", opts(fs.CrashClone(vfs.CrashCloneCfg{})))
		requireNoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
}

// TestSyncAcks: acknowledgements are not synced by themselves (a later synced Commit makes
// them durable, as Pebble's log is sequential), so after a power loss they may come back;
// after SyncAcks they stay deleted.
func TestSyncAcks(t *testing.T) {
	s, crash := crashOpen(t)
	d := s.Deployment("acks")
	pending := func(d *Deployment) int {
		n := 0
		requireNoError(t, d.Outbox(func(OutboxEntry) error { n++; return nil }))
		return n
	}
	for id := uint64(1); id <= 3; id++ {
		b := d.NewBatch(id)
		b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte(`"k"`), Payload: []byte(`{}`)})
		requireNoError(t, commitErr(b))
	}

	requireNoError(t, d.AckOutbox(OutboxID{BatchID: 1}))
	requireEqual(t, 3, pending(crash().Deployment("acks")), "an unsynced ack is lost in a crash")

	requireNoError(t, d.SyncAcks())
	requireEqual(t, 2, pending(crash().Deployment("acks")), "after SyncAcks")

	// A synced commit after an ack makes the ack durable too.
	requireNoError(t, d.AckOutbox(OutboxID{BatchID: 2}))
	requireNoError(t, commitErr(d.NewBatch(4)))
	requireEqual(t, 1, pending(crash().Deployment("acks")), "after a synced commit")

	// SyncAcks with nothing new to sync is harmless.
	requireNoError(t, d.SyncAcks())
	requireNoError(t, d.AckOutbox(OutboxID{BatchID: 3}))
	requireNoError(t, d.SyncAcks())
	requireEqual(t, 0, pending(crash().Deployment("acks")), "after the last ack and SyncAcks")
}
