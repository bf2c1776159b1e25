package service

import (
	"context"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/runner"
	"github.com/groupstate/groupstate/runtime/spec"
)

// runnerConfig returns what s's runners share and only read (see runner.Config), with the
// store open now.
func (s *Service) runnerConfig() runner.Config {
	s.mu.Lock()
	store := s.store
	s.mu.Unlock()
	return runner.Config{JS: s.js, Registry: s.reg, Runtime: s.rt, Leases: s.leases, Store: store, Metrics: runnerMetrics{s.cfg.Metrics},
		Clock: s.cfg.Clock, Replicas: s.cfg.Replicas, Logger: s.logger, ID: s.id}
}

// runnerDeps is the service as its runners' runner.Deps.
type runnerDeps struct{ s *Service }

var _ runner.Deps = runnerDeps{}

func (d runnerDeps) EnsureStreams(ctx context.Context, sp *spec.Spec, inputOf string) (string, error) {
	return d.s.ensureStreams(ctx, sp, inputOf)
}
func (d runnerDeps) StreamsEnsured(key string) (string, bool)       { return d.s.streamsEnsured(key) }
func (d runnerDeps) EnsuredStreams(key, inStream string)            { d.s.ensuredStreams(key, inStream) }
func (d runnerDeps) ForgetStreams(rec registry.Record)              { d.s.forgetStreams(rec) }
func (d runnerDeps) LostReplication(rec registry.Record, err error) { d.s.lostReplication(rec, err) }
func (d runnerDeps) StoreFailed()                                   { d.s.signalStoreFailed() }
func (d runnerDeps) PutStatus(ctx context.Context, st *client.Status) {
	d.s.putStatus(ctx, st)
}
func (d runnerDeps) Watermarks(ctx context.Context) (*cluster.Watermarks, error) {
	return d.s.watermarks(ctx)
}
func (d runnerDeps) NewRouter(ctx context.Context, sp *spec.Spec, inputOf string) (*input.Router, error) {
	return d.s.newRouter(ctx, sp, inputOf)
}
func (d runnerDeps) ChangelogBytes(ctx context.Context, deployment string) (uint64, error) {
	return d.s.changelogBytes(ctx, deployment)
}

// runnerMetrics is the service's Metrics (nil: none) as its runners' runner.Metrics.
type runnerMetrics struct{ m *Metrics }

var _ runner.Metrics = runnerMetrics{}

func (r runnerMetrics) Batch(name string, rep *engine.BatchReport) { r.m.batch(name, rep) }
func (r runnerMetrics) Status(name string, part int, st *client.Status, hasWatermark bool) {
	r.m.status(name, part, st, hasWatermark)
}
func (r runnerMetrics) Started(name string, replicated bool)  { r.m.started(name, replicated) }
func (r runnerMetrics) Stopped(name string)                   { r.m.stopped(name) }
func (r runnerMetrics) Takeover(name string, d time.Duration) { r.m.takeover(name, d) }
func (r runnerMetrics) Changelog(name string, bytes uint64)   { r.m.changelog(name, bytes) }
func (r runnerMetrics) RestoredRecords(name string, n int)    { r.m.restoredRecords(name, n) }
func (r runnerMetrics) SnapshotUploaded(name string, b int64) { r.m.snapshotUploaded(name, b) }
