package state

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// walGate holds the syncs of a store's write-ahead log while closed, and fails them with
// errorfs.ErrInjected while failing: the fsync of a batch committed with CommitNoSyncWait,
// made to last as long as a test needs.
type walGate struct {
	mu      sync.Mutex
	closed  chan struct{} // nil: open
	failing bool
	held    chan struct{} // a sync reached the closed gate (capacity 1)
}

func newWALGate() *walGate { return &walGate{held: make(chan struct{}, 1)} }

func (g *walGate) close() {
	g.mu.Lock()
	g.closed = make(chan struct{})
	g.mu.Unlock()
}

// open lets the held syncs go on, failing them when fail.
func (g *walGate) open(fail bool) {
	g.mu.Lock()
	c := g.closed
	g.closed, g.failing = nil, fail
	g.mu.Unlock()
	if c != nil {
		close(c)
	}
}

func (g *walGate) inject(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	g.mu.Lock()
	c := g.closed
	g.mu.Unlock()
	if c != nil {
		select {
		case g.held <- struct{}{}:
		default:
		}
		<-c
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failing {
		return errorfs.ErrInjected
	}
	return nil
}

// syncDone runs y.Wait on a goroutine of its own and returns its outcome's channel.
func syncDone(y *Sync) <-chan error {
	done := make(chan error, 1)
	go func() { done <- y.Wait() }()
	return done
}

// TestCommitNoSyncWait: a batch committed with CommitNoSyncWait is read at once (by Get,
// Progress and the next batch) while its fsync is held, Wait returns only once the sync is
// done, and a crash before that may lose it, never more.
func TestCommitNoSyncWait(t *testing.T) {
	mem := vfs.NewCrashableMem()
	gate := newWALGate()
	s, err := Open("db", &Options{FS: errorfs.Wrap(mem, errorfs.InjectorFunc(gate.inject)), Logger: quietLogger()})
	requireNoError(t, err)
	d := s.Deployment("nosync")
	b := d.NewBatch(1)
	b.Set([]byte("a"), Entry{}, val("a1"))
	b.SetProgress(10, 1)
	requireNoError(t, commitErr(b))

	gate.close()
	b = d.NewBatch(2)
	b.Set([]byte("a"), val("a1"), val("a2"))
	b.SetProgress(20, 2)
	b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte("a"), Payload: []byte("o2")})
	p, y, err := b.CommitNoSyncWait()
	requireNoError(t, err)
	if y == nil || p.BatchID != 2 {
		t.Fatalf("CommitNoSyncWait = %+v, %v; want batch 2 and a sync to wait for", p, y)
	}
	done := syncDone(y)
	<-gate.held
	en, _, err := d.Get([]byte("a"))
	requireNoError(t, err)
	requireEqual(t, "a2", string(en.Value), "read while the sync is held")
	got, err := d.Progress()
	requireNoError(t, err)
	requireEqual(t, uint64(2), got.BatchID)
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while the sync was held", err)
	case <-time.After(20 * time.Millisecond):
	}
	// A crash now may lose batch 2 (here it does: the log was not synced), and nothing else.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	gate.open(false)
	requireNoError(t, <-done)
	requireNoError(t, s.Close())

	s2, err := Open("db", &Options{FS: crashed, Logger: quietLogger()})
	requireNoError(t, err)
	p2, err := s2.Deployment("nosync").Progress()
	requireNoError(t, err)
	if p2.BatchID != 1 && p2.BatchID != 2 {
		t.Fatalf("after a crash before the sync: batch %d, want 1 or 2", p2.BatchID)
	}
	requireNoError(t, s2.Close())

	// After Wait returned, a crash keeps it.
	s3, err := Open("db", &Options{FS: mem, Logger: quietLogger()})
	requireNoError(t, err)
	defer s3.Close()
	d = s3.Deployment("nosync")
	b = d.NewBatch(3)
	b.SetProgress(30, 3)
	_, y, err = b.CommitNoSyncWait()
	requireNoError(t, err)
	requireNoError(t, y.Wait())
	s4, err := Open("db", &Options{FS: mem.CrashClone(vfs.CrashCloneCfg{}), Logger: quietLogger()})
	requireNoError(t, err)
	defer s4.Close()
	p4, err := s4.Deployment("nosync").Progress()
	requireNoError(t, err)
	requireEqual(t, uint64(3), p4.BatchID, "a synced batch after a crash")
}

// TestCommitNoSyncWaitFailedSync: when the fsync of a batch committed with CommitNoSyncWait
// fails, Wait says so (ErrFailed) and the store is failed; the next batch, which read the
// batch's state before the sync failed, cannot become durable either; and reopened after a
// crash the store holds the batch before, or that batch, never the next.
func TestCommitNoSyncWaitFailedSync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	gate := newWALGate()
	s, err := Open("db", &Options{FS: errorfs.Wrap(mem, errorfs.InjectorFunc(gate.inject)), Logger: quietLogger()})
	requireNoError(t, err)
	d := s.Deployment("nosync")
	b := d.NewBatch(1)
	b.Set([]byte("a"), Entry{}, val("a1"))
	b.SetProgress(10, 1)
	requireNoError(t, commitErr(b))

	gate.close()
	b = d.NewBatch(2)
	b.Set([]byte("a"), val("a1"), val("a2"))
	b.SetProgress(20, 2)
	_, y2, err := b.CommitNoSyncWait()
	requireNoError(t, err)
	done2 := syncDone(y2)
	<-gate.held
	// The next batch reads batch 2's state and commits after it.
	en, _, err := d.Get([]byte("a"))
	requireNoError(t, err)
	b = d.NewBatch(3)
	b.Set([]byte("a"), en, val("a3"))
	b.SetProgress(30, 3)
	_, y3, err := b.CommitNoSyncWait()
	requireNoError(t, err)
	done3 := syncDone(y3)
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	gate.open(true)
	for i, done := range []<-chan error{done2, done3} {
		if err := <-done; !errors.Is(err, ErrFailed) {
			t.Fatalf("Wait of batch %d after a failed sync: %v, want ErrFailed", i+2, err)
		}
	}
	if _, err := d.Progress(); !errors.Is(err, ErrFailed) {
		t.Fatalf("store after a failed sync: %v, want ErrFailed", err)
	}
	_ = s.Close()

	s2, err := Open("db", &Options{FS: crashed, Logger: quietLogger()})
	requireNoError(t, err)
	defer s2.Close()
	p, err := s2.Deployment("nosync").Progress()
	requireNoError(t, err)
	if p.BatchID != 1 && p.BatchID != 2 {
		t.Fatalf("after a failed sync and a crash: batch %d, want 1 or 2", p.BatchID)
	}
}
