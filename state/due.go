package state

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// FirstTimeout returns the earliest timeout of any key of the deployment (the first entry of
// its timer index, which ABI v1 timeouts and ABI v2 timers share), and false when no key has
// one. It reads the committed state.
func (d *Deployment) FirstTimeout() (timeoutMs int64, ok bool, err error) {
	section := sectionKey(nil, d.prefix, sectionTimer)
	key, ok, err := d.first(section)
	if !ok || err != nil {
		return 0, false, err
	}
	ts, _, ok := parseTimerKey(key[len(section):])
	if !ok {
		return 0, false, fmt.Errorf("%w: timer key %q", ErrCorrupt, key)
	}
	return ts, true, nil
}

// FirstExpiry returns the earliest expiry of any state variable entry with a TTL (the first
// entry of the TTL index: Batch.ExpireTTL at that processing time removes it), and false when
// no entry has one. It reads the committed state.
func (d *Deployment) FirstExpiry() (expiryMs int64, ok bool, err error) {
	section := sectionKey(nil, d.prefix, sectionTTL)
	key, ok, err := d.first(section)
	if !ok || err != nil {
		return 0, false, err
	}
	if len(key) < len(section)+8 {
		return 0, false, fmt.Errorf("%w: TTL key %q", ErrCorrupt, key)
	}
	return bytesToTimer(key[len(section):]), true, nil
}

// first returns a copy of the first key of section, and false when it holds none.
func (d *Deployment) first(section []byte) ([]byte, bool, error) {
	if err := d.acquire(); err != nil {
		return nil, false, err
	}
	defer d.s.release()
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: section, UpperBound: prefixEnd(section)})
	if err != nil {
		return nil, false, err
	}
	defer iter.Close()
	if !iter.First() {
		return nil, false, iter.Error()
	}
	return append([]byte(nil), iter.Key()...), true, nil
}
