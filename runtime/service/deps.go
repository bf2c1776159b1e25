package service

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/timeouts"
)

// runnerEnv is what the runners of a process share and only read: its connections, clock,
// metrics and settings. newRunner copies it from the Service (see Service.runnerEnv); it is
// read-only after.
type runnerEnv struct {
	js       jetstream.JetStream
	reg      *registry.Registry
	rt       *engine.Runtime
	leases   *cluster.Leases
	metrics  *Metrics       // nil: none (its methods take a nil receiver)
	clock    timeouts.Clock // the batches' processing time
	replicas int            // of the streams and buckets created
	logger   *slog.Logger   // the process's, without the deployment
	id       string         // the runtime's ID: a status's owner
}

// runnerEnv returns what s's runners share (see runnerEnv).
func (s *Service) runnerEnv() runnerEnv {
	return runnerEnv{js: s.js, reg: s.reg, rt: s.rt, leases: s.leases, metrics: s.cfg.Metrics, clock: s.cfg.Clock, replicas: s.cfg.Replicas,
		logger: s.logger, id: s.id}
}

// runnerDeps is what a runner asks of the process it runs in, in place of the *Service, which
// implements it: the state the runners of a process share (streams ensured, the watermarks'
// view), and what a runner reports to it. Its methods are safe for concurrent use.
type runnerDeps interface {
	// ensureStreams ensures a deployment's streams (see Service.ensureStreams) and returns
	// its input stream.
	ensureStreams(ctx context.Context, sp *spec.Spec, input string) (string, error)
	// streamsEnsured returns the input stream of the revision named key (see revisionKey),
	// once a runner here ensured its streams; ensuredStreams notes it, and forgetStreams
	// makes the next open ensure them again.
	streamsEnsured(key string) (string, bool)
	ensuredStreams(key, inStream string)
	forgetStreams(rec registry.Record)
	// watermarks returns the process's view of the partitions' watermarks.
	watermarks(ctx context.Context) (*cluster.Watermarks, error)
	// newRouter opens the router of a deployment split into partitions.
	newRouter(ctx context.Context, sp *spec.Spec, inputOf string) (*input.Router, error)
	// lostReplication tells that a write of rec's changelog was refused or lost (err): the
	// runner stopped, and the deployment is to be restored again.
	lostReplication(rec registry.Record, err error)
	// signalStoreFailed tells that the store failed: the runner stopped.
	signalStoreFailed()
	// putStatus writes a status document.
	putStatus(ctx context.Context, st *client.Status)
	// changelogBytes is the size of a deployment's changelog.
	changelogBytes(ctx context.Context, deployment string) (uint64, error)
}

var _ runnerDeps = (*Service)(nil)
