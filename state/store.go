package state

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
)

// FormatVersion is the on-disk format this package writes and reads.
// Open migrates a store of version 1 (see the package documentation) and
// refuses any other version with ErrFormatVersion.
const FormatVersion uint32 = 2

// pebbleFormat pins Pebble's format major version, so that upgrading the
// Pebble module never silently ratchets the on-disk format.
const pebbleFormat = pebble.FormatValueSeparation

// Store is an open state store. It is safe for concurrent use.
type Store struct {
	db    *pebble.DB
	opts  Options
	dir   string
	id    string
	cache *stateCache // nil when disabled
	bg    *bgErrors   // Pebble's background errors (health.go)

	logs    sync.Pool // *setLog, reused by batches
	keyBufs sync.Pool // *[]byte, Pebble keys of Get

	floorMu sync.Mutex
	floors  map[string][]byte // deployment -> outbox key below which all is acknowledged (outbox.go)

	replMu sync.RWMutex
	repls  map[string]Replicator // deployment -> its Replicator (replicate.go)

	writeLocks sync.Map // deployment -> *sync.Mutex, held by each write of it (Deployment.lockWrite)

	mu     sync.RWMutex // guards closed and failed
	closed bool
	failed error
	// refs counts operations in flight; Close waits for them so that Pebble
	// never sees a call (or an open iterator) after DB.Close.
	refs sync.WaitGroup
}

// Open opens the store in dir, creating dir and an empty store if missing
// (unless opts.ReadOnly). opts may be nil; it is not modified or retained.
//
// Open writes the format version on a new store and checks it on an
// existing one: a newer or unknown version, or a non-empty Pebble database
// without one, fails with an error wrapping ErrFormatVersion. A store of
// format version 1 is migrated to FormatVersion, with one synced write,
// before Open returns; opened read-only, it fails with ErrFormatVersion.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !o.ReadOnly {
		if err := o.FS.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("state: create %s: %w", dir, err)
		}
	}
	popts := &pebble.Options{FormatMajorVersion: pebbleFormat, MemTableSize: o.MemTableSize}
	for i := range popts.Levels {
		// Point lookups (Get) are exact keys: bloom filters skip most tables.
		popts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	// Every batch rewrites the values of its keys, spread over the whole key space, and the
	// hot-state cache serves most reads: compactions, not reads, are what grows with the
	// state. Fewer, larger ones (more L0 tables before compacting them into a larger base
	// level) write less (see RATIONALE.md, "Pebble's compactions").
	popts.L0CompactionThreshold = 8
	popts.L0StopWritesThreshold = 24
	popts.LBaseMaxBytes = 256 << 20
	if o.Tune != nil {
		o.Tune(popts)
	}
	// Pebble reserves the memory of its memtables (up to two of them while
	// writes flow) in the block cache; size the cache so that CacheSize
	// bytes remain for blocks.
	cache := pebble.NewCache(o.CacheSize + 2*int64(popts.MemTableSize))
	defer cache.Unref()
	popts.FS = o.FS
	popts.Cache = cache
	popts.Logger = pebbleLogger{l: o.Logger}
	popts.LoggerAndTracer = nil
	bg := newBGErrors(o.Logger, o.BackgroundErrorLogEvery)
	if o.testBGSleep != nil {
		bg.sleep = o.testBGSleep
	}
	el := bg.listener()
	if popts.EventListener != nil { // set by Tune: both hear every event
		merged := pebble.TeeEventListener(*popts.EventListener, *el)
		el = &merged
	}
	popts.EventListener = el
	popts.ReadOnly = o.ReadOnly
	popts.ErrorIfNotExists = o.ReadOnly

	db, err := openPebble(dir, popts)
	if err != nil {
		return nil, fmt.Errorf("state: open %s: %w", dir, err)
	}
	// A store starts with an empty cache: what it holds is only ever what
	// this Store read or committed.
	s := &Store{db: db, opts: o, dir: dir, cache: newStateCache(o.StateCacheSize), bg: bg}
	if err := s.checkFormat(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("state: open %s: %w", dir, err)
	}
	if err := s.loadID(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("state: open %s: %w", dir, err)
	}
	return s, nil
}

// loadID reads the store's identity, creating it on a new store.
func (s *Store) loadID() error {
	v, closer, err := s.db.Get(idKey)
	if err == nil {
		s.id = string(v)
		return closer.Close()
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	if s.opts.ReadOnly {
		return nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	id := hex.EncodeToString(b[:])
	if err := s.write(func() error { return s.db.Set(idKey, []byte(id), pebble.Sync) }); err != nil {
		return err
	}
	s.id = id
	return nil
}

// ID returns the store's identity: 16 random hex digits made when the store was created,
// kept for its life. A store made afresh (a new directory, a lost disk) gets a new ID, so
// identifiers derived from it (such as output message ids) never collide with those of an
// earlier store that counted batches from 1 too. Empty for a read-only store that has none.
func (s *Store) ID() string { return s.id }

// openPebble calls pebble.Open, turning a Fatalf of our logger into an
// error.
func openPebble(dir string, popts *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			db, err = nil, fe
		}
	}()
	return pebble.Open(dir, popts)
}

// checkFormat writes or verifies the format-version key, migrating a
// version-1 store.
func (s *Store) checkFormat() error {
	v, closer, err := s.db.Get(formatKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		iter, err := s.db.NewIter(nil)
		if err != nil {
			return err
		}
		nonEmpty := iter.First()
		err = errors.Join(iter.Error(), iter.Close())
		if err != nil {
			return err
		}
		if nonEmpty {
			return fmt.Errorf("%w: database has data but no format version (not a groupstate store?)", ErrFormatVersion)
		}
		if s.opts.ReadOnly {
			return nil
		}
		return s.write(func() error { return s.db.Set(formatKey, formatValue(FormatVersion), pebble.Sync) })
	case err != nil:
		return err
	}
	n := len(v)
	var got uint32
	if n == 4 {
		got = binary.BigEndian.Uint32(v)
	}
	if err := closer.Close(); err != nil {
		return err
	}
	switch {
	case n != 4:
		return fmt.Errorf("%w: malformed format version record (%d bytes)", ErrFormatVersion, n)
	case got == FormatVersion:
		return nil
	case got == 1 && s.opts.ReadOnly:
		return fmt.Errorf("%w: store has format version 1, which must be migrated to %d: open it once without ReadOnly", ErrFormatVersion, FormatVersion)
	case got == 1:
		return s.migrateV1()
	}
	return fmt.Errorf("%w: store has format version %d, this build supports %d", ErrFormatVersion, got, FormatVersion)
}

// formatValue returns the value of the format-version key for version.
func formatValue(version uint32) []byte {
	return binary.BigEndian.AppendUint32(nil, version)
}

// acquire registers an operation in flight; release must follow when it
// returns nil.
func (s *Store) acquire() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if s.failed != nil {
		return s.failed
	}
	s.refs.Add(1)
	return nil
}

// acquireWrite is acquire for writes.
func (s *Store) acquireWrite() error {
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	return s.acquire()
}

func (s *Store) release() { s.refs.Done() }

// write runs a Pebble write. Pebble reports a failed WAL write or sync
// through Logger.Fatalf, which our logger turns into a panic: recover it,
// mark the store failed and return the error.
func (s *Store) write(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			fe, ok := r.(*fatalError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%w: %s", ErrFailed, fe.msg)
			if s.cache != nil {
				s.cache.clear() // Pebble's memory may now hold what did not reach disk
			}
			s.mu.Lock()
			if s.failed == nil {
				s.failed = err
			}
			s.mu.Unlock()
		}
	}()
	return f()
}

// Close waits for operations in flight, then closes the store. A second
// Close returns nil. After Close every operation returns ErrClosed.
func (s *Store) Close() (err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	failed := s.failed
	s.mu.Unlock()
	s.refs.Wait()
	defer func() {
		if r := recover(); r != nil {
			// Pebble may panic closing after a fatal commit error; the
			// files are left as they were, which is what recovery wants.
			err = fmt.Errorf("state: close: %v", r)
		}
	}()
	err = s.db.Close()
	if failed != nil && err == nil {
		err = failed
	}
	return err
}

// Dir returns the directory the store was opened in.
func (s *Store) Dir() string { return s.dir }

// Deployment returns the keyspace handle of the deployment name. It is
// cheap and does no I/O. If name is not valid (see ValidateName), every
// operation on the handle returns an error wrapping ErrInvalidName.
func (s *Store) Deployment(name string) *Deployment {
	d := &Deployment{s: s, name: name, vdep: varsDepOf(name), prefix: deploymentPrefix(name), err: ValidateName(name)}
	if s.cache != nil {
		d.stripe = s.cache.stripe(name)
	}
	if d.err == nil {
		d.writeMu = s.writeLock(name)
	}
	return d
}

// Deployments returns the sorted names of the deployments that have any
// data. It seeks once per deployment, never scanning a deployment's keys.
// The slice is owned by the caller.
func (s *Store) Deployments() ([]string, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	lower := []byte{deploymentTag}
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var names []string
	for ok := iter.First(); ok; {
		k := iter.Key()
		if len(k) < 2 || len(k) < 2+int(k[1]) {
			return names, fmt.Errorf("%w: key %q", ErrCorrupt, k)
		}
		p := k[:2+int(k[1])]
		names = append(names, string(p[2:]))
		end := prefixEnd(p)
		if end == nil {
			break
		}
		ok = iter.SeekGE(end)
	}
	sort.Strings(names)
	return names, iter.Error()
}

// writeLock returns the mutex every write of deployment holds (see Deployment.lockWrite).
func (s *Store) writeLock(deployment string) *sync.Mutex {
	if mu, ok := s.writeLocks.Load(deployment); ok {
		return mu.(*sync.Mutex)
	}
	mu, _ := s.writeLocks.LoadOrStore(deployment, new(sync.Mutex))
	return mu.(*sync.Mutex)
}

// readValue gets key and copies its value; found is false when absent.
func (s *Store) readValue(key []byte) (v []byte, found bool, err error) {
	raw, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v = append([]byte(nil), raw...)
	return v, true, closer.Close()
}

var _ io.Closer = (*Store)(nil)
