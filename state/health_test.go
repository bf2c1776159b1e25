package state

import (
	"bytes"
	"context"
	"crypto/rand"
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
)

// bgLogHandler keeps the records logged through it.
type bgLogHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *bgLogHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *bgLogHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *bgLogHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *bgLogHandler) WithGroup(string) slog.Handler      { return h }

// lines returns the records whose message starts with prefix, with their attributes.
func (h *bgLogHandler) lines(prefix string) []map[string]slog.Value {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range h.recs {
		if !strings.HasPrefix(r.Message, prefix) {
			continue
		}
		m := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
		out = append(out, m)
	}
	return out
}

// TestBackgroundErrorsDiskFull: flushes that fail with ENOSPC (a full disk) are logged at
// most once per interval with the count of those not logged, each failure pauses longer
// than the one before (up to bgPauseMax), the store's Fault says the disk is full, and once
// space returns the stalled writes complete, the fault ends and every write is there.
func TestBackgroundErrorsDiskFull(t *testing.T) {
	toggle := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".sst") {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	})}
	h := &bgLogHandler{}
	var pmu sync.Mutex
	var pauses []time.Duration
	const every = 300 * time.Millisecond
	s, err := Open("db", &Options{FS: errorfs.Wrap(vfs.NewMem(), toggle), Logger: slog.New(h), CacheSize: 1 << 20, MemTableSize: 1 << 20,
		BackgroundErrorLogEvery: every,
		testBGSleep: func(d time.Duration) {
			pmu.Lock()
			pauses = append(pauses, d)
			pmu.Unlock()
			time.Sleep(d)
		}})
	requireNoError(t, err)
	defer s.Close()
	d := s.Deployment("full")

	toggle.On()
	const batches, perBatch = 40, 16
	value := make([]byte, 16<<10) // random: the store compresses values
	_, _ = rand.Read(value)
	written := make(chan error, 1)
	go func() {
		for id := uint64(1); id <= batches; id++ {
			b := d.NewBatch(id)
			for k := range perBatch {
				b.Set(fmt.Appendf(nil, "k%03d-%02d", id, k), Entry{}, Entry{Value: value, HasValue: true})
			}
			if _, err := b.Commit(); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	waitFor(t, 10*time.Second, "the store's fault says the disk is full", func() bool { return IsDiskFull(s.Fault()) })

	// Pebble retries the flush at once; the pauses bound the retries and the interval the lines.
	start, n0 := time.Now(), s.BackgroundErrors()
	lines0 := len(h.lines("state store background job failed"))
	time.Sleep(2 * time.Second)
	window := time.Since(start)
	failures := s.BackgroundErrors() - n0
	lines := len(h.lines("state store background job failed")) - lines0
	if maxLines := int(window/every) + 1; lines > maxLines {
		t.Fatalf("%d lines logged in %s, want at most %d", lines, window, maxLines)
	}
	if maxFailures := uint64(window/bgPauseMax) + 8; failures > maxFailures {
		t.Fatalf("%d failed flushes in %s, want at most %d (a hot loop)", failures, window, maxFailures)
	}
	pmu.Lock()
	for i := 1; i < len(pauses); i++ {
		if pauses[i] < pauses[i-1] || pauses[i] > bgPauseMax {
			t.Fatalf("pauses %v: want non-decreasing up to %s", pauses, bgPauseMax)
		}
	}
	if len(pauses) < 2 || pauses[0] != bgPauseMin || pauses[len(pauses)-1] <= pauses[0] {
		t.Fatalf("pauses %v: want a backoff from %s", pauses, bgPauseMin)
	}
	pmu.Unlock()
	select {
	case err := <-written:
		t.Fatalf("the writes ended while no flush could succeed: %v", err)
	default:
	}

	toggle.Off() // space again
	select {
	case err := <-written:
		requireNoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the stalled writes did not complete once space returned")
	}
	waitFor(t, 10*time.Second, "the fault to end", func() bool { return s.Fault() == nil })

	// Counts exact: every failure is in a logged line or in a count of those not logged.
	var counted uint64
	for _, l := range h.lines("state store background job failed") {
		counted += 1 + l["not_logged_since_last"].Uint64()
	}
	ends := h.lines("state store background jobs succeed again")
	if len(ends) == 0 {
		t.Fatal("no line says the background jobs succeed again")
	}
	for _, l := range ends {
		counted += l["not_logged"].Uint64()
	}
	if total := s.BackgroundErrors(); counted != total {
		t.Fatalf("the lines account for %d failures, the store counted %d", counted, total)
	}
	// Nothing lost: every key of every batch is there.
	for id := uint64(1); id <= batches; id++ {
		for k := range perBatch {
			e, found, err := d.Get(fmt.Appendf(nil, "k%03d-%02d", id, k))
			requireNoError(t, err)
			if !found || !bytes.Equal(e.Value, value) {
				t.Fatalf("key %d-%d: found %v, %d bytes", id, k, found, len(e.Value))
			}
		}
	}
}

// waitFor polls cond until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestIsDiskFull is a table of the errors that say a disk is full.
func TestIsDiskFull(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{syscall.ENOSPC, true},
		{&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("flush: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}), true},
		{fmt.Errorf("write /data/000012.sst: no space left on device"), true},
		{errorfs.ErrInjected, false},
		{ErrFailed, false},
	}
	for _, tc := range tests {
		if got := IsDiskFull(tc.err); got != tc.want {
			t.Errorf("IsDiskFull(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
