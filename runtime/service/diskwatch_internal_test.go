package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// startWatched starts an embedded server in dataDir and returns it, its disk watch, and a
// JetStream client with stream FULL (file storage, subjects full.>).
func startWatched(t *testing.T, dataDir string) (*server.Server, *diskWatch, jetstream.JetStream) {
	t.Helper()
	srv, err := StartEmbedded(EmbeddedOptions{DataDir: dataDir, Port: -1, Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	w, ok := watches.Load(srv)
	if !ok {
		t.Fatal("StartEmbedded started no disk watch")
	}
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	testutil.Require(t, err)
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "FULL", Subjects: []string{"full.>"}, Storage: jetstream.FileStorage})
	testutil.Require(t, err)
	return srv, w.(*diskWatch), js
}

// publish publishes n messages with ids prefix-0 .. prefix-(n-1), each of size bytes, and
// returns how many were acknowledged, stopping at the first failure.
func publish(js jetstream.JetStream, prefix string, n, size int) (acked int, err error) {
	payload := make([]byte, size)
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err = js.Publish(ctx, "full.x", payload, jetstream.WithMsgID(fmt.Sprintf("%s-%d", prefix, i)))
		cancel()
		if err != nil {
			return acked, err
		}
		acked++
	}
	return acked, nil
}

// messages returns the number of messages in stream FULL.
func messages(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), "FULL")
	testutil.Require(t, err)
	info, err := s.Info(context.Background())
	testutil.Require(t, err)
	return info.State.Msgs
}

// TestDiskWatchHealsInjected: a full disk reported by the server's log (as nats-server logs
// a stream's write error) shows in EmbeddedFault at once and stays while the file system
// has no free space; once it has, the watch restarts JetStream in the process: the fault
// ends, the stream and its messages are there, and writes work on the same connection.
func TestDiskWatchHealsInjected(t *testing.T) {
	srv, w, js := startWatched(t, t.TempDir())
	acked, err := publish(js, "before", 10, 100)
	testutil.Require(t, err)
	var free atomic.Uint64 // injected: no space
	w.mu.Lock()
	w.free = func(string) (uint64, error) { return free.Load(), nil }
	w.mu.Unlock()

	srv.Errorf("Filestore [FULL] Critical write error: write %s: no space left on device", filepath.Join(w.dir, "x.blk"))
	err = EmbeddedFault(srv)
	if !errors.Is(err, ErrNATSDiskFull) {
		t.Fatalf("EmbeddedFault = %v, want ErrNATSDiskFull", err)
	}
	time.Sleep(3 * DiskWatchInterval) // no space: no restart
	if EmbeddedFault(srv) == nil || w.heals != 0 {
		t.Fatalf("the fault ended without space (heals %d)", w.heals)
	}

	free.Store(DiskHealFreeBytes)
	testutil.EventuallyWithin(t, 10*time.Second, "the fault healed", func() bool { return EmbeddedFault(srv) == nil })
	w.mu.Lock()
	heals := w.heals
	w.mu.Unlock()
	if heals != 1 || !srv.JetStreamEnabled() {
		t.Fatalf("heals %d, JetStream enabled %v: want one restart", heals, srv.JetStreamEnabled())
	}
	var more int
	testutil.EventuallyWithin(t, 10*time.Second, "publishing after the restart", func() bool {
		more, err = publish(js, "after", 5, 100)
		return err == nil
	})
	if got := messages(t, js); got != uint64(acked+more) {
		t.Fatalf("stream holds %d messages, want %d", got, acked+more)
	}
}

// TestDiskWatchHealsTmpfs fills a real small file system (a 64 MiB tmpfs, mounted when the
// test may: root in a container) under the embedded server until a stream's writes fail
// with "no space left on device", then frees the space: the watch heals the stream without
// a restart of the process, and every message acknowledged (or sent again with its message
// id) is in the stream exactly once.
func TestDiskWatchHealsTmpfs(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a 64 MiB tmpfs here (%v): TestDiskWatchHealsInjected covers the heal with an injected fault", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	srv, _, js := startWatched(t, filepath.Join(dir, "nats"))
	acked, err := publish(js, "before", 20, 1000)
	testutil.Require(t, err)

	// Fill the file system, leaving nothing.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	testutil.Require(t, err)
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	for {
		if _, err := f.Write(chunk[:4096]); err != nil {
			break
		}
	}
	_ = f.Close()

	// Publish until the stream refuses (what is buffered fails at its flush).
	var failedAt int
	for i := 0; ; i++ {
		if i > 20_000 {
			t.Fatal("the stream kept accepting writes on a full disk")
		}
		n, err := publish(js, fmt.Sprintf("full-%d", i), 1, 8000)
		acked += n
		if err != nil {
			failedAt = i
			break
		}
	}
	testutil.EventuallyWithin(t, 5*time.Second, "the full disk in EmbeddedFault", func() bool {
		return errors.Is(EmbeddedFault(srv), ErrNATSDiskFull)
	})

	testutil.Require(t, os.Remove(filler))
	testutil.EventuallyWithin(t, 15*time.Second, "the fault healed", func() bool { return EmbeddedFault(srv) == nil })
	// The refused message is sent again with its id: stored once whether it landed or not.
	testutil.EventuallyWithin(t, 10*time.Second, "the refused message sent again", func() bool {
		_, err := publish(js, fmt.Sprintf("full-%d", failedAt), 1, 8000)
		return err == nil
	})
	more, err := publish(js, "after", 20, 1000)
	testutil.Require(t, err)
	if got, want := messages(t, js), uint64(acked+1+more); got != want {
		t.Fatalf("stream holds %d messages, want %d (acknowledged %d before, the refused one, %d after)", got, want, acked, more)
	}
}
