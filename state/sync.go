package state

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Sync is the fsync of a batch committed with Batch.CommitNoSyncWait, which may still be
// in flight. A nil *Sync is a commit that was durable (or replicated) when it returned.
type Sync struct {
	s    *Store
	pb   *pebble.Batch // applied; closed by Wait
	what string        // the batch, for errors
}

// Wait blocks until the batch is on disk. An error wraps ErrFailed: the sync failed, the
// Store is failed (every later call returns ErrFailed) and must be reopened, after which
// Deployment.Progress tells whether the batch reached disk. Call it once; a nil Sync returns
// nil.
func (y *Sync) Wait() error {
	if y == nil {
		return nil
	}
	defer y.s.release()
	err := y.pb.SyncWait()
	_ = y.pb.Close()
	y.pb = nil
	if err == nil {
		return nil
	}
	return y.s.fail(fmt.Errorf("%w: syncing %s: %w", ErrFailed, y.what, err))
}
