package state

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// DefaultBackgroundErrorLogEvery is the default of Options.BackgroundErrorLogEvery.
const DefaultBackgroundErrorLogEvery = 10 * time.Second

// Bounds of the pause after each of Pebble's failed background jobs (see bgErrors.failed).
const (
	bgPauseMin = 10 * time.Millisecond
	bgPauseMax = 500 * time.Millisecond
)

// IsDiskFull tells whether err says that a disk is full: ENOSPC (no space left on device),
// or EDQUOT (a quota), anywhere in its chain or in its text (errors that crossed a process
// or a library boundary as text).
func IsDiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "no space left on device") || strings.Contains(msg, "disk quota exceeded")
}

// bgErrors keeps Pebble's background errors (failed flushes and compactions: a full disk),
// which Pebble retries at once, in a loop, for as long as they fail. It logs them at most
// once per interval, with the count of those it did not log, and pauses each failed job for
// a time that doubles with each failure in a row (bgPauseMin to bgPauseMax), which bounds
// Pebble's retries (a flush calls it holding Pebble's lock: the pause is the backoff Pebble
// does not have). A successful flush or compaction ends the fault.
type bgErrors struct {
	logger *slog.Logger
	every  time.Duration
	sleep  func(time.Duration) // time.Sleep; tests count the pauses

	mu        sync.Mutex
	inARow    int       // failures since the last success
	total     uint64    // failures since the store opened
	unlogged  uint64    // failures since the last logged line
	loggedAt  time.Time // when the last line was logged (zero: none yet in this fault)
	last      error     // the last failure while inARow > 0
	lastPause time.Duration
}

func newBGErrors(logger *slog.Logger, every time.Duration) *bgErrors {
	return &bgErrors{logger: logger, every: every, sleep: time.Sleep}
}

// listener returns the Pebble event listener that feeds b.
func (b *bgErrors) listener() *pebble.EventListener {
	return &pebble.EventListener{
		BackgroundError: b.failed,
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				b.succeeded()
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err == nil {
				b.succeeded()
			}
		},
	}
}

// failed notes a failed background job, logs it when a line is due, and pauses.
func (b *bgErrors) failed(err error) {
	b.mu.Lock()
	b.inARow++
	b.total++
	b.last = err
	now := time.Now()
	var logIt bool
	var repeated uint64
	if b.loggedAt.IsZero() || now.Sub(b.loggedAt) >= b.every {
		logIt, repeated = true, b.unlogged
		b.loggedAt, b.unlogged = now, 0
	} else {
		b.unlogged++
	}
	pause := min(bgPauseMin<<min(b.inARow-1, 16), bgPauseMax)
	b.lastPause = pause
	total := b.total
	b.mu.Unlock()
	if logIt {
		b.logger.Error("state store background job failed; Pebble retries it (logged at most once per interval)",
			"component", "pebble", "err", err, "disk_full", IsDiskFull(err), "not_logged_since_last", repeated, "total", total, "interval", b.every)
	}
	b.sleep(pause)
}

// succeeded notes a successful flush or compaction: a fault ends.
func (b *bgErrors) succeeded() {
	b.mu.Lock()
	if b.inARow == 0 {
		b.mu.Unlock()
		return
	}
	n, unlogged, last := b.inARow, b.unlogged, b.last
	b.inARow, b.unlogged, b.loggedAt, b.last = 0, 0, time.Time{}, nil
	b.mu.Unlock()
	b.logger.Info("state store background jobs succeed again", "component", "pebble", "failures_in_a_row", n, "not_logged", unlogged, "last_err", last)
}

// fault returns the last failure while background jobs fail, nil once one succeeded.
func (b *bgErrors) fault() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inARow == 0 {
		return nil
	}
	return b.last
}

// count returns the failures since the store opened.
func (b *bgErrors) count() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Fault returns what keeps the store from working, nil when nothing does: the error of a
// failed write (wrapping ErrFailed: the store must be reopened), or the last error of
// Pebble's background jobs while they fail in a row (a flush or compaction that cannot
// write: a full disk; writes stall until one succeeds, and the fault ends by itself then).
// [IsDiskFull] tells whether it is a full disk. Cheap: the service asks it every few
// seconds.
func (s *Store) Fault() error {
	s.mu.RLock()
	failed := s.failed
	s.mu.RUnlock()
	if failed != nil {
		return failed
	}
	if s.bg == nil {
		return nil
	}
	return s.bg.fault()
}

// BackgroundErrors returns how many of Pebble's background jobs failed since the store
// opened (each is retried; see Options.BackgroundErrorLogEvery).
func (s *Store) BackgroundErrors() uint64 {
	if s.bg == nil {
		return 0
	}
	return s.bg.count()
}
