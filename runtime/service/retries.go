package service

import (
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/registry"
)

// retries is the set of deployments to apply again later, which the service's loop drains:
// a retry after a failed start (retryLater), a look again soon at a partition whose lease
// is still held, an apply once starts off the loop ended, and the starts off the loop that
// failed. It holds at most one retry and one failed start per deployment, so it never
// fills: a retry asked while another of the same deployment waits joins it (the earlier
// time wins; of two revisions of the record, the later), and none is ever dropped.
//
// Any goroutine may add to it; only the loop takes from it (take), when wake says that
// something may be due. The loop applies a record taken only if it is still the
// deployment's current one.
type retries struct {
	mu     sync.Mutex
	due    map[string]retryAt      // by deployment name
	failed map[string]startFailure // by deployment name
	// wake holds one token when something may be due: the loop then calls take. A token
	// that finds nothing due is harmless; each retry's own timer sends another.
	wake chan struct{}
}

// retryAt is a record to apply again at a time.
type retryAt struct {
	rec registry.Record
	at  time.Time
}

// startFailure is a start of a deployment's partitions off the service's loop that failed in
// a way a retry may fix.
type startFailure struct {
	rec registry.Record
	err error
}

func newRetries() *retries {
	return &retries{due: map[string]retryAt{}, failed: map[string]startFailure{}, wake: make(chan struct{}, 1)}
}

// after asks the loop to apply rec again in d (at once when d <= 0).
func (q *retries) after(rec registry.Record, d time.Duration) {
	at := time.Now().Add(d)
	q.mu.Lock()
	cur, ok := q.due[rec.Name]
	switch {
	case !ok || cur.rec.Revision < rec.Revision:
		q.due[rec.Name] = retryAt{rec: rec, at: at}
	case cur.rec.Revision == rec.Revision && at.Before(cur.at):
		cur.at = at
		q.due[rec.Name] = cur
	}
	q.mu.Unlock()
	if d <= 0 {
		q.signal()
		return
	}
	time.AfterFunc(d, q.signal)
}

// failedStart hands the loop a start of rec off the loop that failed with err, for the
// loop to retry (see Service.retryLater). Of two failures of the same deployment not taken
// yet, the one of the later revision is kept, and of the same revision the last.
func (q *retries) failedStart(rec registry.Record, err error) {
	q.mu.Lock()
	if cur, ok := q.failed[rec.Name]; !ok || cur.rec.Revision <= rec.Revision {
		q.failed[rec.Name] = startFailure{rec: rec, err: err}
	}
	q.mu.Unlock()
	q.signal()
}

// signal wakes the loop, unless a wake is pending already.
func (q *retries) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take removes and returns the failed starts, and the retries due at now. Only the loop
// calls it.
func (q *retries) take(now time.Time) (failed []startFailure, due []registry.Record) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for name, f := range q.failed {
		failed = append(failed, f)
		delete(q.failed, name)
	}
	for name, r := range q.due {
		if !r.at.After(now) {
			due = append(due, r.rec)
			delete(q.due, name)
		}
	}
	return failed, due
}
