package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go/jetstream"
)

// LeasesBucket is the KV bucket of partition leases: key "<deployment>.<partition>", value a
// JSON {"owner": "<runtime id>"} (an empty owner: released).
const LeasesBucket = "groupstate-leases"

// Lease errors.
var (
	// ErrLeaseHeld: a live runtime other than the caller holds the lease.
	ErrLeaseHeld = errors.New("natsio: partition lease held by another runtime")
	// ErrLeaseLost: the lease is no longer at the epoch the caller holds (another runtime
	// took it): the caller was fenced.
	ErrLeaseLost = errors.New("natsio: partition lease lost")
)

// Lease is one partition's lease.
type Lease struct {
	Deployment string
	Partition  int
	// Owner is the runtime holding the lease; "" when it is free (released, or never taken).
	Owner string
	// Epoch is the KV revision of the acquire: it grows with every acquire of the
	// partition, so it fences an older owner (a write that carries an older epoch is stale).
	// 0 when the lease was never taken.
	Epoch uint64
	// At is when the lease was last written.
	At time.Time
}

type leaseValue struct {
	Owner string    `json:"owner"`
	At    time.Time `json:"at"`
}

// Leases are the partition leases of every deployment, in [LeasesBucket]. Safe for
// concurrent use.
type Leases struct {
	kv jetstream.KeyValue
}

// OpenLeases opens [LeasesBucket], creating it when missing (file storage, replicas copies,
// 0 meaning [natsio.DefaultReplicas], one revision per key).
func OpenLeases(ctx context.Context, js jetstream.JetStream, replicas int) (*Leases, error) {
	kv, err := natsio.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      LeasesBucket,
		Description: "groupstate: which runtime owns each partition of a deployment",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    natsio.ReplicasFor(js, replicas),
	})
	if err != nil {
		return nil, err
	}
	return &Leases{kv: kv}, nil
}

func leaseKey(deployment string, partition int) string {
	return deployment + "." + strconv.Itoa(partition)
}

// Get returns the lease of partition of deployment (Owner "" and Epoch 0 when never taken).
func (l *Leases) Get(ctx context.Context, deployment string, partition int) (Lease, error) {
	e, err := l.kv.Get(ctx, leaseKey(deployment, partition))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Lease{Deployment: deployment, Partition: partition}, nil
	}
	if err != nil {
		return Lease{}, fmt.Errorf("natsio: reading the lease of %s partition %d: %w", deployment, partition, err)
	}
	return decodeLease(deployment, partition, e)
}

func decodeLease(deployment string, partition int, e jetstream.KeyValueEntry) (Lease, error) {
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return Lease{}, fmt.Errorf("natsio: lease of %s partition %d: %w", deployment, partition, err)
	}
	return Lease{Deployment: deployment, Partition: partition, Owner: v.Owner, Epoch: e.Revision(), At: v.At}, nil
}

// Acquire makes runtime the owner of partition of deployment, with a new epoch, when the
// lease is free, held by runtime itself (an earlier incarnation: a restart), or held by a
// runtime that live says is not a live member. A lease held by a live other runtime is
// refused with [ErrLeaseHeld]. Two runtimes acquiring at once: one wins, the other gets
// ErrLeaseHeld (or, when the winner is not live for it, tries again).
func (l *Leases) Acquire(ctx context.Context, deployment string, partition int, runtime string, live func(id string) bool) (Lease, error) {
	key := leaseKey(deployment, partition)
	val, _ := json.Marshal(leaseValue{Owner: runtime, At: time.Now().UTC()})
	for range 3 {
		cur, err := l.Get(ctx, deployment, partition)
		if err != nil {
			return Lease{}, err
		}
		if cur.Owner != "" && cur.Owner != runtime && live(cur.Owner) {
			return cur, fmt.Errorf("%w: %s partition %d is held by %s", ErrLeaseHeld, deployment, partition, cur.Owner)
		}
		var rev uint64
		if cur.Epoch == 0 {
			rev, err = l.kv.Create(ctx, key, val)
		} else {
			rev, err = l.kv.Update(ctx, key, val, cur.Epoch)
		}
		if errors.Is(err, jetstream.ErrKeyExists) {
			continue // someone wrote it in between: look again
		}
		if err != nil {
			return Lease{}, fmt.Errorf("natsio: acquiring the lease of %s partition %d: %w", deployment, partition, err)
		}
		return Lease{Deployment: deployment, Partition: partition, Owner: runtime, Epoch: rev, At: time.Now().UTC()}, nil
	}
	return Lease{}, fmt.Errorf("%w: %s partition %d keeps changing hands", ErrLeaseHeld, deployment, partition)
}

// Release frees lease, if it is still at its epoch (a lease another runtime took since is
// left alone, and [ErrLeaseLost] returned).
func (l *Leases) Release(ctx context.Context, lease Lease) error {
	val, _ := json.Marshal(leaseValue{At: time.Now().UTC()})
	_, err := l.kv.Update(ctx, leaseKey(lease.Deployment, lease.Partition), val, lease.Epoch)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: %s partition %d is no longer at epoch %d", ErrLeaseLost, lease.Deployment, lease.Partition, lease.Epoch)
	}
	if err != nil {
		return fmt.Errorf("natsio: releasing the lease of %s partition %d: %w", lease.Deployment, lease.Partition, err)
	}
	return nil
}

// Check returns [ErrLeaseLost] when lease is no longer the partition's current lease.
func (l *Leases) Check(ctx context.Context, lease Lease) error {
	cur, err := l.Get(ctx, lease.Deployment, lease.Partition)
	if err != nil {
		return err
	}
	if cur.Epoch != lease.Epoch || cur.Owner != lease.Owner {
		return fmt.Errorf("%w: %s partition %d is at epoch %d (owner %q), not %d", ErrLeaseLost, lease.Deployment, lease.Partition, cur.Epoch, cur.Owner, lease.Epoch)
	}
	return nil
}

// List returns the leases of deployment that were ever taken, by partition. It waits at
// most 10 s (or until ctx ends, when sooner) for the bucket to answer.
func (l *Leases) List(ctx context.Context, deployment string) (map[int]Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, natsio.ListTimeout)
	defer cancel()
	out := map[int]Lease{}
	w, err := l.kv.Watch(ctx, deployment+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("natsio: listing the leases of %s: %w", deployment, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("natsio: listing the leases of %s: %w", deployment, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok { // stopped before the initial values were all there: out may lack some
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("natsio: listing the leases of %s: %w", deployment, err)
				}
				return nil, fmt.Errorf("natsio: listing the leases of %s: the watch ended early", deployment)
			}
			if e == nil {
				return out, nil // the initial values are all there
			}
			p, err := strconv.Atoi(strings.TrimPrefix(e.Key(), deployment+"."))
			if err != nil {
				continue
			}
			lease, err := decodeLease(deployment, p, e)
			if err != nil {
				return nil, err
			}
			out[p] = lease
		}
	}
}
