package runner

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// Config is what the runners of a process share and only read: its connections, store, clock,
// metrics and settings. A runner copies it when it is built and only reads it after.
type Config struct {
	JS       jetstream.JetStream // the input, output and control-plane streams
	Registry *registry.Registry  // records, modules, initial states, statuses
	Runtime  *engine.Runtime     // compiles modules and makes engines
	Leases   *cluster.Leases     // of replicated deployments
	Store    *state.Store        // where the runner's keyspace is
	Metrics  Metrics             // nil: none
	Clock    timeouts.Clock      // the batches' processing time
	Replicas int                 // of the streams and buckets created
	Logger   *slog.Logger        // the process's, without the deployment
	ID       string              // the runtime's ID: a status's owner
}

// Deps is what a runner asks of the process it runs in: the state the runners of a process
// share (streams ensured, the watermarks' view), and what a runner reports to it. Its methods
// must be safe for concurrent use.
type Deps interface {
	// EnsureStreams ensures a deployment's streams (input streams named after deployment
	// inputOf, none when empty; outputs, dead letters, late rows, manifests) and returns its
	// input stream. It changes no stream that is not the deployment's.
	EnsureStreams(ctx context.Context, sp *spec.Spec, inputOf string) (string, error)
	// StreamsEnsured returns the input stream of the revision named key (see
	// registry.Record.RevisionKey), once a runner here ensured its streams; EnsuredStreams
	// notes it, and ForgetStreams makes the next open ensure them again.
	StreamsEnsured(key string) (string, bool)
	EnsuredStreams(key, inStream string)
	ForgetStreams(rec registry.Record)
	// Watermarks returns the process's view of the partitions' watermarks.
	Watermarks(ctx context.Context) (*cluster.Watermarks, error)
	// NewRouter opens the router of a deployment split into partitions, reading the input
	// of deployment inputOf.
	NewRouter(ctx context.Context, sp *spec.Spec, inputOf string) (*input.Router, error)
	// LostReplication tells that a write of rec's changelog was refused or lost (err): the
	// runner stopped, and the deployment is to be restored again.
	LostReplication(rec registry.Record, err error)
	// StoreFailed tells that the store failed: the runner stopped.
	StoreFailed()
	// PutStatus writes a status document.
	PutStatus(ctx context.Context, st *client.Status)
	// ChangelogBytes is the size of a deployment's changelog.
	ChangelogBytes(ctx context.Context, deployment string) (uint64, error)
}

// Metrics is what a runner counts. Its methods must be safe for concurrent use.
type Metrics interface {
	// Batch counts a committed batch of deployment name.
	Batch(name string, rep *engine.BatchReport)
	// Status sets the gauges of a status of partition part.
	Status(name string, part int, st *client.Status, hasWatermark bool)
	// Started and Stopped count a runner starting and stopping.
	Started(name string, replicated bool)
	Stopped(name string)
	// Takeover observes the time from a lease's acquisition to the first batch committed.
	Takeover(name string, d time.Duration)
	// Changelog sets the size of the deployment's changelog.
	Changelog(name string, bytes uint64)
	// RestoredRecords counts the changelog records a takeover applied.
	RestoredRecords(name string, n int)
	// SnapshotUploaded counts the bytes a snapshot uploaded.
	SnapshotUploaded(name string, bytes int64)
}

// noMetrics is the Metrics of a Config without any: it counts nothing.
type noMetrics struct{}

func (noMetrics) Batch(string, *engine.BatchReport)        {}
func (noMetrics) Status(string, int, *client.Status, bool) {}
func (noMetrics) Started(string, bool)                     {}
func (noMetrics) Stopped(string)                           {}
func (noMetrics) Takeover(string, time.Duration)           {}
func (noMetrics) Changelog(string, uint64)                 {}
func (noMetrics) RestoredRecords(string, int)              {}
func (noMetrics) SnapshotUploaded(string, int64)           {}
