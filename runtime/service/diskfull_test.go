package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// countingHandler counts the records logged through it by message.
type countingHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }
func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[msg]
}

// TestStoreDiskFull: every write of the state store fails with ENOSPC (a full disk). Within
// seconds the deployment's status and the service's Fault (/readyz) say "store failed: no
// space left on device"; the reopen is retried with a backoff (a bounded number of log
// lines); once space returns the store is reopened and the deployment resumes by itself,
// with every total exact.
func TestStoreDiskFull(t *testing.T) {
	env := startNATS(t)
	toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	})}
	logs := &countingHandler{n: map[string]int{}}
	svc, err := service.New(context.Background(), service.Options{CacheDir: testutil.CompileCacheDir(),
		DataDir: "/data", Conn: env.nc, Logger: slog.New(logs),
		Clock:        timeouts.NewManualClock(time.UnixMilli(1_000_000)),
		StateOptions: &state.Options{FS: errorfs.Wrap(vfs.NewMem(), toggle)},
	})
	testutil.Require(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 1})
	if err := svc.Fault(); err != nil {
		t.Fatalf("Fault before the disk is full: %v", err)
	}

	toggle.On()
	env.publish("logins.web", `{"user_id":"ada"}`, `{"user_id":"bob"}`)
	const want = "store failed: no space left on device"
	testutil.EventuallyWithin(t, 10*time.Second, "the full disk in the status", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && (strings.Contains(st.Error, want) || strings.Contains(st.LastError, want))
	})
	testutil.EventuallyWithin(t, 10*time.Second, "the full disk in Fault", func() bool {
		err := svc.Fault()
		return err != nil && strings.Contains(err.Error(), want)
	})
	// The reopen backs off: 100 ms doubling, so at most 6 attempts in 3 s (not a hot loop).
	n0 := logs.count("reopening the state store failed; retrying")
	time.Sleep(3 * time.Second)
	if n := logs.count("reopening the state store failed; retrying") - n0; n > 6 {
		t.Fatalf("%d reopen attempts logged in 3s: want a backoff", n)
	}

	toggle.Off() // space again
	env.waitTotals(map[string]int{"ada": 2, "bob": 1})
	env.waitRunning("logincount")
	testutil.EventuallyWithin(t, 10*time.Second, "the fault to end", func() bool { return svc.Fault() == nil })
	if n := logs.count("state store reopened; starting the deployments again"); n != 1 {
		t.Fatalf("store reopened %d times, want 1", n)
	}
}

// TestStatusHeartbeat: the status of a deployment is rewritten at least every
// client.StatusHeartbeat, idle or not, so that only a runtime that cannot write it leaves it
// older than client.StaleAfter.
func TestStatusHeartbeat(t *testing.T) {
	env := startNATS(t)
	env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(1_000_000)))
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	st, err := env.client.Status(context.Background(), "logincount")
	testutil.Require(t, err)
	first := st.UpdatedAt
	// Idle: the heartbeat rewrites the status at least every StatusHeartbeat.
	testutil.EventuallyWithin(t, 2*client.StatusHeartbeat+time.Second, "a heartbeat", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && st.UpdatedAt.After(first) && !st.Stale
	})
}

// mountTmpfs mounts a tmpfs of size under a new temp dir, or skips the test when it may
// not (not root, no mount namespace rights).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a %s tmpfs here (%v); the injected-fault tests cover the same paths", size, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fillDisk writes a file in dir until its file system is full, and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := dir + "/filler"
	f, err := os.Create(path)
	testutil.Require(t, err)
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for _, n := range []int{1 << 20, 4096} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	return path
}

// TestNATSDiskFullHeals runs a deployment on an embedded server whose storage is a real
// 64 MiB file system, fills it, and frees it again: the service's Fault (/readyz) says the
// NATS server's disk is full within seconds, and once space is back the server heals
// without a restart, the deployment resumes, and every total is exact (rows sent again
// with their message ids count once). A stop while the disk is full spends at most 3 s on
// its final writes.
func TestNATSDiskFullHeals(t *testing.T) {
	dir := mountTmpfs(t, "64m")
	env := startNATSIn(t, dir+"/nats")
	svc, err := service.New(context.Background(), service.Options{CacheDir: testutil.CompileCacheDir(),
		DataDir: t.TempDir(), Conn: env.nc, Logger: testutil.DiscardLogger(),
		Clock:     timeouts.NewManualClock(time.UnixMilli(1_000_000)),
		NATSFault: func() error { return service.EmbeddedFault(env.srv) },
	})
	testutil.Require(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	send := func(id, user string) error {
		pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer pcancel()
		_, err := env.js.Publish(pctx, "logins.web", []byte(`{"user_id":"`+user+`"}`), jetstream.WithMsgID(id))
		return err
	}
	testutil.Require(t, send("r0", "ada"))
	env.waitTotals(map[string]int{"ada": 1})

	filler := fillDisk(t, dir)
	// Rows published while the disk is full: refused (or not), sent again below.
	var refused []string
	for i := 1; i <= 200 && len(refused) == 0; i++ {
		id := fmt.Sprintf("r%d", i)
		if err := send(id, "bob"); err != nil {
			refused = append(refused, id)
		}
	}
	sent := 0
	fmt.Sscanf(refused[len(refused)-1], "r%d", &sent)
	testutil.EventuallyWithin(t, 10*time.Second, "the NATS server's full disk in Fault", func() bool {
		err := svc.Fault()
		return errors.Is(err, service.ErrNATSDiskFull)
	})

	testutil.Require(t, os.Remove(filler))
	testutil.EventuallyWithin(t, 20*time.Second, "the fault to end", func() bool { return svc.Fault() == nil })
	for _, id := range refused {
		testutil.EventuallyWithin(t, 10*time.Second, "the refused row sent again", func() bool { return send(id, "bob") == nil })
	}
	env.waitTotals(map[string]int{"ada": 1, "bob": sent})
	env.waitRunning("logincount")

	// A stop while the disk is full again returns within seconds.
	fillDisk(t, dir)
	for i := 0; i < 200 && send(fmt.Sprintf("s%d", i), "cy") == nil; i++ {
	}
	start := time.Now()
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its stop")
	}
	done <- nil // for the deferred receive
	// The final writes (statuses, leave) take at most stopWritesBudget (3 s) together; a
	// drain whose batch is delivering its outputs waits for output.PublishAckTimeout (15 s).
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the stop took %s with the NATS server's disk full, want at most 15s + 3s", took)
	} else {
		t.Logf("stop with the NATS server's disk full took %s", took.Round(time.Millisecond))
	}
}
