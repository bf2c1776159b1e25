package changelog

import (
	"context"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/nats-io/nats.go/jetstream"
)

// EnsureManifestsStream ensures deployment's manifests stream ([ManifestsStream], subjects
// [ManifestsFilter], file storage, replicas copies or [natsio.DefaultReplicas] when 0, a duplicate
// window of [natsio.MinDuplicateWindow]) keeping messages maxAge (0: as long as the limits allow),
// and returns its name. A manifest is only useful while the input rows it names are kept,
// so maxAge should be the input stream's.
func EnsureManifestsStream(ctx context.Context, js jetstream.JetStream, deployment string, replicas int, maxAge time.Duration) (string, error) {
	return natsio.EnsureStream(ctx, js, natsio.StreamOptions{
		Name:       topology.ManifestsStream(deployment),
		Subjects:   []string{topology.ManifestsFilter(deployment)},
		Duplicates: natsio.MinDuplicateWindow,
		MaxAge:     maxAge,
		Replicas:   replicas,
	})
}
