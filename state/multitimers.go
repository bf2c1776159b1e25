package state

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// An ABI v2 key has any number of timers, each a (key, timestamp) pair, kept in two
// indexes written together: the deployment's timer index (section 't', ordered by
// timestamp then key, the one Deployment.Expired scans) and a per-key index (section
// 'j', so that a key's timers are listed by a prefix scan).

// TimerRegister registers the key's timer at ts; registering one already registered
// does nothing (a key has one timer per timestamp).
func (t *KeyTxn) TimerRegister(ts int64) error {
	if _, _, err := t.begin(0, 0, true); err != nil {
		return err
	}
	defer t.end()
	k := keyTimerKey(nil, t.d.prefix, t.key, ts)
	found, err := t.hasTimer(k)
	if err != nil || found {
		return err
	}
	t.rec.timers++
	t.b.vset(k, nil)
	t.b.vset(timerKey(nil, t.d.prefix, ts, t.key), nil)
	return nil
}

// TimerDelete deletes the key's timer at ts, if any.
func (t *KeyTxn) TimerDelete(ts int64) error {
	if _, _, err := t.begin(0, 0, true); err != nil {
		return err
	}
	defer t.end()
	k := keyTimerKey(nil, t.d.prefix, t.key, ts)
	found, err := t.hasTimer(k)
	if err != nil || !found {
		return err
	}
	if t.rec.timers > 0 {
		t.rec.timers--
	}
	t.b.vdel(k)
	t.b.vdel(timerKey(nil, t.d.prefix, ts, t.key))
	return nil
}

// hasTimer reports whether the key has the timer of per-key timer key k, loading the key's
// record: a key whose record counts no timer has none (no read), else the entry is read
// as the batch's other cached records are (Batch.readVar: the batch's own writes, the
// hot-state cache, then Pebble), not through the indexed batch.
func (t *KeyTxn) hasTimer(k []byte) (bool, error) {
	if err := t.loadRec(); err != nil {
		return false, err
	}
	if t.rec.timers == 0 {
		return false, nil
	}
	_, found, err := t.b.readVar(k)
	return found, err
}

// Timers returns the key's timers, ascending.
func (t *KeyTxn) Timers() ([]int64, error) {
	if _, _, err := t.begin(0, 0, false); err != nil {
		return nil, err
	}
	defer t.end()
	lower := keyTimerPrefix(nil, t.d.prefix, t.key)
	iter, err := t.r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var out []int64
	for ok := iter.First(); ok; ok = iter.Next() {
		_, ts, ok := parseKeyTimer(iter.Key()[len(t.d.prefix)+1:])
		if !ok || len(iter.Key()) != len(lower)+8 {
			return nil, fmt.Errorf("%w: key timer %q", ErrCorrupt, iter.Key())
		}
		out = append(out, ts)
	}
	return out, iter.Error()
}

// ExpiredTimers is Deployment.ExpiredFrom as the batch sees it: it calls fn for the
// timers (key, ts) with ts < before, at or after from in the timer index order
// (timestamp, then key bytes), including the timers registered by the batch's
// committed transactions and excluding those they deleted. fn's key is only valid
// during the call, and fn must not use the batch (collect the timers, then open the
// transactions; TimerAfter gives the position to resume from). An error from fn
// stops the scan and is returned.
func (b *Batch) ExpiredTimers(from TimerPos, before int64, fn func(key []byte, ts int64) error) error {
	release, err := b.enter()
	if err != nil {
		return err
	}
	defer release()
	d := b.d
	lower := append(timerKey(nil, d.prefix, from.TimeoutMs, nil), from.Key...)
	upper := timerKey(nil, d.prefix, before, nil)
	if bytes.Compare(lower, upper) >= 0 {
		return nil
	}
	iter, err := b.vb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	defer iter.Close()
	n := len(d.prefix) + 1
	for ok := iter.First(); ok; ok = iter.Next() {
		ts, key, ok := parseTimerKey(iter.Key()[n:])
		if !ok {
			return fmt.Errorf("%w: timer key %q", ErrCorrupt, iter.Key())
		}
		if err := fn(key, ts); err != nil {
			return err
		}
	}
	return iter.Error()
}
