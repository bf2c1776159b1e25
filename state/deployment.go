package state

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Deployment is the keyspace of one deployment in a Store. All of its keys
// live under a per-deployment prefix, so deployments never see each
// other's keys. A Deployment is safe for concurrent use; the caller
// guarantees a single writer (Batch.Commit, AckOutbox, Drop) at a time.
type Deployment struct {
	s      *Store
	name   string
	vdep   string // varsDep's
	prefix []byte
	err    error        // invalid name
	stripe *cacheStripe // of the hot-state cache; nil without one
	// writeMu is held by every write of the deployment (shared by all its handles), so
	// that ExportAt can take its copy between two writes.
	writeMu *sync.Mutex
}

// Name returns the deployment's name.
func (d *Deployment) Name() string { return d.name }

func (d *Deployment) acquire() error {
	if d.err != nil {
		return d.err
	}
	return d.s.acquire()
}

func (d *Deployment) acquireWrite() error {
	if d.err != nil {
		return d.err
	}
	return d.s.acquireWrite()
}

// lockWrite is acquireWrite for a write of d's keys: it also holds d's write lock, so
// that no other write of d (through any handle) runs meanwhile and ExportAt sees the
// keyspace between two writes. unlockWrite must follow when it returns nil.
func (d *Deployment) lockWrite() error {
	if err := d.acquireWrite(); err != nil {
		return err
	}
	d.writeMu.Lock()
	return nil
}

// unlockWrite ends what lockWrite began.
func (d *Deployment) unlockWrite() {
	d.writeMu.Unlock()
	d.s.release()
}

// Get returns key's entry; found is false when the key has neither a value
// nor a timeout. The returned Value is a copy owned by the caller.
func (d *Deployment) Get(key []byte) (e Entry, found bool, err error) {
	e, found, _, err = d.GetAppend(nil, key)
	return e, found, err
}

// GetAppend is Get for callers that read many keys into one buffer: it
// appends the value to dst and returns the extended buffer, with e.Value
// the appended bytes (capacity cut, so appending to e.Value never
// overwrites what follows). Values returned before stay valid when the
// buffer grows; the caller may reuse the buffer once it no longer needs
// them. Reads are served from the store's hot-state cache when it holds
// key (see Options.StateCacheSize), else from Pebble.
func (d *Deployment) GetAppend(dst, key []byte) (e Entry, found bool, buf []byte, err error) {
	if err := d.acquire(); err != nil {
		return Entry{}, false, dst, err
	}
	defer d.s.release()
	c := d.s.cache
	var tok readToken
	if c != nil {
		// The token comes first: a write that begins after it stops the
		// fill below, and one in progress makes this read bypass the cache.
		if tok = d.stripe.startRead(); tok.ok {
			var hit bool
			if e, found, hit, buf = c.get(d.name, key, dst); hit {
				return e, found, buf, nil
			}
		}
	}
	kb, _ := d.s.keyBufs.Get().(*[]byte)
	if kb == nil {
		kb = new([]byte)
	}
	*kb = valueKey((*kb)[:0], d.prefix, key)
	defer d.s.keyBufs.Put(kb)
	raw, closer, err := d.s.db.Get(*kb)
	if errors.Is(err, pebble.ErrNotFound) {
		if c != nil {
			c.fill(d.stripe, tok, d.name, key, Entry{}, false)
		}
		return Entry{}, false, dst, nil
	}
	if err != nil {
		return Entry{}, false, dst, err
	}
	defer closer.Close()
	e, err = decodeEntry(raw) // e.Value aliases raw
	if err != nil {
		return Entry{}, false, dst, fmt.Errorf("key %q: %w", key, err)
	}
	if c != nil {
		c.fill(d.stripe, tok, d.name, key, e, true)
	}
	buf = dst
	if e.HasValue {
		n := len(buf)
		buf = append(buf, e.Value...)
		e.Value = valueTail(buf, n)
	}
	return e, true, buf, nil
}

// Expired calls fn, in ascending timeout order (ties by key bytes), for
// every key whose TimeoutMs < before (strictly). It is a range scan of the
// timer index: its cost is proportional to the number of expired keys, not
// of all keys. fn's key slice is only valid during the call. An error from
// fn stops the scan and is returned. The scan reads a snapshot taken when
// Expired starts.
func (d *Deployment) Expired(before int64, fn func(key []byte, timeoutMs int64) error) error {
	return d.ExpiredFrom(TimerPos{TimeoutMs: math.MinInt64}, before, fn)
}

// LastTimeout returns the latest timeout of any key of the deployment, and false when no key
// has one.
func (d *Deployment) LastTimeout() (timeoutMs int64, ok bool, err error) {
	if err := d.acquire(); err != nil {
		return 0, false, err
	}
	defer d.s.release()
	section := sectionKey(nil, d.prefix, sectionTimer)
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: section, UpperBound: prefixEnd(section)})
	if err != nil {
		return 0, false, err
	}
	defer iter.Close()
	if !iter.Last() {
		return 0, false, iter.Error()
	}
	ts, _, ok := parseTimerKey(iter.Key()[len(section):])
	if !ok {
		return 0, false, fmt.Errorf("%w: timer key %q", ErrCorrupt, iter.Key())
	}
	return ts, true, nil
}

// ExpiredFrom is Expired for the timers at or after from in the index order
// (timeout, then key bytes): a scan that goes on where an earlier one
// stopped (see TimerAfter) skips what is before from, deleted timers
// included, rather than stepping over them again.
func (d *Deployment) ExpiredFrom(from TimerPos, before int64, fn func(key []byte, timeoutMs int64) error) error {
	if err := d.acquire(); err != nil {
		return err
	}
	defer d.s.release()
	// One buffer for both bounds: lower (which begins with the section) and upper.
	n := len(d.prefix) + 1 + 8
	buf := make([]byte, 0, 2*n+len(from.Key))
	buf = timerKey(buf, d.prefix, from.TimeoutMs, nil)
	buf = append(buf, from.Key...)
	lower := buf[:len(buf):len(buf)]
	upper := timerKey(buf[len(buf):], d.prefix, before, nil)
	section := lower[:len(d.prefix)+1]
	if bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer iter.Close()
	for ok := iter.First(); ok; ok = iter.Next() {
		ts, key, ok := parseTimerKey(iter.Key()[len(section):])
		if !ok {
			return fmt.Errorf("%w: timer key %q", ErrCorrupt, iter.Key())
		}
		if err := fn(key, ts); err != nil {
			return err
		}
	}
	return iter.Error()
}

// SkippedTimeouts calls fn for each key of Batch.SkipTimeout of the open
// batch, in key order (none when no batch is open). fn's key is only valid
// during the call. An error from fn stops the scan and is returned.
func (d *Deployment) SkippedTimeouts(fn func(key []byte) error) error {
	if err := d.acquire(); err != nil {
		return err
	}
	defer d.s.release()
	lower := sectionKey(nil, d.prefix, sectionSkip)
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return err
	}
	defer iter.Close()
	for ok := iter.First(); ok; ok = iter.Next() {
		if err := fn(iter.Key()[len(lower):]); err != nil {
			return err
		}
	}
	return iter.Error()
}

// Keys calls fn, in key order, for the keys that have a value or a
// timeout, starting strictly after `after` (nil: from the first key; an
// empty non-nil slice starts after the empty key), and at most limit of
// them (limit <= 0: all). fn's key and e.Value are only valid during the
// call. An error from fn stops the scan and is returned.
func (d *Deployment) Keys(after []byte, limit int, fn func(key []byte, e Entry) error) error {
	if err := d.acquire(); err != nil {
		return err
	}
	defer d.s.release()
	section := sectionKey(nil, d.prefix, sectionValue)
	lower := section
	if after != nil {
		// The smallest key greater than after is after + 0x00.
		lower = append(valueKey(nil, d.prefix, after), 0)
	}
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(section)})
	if err != nil {
		return err
	}
	defer iter.Close()
	n := 0
	for ok := iter.First(); ok && (limit <= 0 || n < limit); ok = iter.Next() {
		v, err := iter.ValueAndErr()
		if err != nil {
			return err
		}
		key := iter.Key()[len(section):]
		e, err := decodeEntry(v)
		if err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		if err := fn(key, e); err != nil {
			return err
		}
		n++
	}
	return iter.Error()
}

// Progress returns the deployment's committed progress; the zero Progress
// when nothing was committed yet.
func (d *Deployment) Progress() (Progress, error) {
	if err := d.acquire(); err != nil {
		return Progress{}, err
	}
	defer d.s.release()
	return d.progress()
}

// InitialStateApplied reports whether a committed batch of the deployment was marked with
// Batch.MarkInitialStateApplied.
func (d *Deployment) InitialStateApplied() (bool, error) {
	if err := d.acquire(); err != nil {
		return false, err
	}
	defer d.s.release()
	_, found, err := d.s.readValue(sectionKey(nil, d.prefix, sectionInitial))
	return found, err
}

// TimeMode returns the timeout mode a committed batch recorded with Batch.SetTimeMode, and
// false when none did.
func (d *Deployment) TimeMode() (mode uint8, ok bool, err error) {
	if err := d.acquire(); err != nil {
		return 0, false, err
	}
	defer d.s.release()
	v, found, err := d.s.readValue(sectionKey(nil, d.prefix, sectionTimeMode))
	if err != nil || !found {
		return 0, false, err
	}
	if len(v) != 1 {
		return 0, false, fmt.Errorf("%w: timeout mode record of %d bytes", ErrCorrupt, len(v))
	}
	return v[0], true, nil
}

// progress reads the progress record; the caller holds a ref.
func (d *Deployment) progress() (Progress, error) {
	v, found, err := d.s.readValue(sectionKey(nil, d.prefix, sectionProgress))
	if err != nil || !found {
		return Progress{}, err
	}
	return decodeProgress(v)
}

// Drop deletes every key of the deployment (state, timers, progress and
// outbox) with one range deletion, in a synced Pebble batch (replicated and
// not synced when the deployment has a Replicator, see SetReplicator).
// Space is reclaimed by later compactions. It empties the hot-state cache.
// Stop the deployment's engine first: batch ids start again at 1 after a
// Drop, and an acknowledgement of an old outbox id arriving afterwards
// would delete new entries.
func (d *Deployment) Drop() error {
	if err := d.lockWrite(); err != nil {
		return err
	}
	defer d.unlockWrite()
	pb := d.s.db.NewBatch()
	defer pb.Close()
	_ = pb.DeleteRange(d.prefix, prefixEnd(d.prefix), nil)
	r := d.replicator()
	var last uint64
	if r != nil {
		p, err := d.progress()
		if err != nil {
			return err
		}
		last = p.BatchID
	}
	opts, err := d.replicate(r, WriteDrop, last, pb, pebble.Sync)
	if err != nil {
		return fmt.Errorf("state: drop deployment %s: %w", d.name, err)
	}
	if c := d.s.cache; c != nil {
		d.stripe.beginWrite()
		defer c.endWrite(d.stripe, false) // rare: empty it all, not just d's keys
	}
	d.s.setOutboxFloor(d.name, nil)
	defer d.s.setOutboxFloor(d.name, nil) // batch ids start again at 1
	return d.s.write(func() error { return pb.Commit(opts) })
}

// DiskUsage returns Pebble's estimate of the bytes the deployment's
// keyspace occupies in sstables. Data still in memtables (recent writes) is
// not counted, and deleted data counts until compacted.
func (d *Deployment) DiskUsage() (uint64, error) {
	if err := d.acquire(); err != nil {
		return 0, err
	}
	defer d.s.release()
	return d.s.db.EstimateDiskUsage(d.prefix, prefixEnd(d.prefix))
}
