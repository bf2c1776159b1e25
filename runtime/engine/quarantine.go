package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/state"
)

// quarantine is an engine's quarantined keys (Ceilings.QuarantineAfter): a key whose calls
// fault (handler.Fault: a trap, the time, memory or stack limit, pinned on the key alone) in
// that many batches in a row has its rows dead-lettered with [ReasonQuarantined], without a
// call, until the deployment's next revision (Config.Revision). The quarantine is committed
// with the batch that completes it, so it survives restarts and, with the changelog,
// failovers; the strikes that lead to it are counted in memory. Used by the engine's
// goroutine only.
type quarantine struct {
	after    int    // faulting batches in a row that quarantine a key
	revision string // Config.Revision
	keys     map[string]state.QuarantinedKey
	order    []string          // keys in the order they were quarantined
	strikes  map[string]strike // per key, the batches in a row its call faulted
	dirty    bool              // keys changed since the last commit (or the record is another revision's)
}

// strike counts a key's faulting batches in a row; batch is the last one's id (a v2 batch's
// phases count once).
type strike struct {
	n     int
	batch uint64
}

// maxStrikes bounds the keys whose strikes a quarantine counts: past it, the counts start
// again (a key's faults in a row are counted again from the next).
const maxStrikes = 100_000

// loadQuarantine reads the keyspace's quarantine record: one of another revision is dropped
// (at the next commit).
func loadQuarantine(ks *state.Deployment, after int, revision string) (*quarantine, error) {
	q := &quarantine{after: after, revision: revision, keys: map[string]state.QuarantinedKey{}, strikes: map[string]strike{}}
	rec, err := ks.Quarantine()
	if err != nil {
		return nil, fmt.Errorf("engine: reading the quarantine: %w", err)
	}
	if rec.Revision != revision {
		q.dirty = len(rec.Keys) > 0
		return q, nil
	}
	for _, k := range rec.Keys {
		q.keys[string(k.Key)] = k
		q.order = append(q.order, string(k.Key))
	}
	return q, nil
}

// check returns the error of a row of key when key is quarantined.
func (q *quarantine) check(key []byte) error {
	if len(q.keys) == 0 {
		return nil
	}
	k, ok := q.keys[string(key)]
	if !ok {
		return nil
	}
	return fmt.Errorf("%w since %d: %s (until the next deploy)", ErrQuarantined, k.SinceMs, k.Reason)
}

// ErrQuarantined is wrapped by the dead-letter error of a row of a quarantined key.
var ErrQuarantined = errors.New("the key is quarantined")

// outcome counts a key's call in batch at processing time t: a fault is a strike (the
// after'th batch in a row quarantines the key; the phases of one batch count once), anything
// else ends its run of strikes.
func (q *quarantine) outcome(key []byte, err error, t int64, batch uint64) {
	if err == nil {
		if len(q.strikes) > 0 {
			delete(q.strikes, string(key))
		}
		return
	}
	q.fault(key, err, t, batch)
}

// fault is outcome for a failed call.
func (q *quarantine) fault(key []byte, err error, t int64, batch uint64) {
	var f *handler.Fault
	if !errors.As(err, &f) {
		delete(q.strikes, string(key))
		return
	}
	if len(q.strikes) >= maxStrikes {
		clear(q.strikes)
	}
	s := q.strikes[string(key)]
	if s.n > 0 && s.batch == batch {
		return // another phase of the same batch
	}
	n := s.n + 1
	if n < q.after {
		q.strikes[string(key)] = strike{n: n, batch: batch}
		return
	}
	delete(q.strikes, string(key))
	q.add(key, fmt.Sprintf("its calls failed as a whole %d batches in a row, the last with: %v", q.after, f.Err), t)
}

// add quarantines key with reason at processing time t (nothing when it is already).
func (q *quarantine) add(key []byte, reason string, t int64) {
	if _, ok := q.keys[string(key)]; ok {
		return
	}
	k := state.QuarantinedKey{Key: slices.Clone(key), Reason: reason, SinceMs: t}
	q.keys[string(key)] = k
	q.order = append(q.order, string(key))
	if len(q.order) > state.MaxQuarantinedKeys {
		delete(q.keys, q.order[0])
		q.order = q.order[1:]
	}
	q.dirty = true
}

// record writes the quarantine into sb when it changed; committed must be called once sb
// committed.
func (q *quarantine) record(sb *state.Batch) {
	if !q.dirty {
		return
	}
	rec := state.Quarantine{Revision: q.revision}
	for _, k := range q.order {
		rec.Keys = append(rec.Keys, q.keys[k])
	}
	sb.SetQuarantine(rec)
}

// committed says the batch that record wrote into committed.
func (q *quarantine) committed() { q.dirty = false }

// list returns the quarantined keys, oldest first.
func (q *quarantine) list() []state.QuarantinedKey {
	out := make([]state.QuarantinedKey, 0, len(q.order))
	for _, k := range q.order {
		out = append(out, q.keys[k])
	}
	return out
}
