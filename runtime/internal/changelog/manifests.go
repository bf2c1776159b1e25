package changelog

import (
	"context"
	"strconv"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go/jetstream"
)

// ManifestsStream is the name of deployment's manifests stream, which keeps the manifest of
// every batch its partitions committed (runtime/engine.Manifest), for replay.
func ManifestsStream(deployment string) string { return natsio.StreamName(deployment + "_BATCHES") }

// ManifestSubject is the subject of partition's batch manifests of deployment:
// "gs.batches.<deployment>.<partition>".
func ManifestSubject(deployment string, partition int) string {
	return manifestsPrefix(deployment) + strconv.Itoa(partition)
}

// ManifestsFilter is the subject of every partition's manifests of deployment:
// "gs.batches.<deployment>.>".
func ManifestsFilter(deployment string) string { return manifestsPrefix(deployment) + ">" }

func manifestsPrefix(deployment string) string { return "gs.batches." + deployment + "." }

// EnsureManifestsStream ensures deployment's manifests stream ([ManifestsStream], subjects
// [ManifestsFilter], file storage, replicas copies or [natsio.DefaultReplicas] when 0, a duplicate
// window of [natsio.MinDuplicateWindow]) keeping messages maxAge (0: as long as the limits allow),
// and returns its name. A manifest is only useful while the input rows it names are kept,
// so maxAge should be the input stream's.
func EnsureManifestsStream(ctx context.Context, js jetstream.JetStream, deployment string, replicas int, maxAge time.Duration) (string, error) {
	return natsio.EnsureStream(ctx, js, natsio.StreamOptions{
		Name:       ManifestsStream(deployment),
		Subjects:   []string{ManifestsFilter(deployment)},
		Duplicates: natsio.MinDuplicateWindow,
		MaxAge:     maxAge,
		Replicas:   replicas,
	})
}
