package natsio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// OpenKV creates the KV bucket cfg describes, or opens it when it exists already (its own
// configuration is kept). A creation that asks for more replicas than the cluster can give
// fails saying what to do.
func OpenKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	// Look the bucket up first: a user who may read but not create streams (a reader, see
	// package auth) opens existing buckets, and an open costs one request.
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = js.KeyValue(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: opening KV bucket %s: %w", cfg.Bucket, ExplainReplicas(err, cfg.Replicas))
	}
	return kv, nil
}

// ListTimeout bounds one Leases.List (package cluster) and the listing of Snapshots (package
// changelog). Their watch waits for the bucket's consumer to deliver
// the initial values, and on a fresh 3-node cluster that consumer's creation can go
// unanswered (seen under the race detector: a runtime waited minutes for it, its context
// having no deadline); an error is retried by the caller instead.
const ListTimeout = 10 * time.Second

// PurgeKeys removes from KV bucket every key that matches one of filters (KV subject
// patterns: "name", "name.*"), with its history, and returns the keys it removed, sorted. A
// bucket that does not exist holds nothing to remove.
func PurgeKeys(ctx context.Context, js jetstream.JetStream, bucket string, filters ...string) ([]string, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: opening KV bucket %s: %w", bucket, err)
	}
	lister, err := kv.ListKeysFiltered(ctx, filters...)
	if err != nil {
		return nil, fmt.Errorf("natsio: listing keys of %s: %w", bucket, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	_ = lister.Stop()
	slices.Sort(keys)
	for _, k := range keys {
		if err := kv.Purge(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("natsio: removing %s from %s: %w", k, bucket, err)
		}
	}
	return keys, nil
}
