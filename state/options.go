package state

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// DefaultCacheSize is the default size of Pebble's block cache: 64 MiB.
const DefaultCacheSize = 64 << 20

// DefaultMemTableSize is the default size of one Pebble memtable: 32 MiB.
const DefaultMemTableSize = 32 << 20

// Options configures Open. The zero value is usable: Open calls
// EnsureDefaults on a copy, so the caller's Options is never modified.
type Options struct {
	// FS is the filesystem the store lives on. Default vfs.Default (the
	// operating system's). Tests use vfs.NewMem() or an errorfs-wrapped FS.
	FS vfs.FS

	// CacheSize is the number of bytes of Pebble's block cache available
	// for data and index blocks. Default DefaultCacheSize (64 MiB). Pebble
	// charges memtables to the same cache, so the cache is created with
	// CacheSize + 2*MemTableSize bytes. Together they bound the memory the
	// store uses (outside the Go heap, when cgo is enabled), whatever the
	// number of keys.
	CacheSize int64

	// MemTableSize is the size of one Pebble memtable in bytes. Default
	// DefaultMemTableSize (32 MiB). Pebble keeps up to two of them in
	// memory; larger memtables absorb micro-batches of thousands of keys
	// with less write amplification (Pebble's own 4 MiB default makes a
	// 4096-key batch about 40% slower to commit).
	MemTableSize uint64

	// StateCacheSize is the byte budget of the hot-state cache: committed
	// state entries (and the absence of keys) kept in the Go heap so that
	// most Deployment.Get calls skip Pebble. Default DefaultStateCacheSize
	// (64 MiB); negative disables the cache. Each entry is charged its key
	// and value bytes plus a fixed overhead, so the budget bounds the heap
	// the cache holds (up to the garbage collector's slack).
	StateCacheSize int64

	// Logger receives the store's logs. Default slog.Default(). Pebble's own
	// informational messages are logged at slog.LevelDebug (silent with the
	// default handler), its errors at slog.LevelError.
	Logger *slog.Logger

	// ReadOnly opens the store read-only (for inspection by the CLI while
	// the runtime is stopped). Writes return ErrReadOnly. Default false.
	ReadOnly bool

	// BackgroundErrorLogEvery bounds the logging of Pebble's background errors (a flush or
	// compaction that fails, as on a full disk, which Pebble retries at once for as long as
	// it fails): one line per interval at most, with the count of the failures not logged.
	// Default DefaultBackgroundErrorLogEvery (10s).
	BackgroundErrorLogEvery time.Duration

	// testBGSleep replaces the pause after a failed background job in tests.
	testBGSleep func(time.Duration)

	// Tune, if set, is called with the Pebble options just before
	// pebble.Open, after the store has filled in its own settings. It is an
	// escape hatch for benchmarks and operators; FS, Cache, Logger and
	// ReadOnly are overwritten afterwards; the cache is sized from the
	// MemTableSize Tune leaves. Default nil.
	Tune func(*pebble.Options)
}

// EnsureDefaults fills in the defaults documented on each field and returns
// o. It is safe to call on a nil receiver, which returns new defaults.
func (o *Options) EnsureDefaults() *Options {
	if o == nil {
		o = &Options{}
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.StateCacheSize == 0 {
		o.StateCacheSize = DefaultStateCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BackgroundErrorLogEvery <= 0 {
		o.BackgroundErrorLogEvery = DefaultBackgroundErrorLogEvery
	}
	return o
}

// Validate reports whether o, after EnsureDefaults, is usable.
func (o *Options) Validate() error {
	if o == nil {
		return errors.New("state: nil Options")
	}
	if o.FS == nil {
		return errors.New("state: Options.FS is nil")
	}
	if o.CacheSize < 0 {
		return fmt.Errorf("state: Options.CacheSize %d is negative", o.CacheSize)
	}
	if o.MemTableSize < 1<<20 || o.MemTableSize >= 4<<30 {
		return fmt.Errorf("state: Options.MemTableSize %d must be in [1 MiB, 4 GiB)", o.MemTableSize)
	}
	if o.Logger == nil {
		return errors.New("state: Options.Logger is nil")
	}
	return nil
}
