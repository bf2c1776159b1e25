package natsio

import (
	"context"
	"errors"
	"fmt"
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
