package service

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// The embedded server's disk watch (see diskWatch).
const (
	// DiskWatchInterval is how often the embedded server's disk watch checks a full disk
	// for free space again, and JetStream for being enabled.
	DiskWatchInterval = time.Second
	// DiskHealFreeBytes is the free space the disk of the embedded server's storage needs
	// before the disk watch restarts JetStream after the disk was full.
	DiskHealFreeBytes = 8 << 20
	// diskRestartBackoffMax bounds the backoff between JetStream restarts that fail.
	diskRestartBackoffMax = 30 * time.Second
)

// ErrNATSDiskFull is wrapped by [EmbeddedFault] while the embedded server cannot store
// messages because its disk is full (or was, and JetStream was not restarted yet).
var ErrNATSDiskFull = errors.New("service: the NATS server's disk is full")

// watches holds the disk watch of each server StartEmbedded started (*server.Server to
// *diskWatch), until the server shuts down.
var watches sync.Map

// EmbeddedFault returns what keeps the embedded server srv (started by [StartEmbedded])
// from storing messages, nil when nothing does or srv is not one: a full disk (wrapping
// [ErrNATSDiskFull]: "no space left on device"), until space is back and JetStream restarted.
// serve gives it to the service as Options.NATSFault.
func EmbeddedFault(srv *server.Server) error {
	w, ok := watches.Load(srv)
	if !ok {
		return nil
	}
	return w.(*diskWatch).fault()
}

// serverDiskFull tells whether a message the server logged says that its disk is full: a
// stream's store write failed with ENOSPC (nats-server then keeps the error, and refuses
// every later write to the stream, until the stream's store is opened again), or JetStream
// was disabled for running out of resources.
func serverDiskFull(msg string) bool {
	return strings.Contains(msg, "no space left on device") || strings.Contains(msg, "resources, will be DISABLED")
}

// diskWatch heals the embedded server after a full disk. nats-server keeps a stream's write
// error (its file store's) until the store is opened again, and a clustered server disables
// JetStream on a full disk: neither heals when space is freed. The watch learns of the
// fault from the server's log (see serverDiskFull) or from JetStream being disabled, then
// checks the free space of the storage's file system every DiskWatchInterval, and once it
// is at least DiskHealFreeBytes restarts JetStream in the process (ShutdownJetStream, then
// EnableJetStream with the configuration it started with): every stream's store is opened
// again from disk, and the clients' connections stay. What a failed write refused was never
// acknowledged, so its publisher sends it again (the runtime's outbox and input
// acknowledgements; message ids dedupe a write that did land).
type diskWatch struct {
	srv     *server.Server
	dir     string // the JetStream storage directory
	logger  *slog.Logger
	restart func() error // restarts JetStream
	every   time.Duration

	mu       sync.Mutex
	free     func(dir string) (uint64, error) // the free space of dir's file system; tests replace it
	err      error                            // the fault, nil when none
	heals    int                              // restarts that healed a fault
	attempts int                              // restarts that failed since the fault began
}

func newDiskWatch(srv *server.Server, storeDir string, logger *slog.Logger) *diskWatch {
	w := &diskWatch{srv: srv, dir: storeDir, logger: logger, free: freeBytes, every: DiskWatchInterval}
	w.restart = func() error {
		if srv.JetStreamEnabled() {
			if err := srv.ShutdownJetStream(); err != nil {
				return err
			}
		}
		// As the server enables it at start (Options.StoreDir, default limits).
		return srv.EnableJetStream(&server.JetStreamConfig{StoreDir: storeDir, Strict: true, CompressOK: true})
	}
	return w
}

// freeBytes returns the bytes available to an unprivileged user on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// note records a full disk the server reported (msg, from its log).
func (w *diskWatch) note(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = fmt.Errorf("%w: no space left on device (free space in %s: JetStream restarts by itself once %d MiB are free): %s", ErrNATSDiskFull, w.dir, DiskHealFreeBytes>>20, msg)
		w.attempts = 0
		w.logger.Error("NATS server: disk full; streams refuse writes until space is freed", "dir", w.dir, "err", msg)
	}
}

// fault returns the current fault, nil when none.
func (w *diskWatch) fault() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// run checks every w.every until the server shuts down.
func (w *diskWatch) run() {
	defer watches.Delete(w.srv)
	t := time.NewTicker(w.every)
	defer t.Stop()
	var next time.Time // no restart before (a backoff after failed ones)
	for range t.C {
		if !w.srv.Running() {
			return
		}
		if !w.srv.JetStreamEnabled() && w.fault() == nil {
			w.note("JetStream is disabled")
		}
		if w.fault() != nil && !time.Now().Before(next) {
			if wait, ok := w.heal(); !ok {
				next = time.Now().Add(wait)
			}
		}
	}
}

// heal restarts JetStream when the disk has DiskHealFreeBytes free. ok false with the time
// to wait before the next attempt when the restart failed.
func (w *diskWatch) heal() (wait time.Duration, ok bool) {
	w.mu.Lock()
	freeOf := w.free
	w.mu.Unlock()
	free, err := freeOf(w.dir)
	if err != nil || free < DiskHealFreeBytes {
		return 0, true // checked again next time
	}
	w.logger.Warn("NATS server: space is free again; restarting JetStream so that the streams write again", "dir", w.dir, "free_bytes", free)
	start := time.Now()
	err = w.restart()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil || !w.srv.JetStreamEnabled() {
		w.attempts++
		wait = min(w.every<<min(w.attempts, 10), diskRestartBackoffMax)
		w.logger.Error("NATS server: restarting JetStream failed; retrying", "err", err, "in", wait)
		return wait, false
	}
	w.err, w.attempts = nil, 0
	w.heals++
	w.logger.Info("NATS server: JetStream restarted after the disk was full; streams write again", "took", time.Since(start).Round(time.Millisecond))
	return 0, true
}
