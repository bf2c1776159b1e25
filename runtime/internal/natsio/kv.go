package natsio

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// OpenKV creates the KV bucket cfg describes, or opens it when it exists already (its own
// configuration is kept). A creation that asks for more replicas than the cluster can give
// fails saying what to do.
func OpenKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: opening KV bucket %s: %w", cfg.Bucket, ExplainReplicas(err, cfg.Replicas))
	}
	return kv, nil
}
