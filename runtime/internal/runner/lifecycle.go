package runner

import (
	"context"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/registry"
)

// What the service asks of a runner it holds, besides Start, Stop and StopAndReport (see
// runner.go). The service's goroutine calls these; each says what else may.

// Runs tells whether r (nil: none) already runs rec as it should, so that applying rec has
// nothing to do: same module and spec, no reset asked, and r neither failed nor faulting (a
// same-spec redeploy restarts a runner that keeps failing its batches or fetches).
func (r *Runner) Runs(rec registry.Record) bool {
	if r == nil || rec.ResetState != "" || r.rec.ModuleDigest != rec.ModuleDigest || string(r.rec.Spec) != string(rec.Spec) ||
		r.rec.ShadowOf != rec.ShadowOf || r.rec.Promoting != rec.Promoting || string(r.rec.ShadowSpec) != string(rec.ShadowSpec) {
		return false
	}
	return r.report.healthy()
}

// Record returns the deployment record r runs.
func (r *Runner) Record() registry.Record { return r.rec }

// Name returns the name of the deployment r runs a partition of.
func (r *Runner) Name() string { return r.spec.Name }

// Partition returns the partition r runs (0 of a deployment not split into partitions).
func (r *Runner) Partition() int { return r.part }

// Lease returns the lease r holds (Epoch 0: the deployment is not replicated).
func (r *Runner) Lease() cluster.Lease { return r.lease }

// LogLost tells whether r's loop ended because the changelog refused or lost a write (the
// deployment is to be restored again). Safe for concurrent use.
func (r *Runner) LogLost() bool { return r.logLost.Load() }

// HandoverAsked returns when the plan first moved r's partition to another runtime while r
// held it (zero: it did not, or r keeps it again); SetHandoverAsked sets it.
func (r *Runner) HandoverAsked() time.Time { return r.handoverAsked }

// SetHandoverAsked sets what HandoverAsked returns.
func (r *Runner) SetHandoverAsked(t time.Time) { r.handoverAsked = t }

// SetTakeoverAt notes when r's lease was acquired, before Start: the first batch committed
// observes the time since (Metrics.Takeover).
func (r *Runner) SetTakeoverAt(t time.Time) { r.takeoverAt = t }

// Opened returns how long the steps of r's open took, as slog attributes, for the log line
// of a takeover.
func (r *Runner) Opened() []any { return r.opened }

// Silence makes r publish no more status: another runtime owns its partition now, and the
// status is the new owner's. Safe for concurrent use.
func (r *Runner) Silence() { r.report.silence() }

// NoteError notes msg as the status's last error (LastError), which the next status put
// carries. Safe for concurrent use.
func (r *Runner) NoteError(msg string) { r.report.noteError(msg) }

// Heartbeat publishes r's status unless one was published less than a second ago, so that
// the status of a deployment that runs no batch is rewritten all the same (the service calls
// it every client.StatusHeartbeat: a status older than client.StaleAfter reads stale). Safe
// for concurrent use.
func (r *Runner) Heartbeat(ctx context.Context) { r.publishStatus(ctx, false) }

// ResetDone tells r, built with a state reset (deploy --reset-state), that its record no
// longer asks for the reset: rec, the record stored without it. Before Start.
func (r *Runner) ResetDone(rec registry.Record) { r.rec = rec }

// Abandon closes r, built but never started: its engine, and its keyspace's replication.
func (r *Runner) Abandon(ctx context.Context) {
	r.eng.Close(context.WithoutCancel(ctx))
	r.ks.SetReplicator(nil)
}
