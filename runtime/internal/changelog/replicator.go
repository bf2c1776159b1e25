package changelog

import (
	"context"
	"sync"
	"time"

	"github.com/groupstate/groupstate/state"
)

// replicateTimeout bounds one append of a [Replicator] (a batch commit waits for it).
const replicateTimeout = 30 * time.Second

// Replicator appends a partition's state writes to its changelog: it is the
// [state.Replicator] of a replicated deployment's keyspace. Each append expects the last
// sequence the replicator appended or read, so a writer that lost the partition is fenced by
// its first append ([ErrFenced]). After a failed append it refuses every later write: the
// runner then stops, and the partition is restored from the log again. Safe for concurrent
// use; its lock is its own (read what it holds with [Replicator.Position]).
type Replicator struct {
	cl        *Changelog
	partition int
	epoch     uint64

	mu     sync.Mutex
	after  uint64 // the last sequence appended or read
	failed error
}

// NewReplicator returns the replicator of partition's writes to cl at lease epoch epoch,
// the partition's last sequence being after (the fence's, or the last record restored).
func NewReplicator(cl *Changelog, partition int, epoch, after uint64) *Replicator {
	return &Replicator{cl: cl, partition: partition, epoch: epoch, after: after}
}

// Epoch returns the lease epoch the replicator appends with.
func (r *Replicator) Epoch() uint64 { return r.epoch }

// Position returns the partition's last sequence as the replicator knows it (its last append,
// or the sequence it started after), and the error of its failed append (nil while none
// failed: after is then exactly what the keyspace holds of the log, between two writes).
func (r *Replicator) Position() (after uint64, failed error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.after, r.failed
}

// Replicate implements [state.Replicator]: it appends w as one record, waiting at most
// replicateTimeout.
func (r *Replicator) Replicate(w state.ReplicatedWrite) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		return r.failed
	}
	kind := ChangelogBatch
	switch w.Kind {
	case state.WriteAck:
		kind = ChangelogAck
	case state.WriteDrop:
		kind = ChangelogDrop
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicateTimeout)
	defer cancel()
	seq, err := r.cl.Append(ctx, r.after, ChangelogRecord{Partition: r.partition, Kind: kind, Epoch: r.epoch, BatchID: w.BatchID, Data: w.Repr})
	if err != nil {
		r.failed = err
		return err
	}
	r.after = seq
	return nil
}
