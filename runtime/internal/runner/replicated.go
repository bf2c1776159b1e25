package runner

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/state"
)

// BuildReplicated makes the runner of partition p of rv, a replicated deployment whose lease
// this runtime acquired: it fences the partition's changelog with the lease's epoch, restores
// the partition's state from it (from hint: what a standby copy here holds), makes every later
// write of the state go through it, and opens the runner as Build does.
func BuildReplicated(ctx context.Context, cfg Config, deps Deps, rv *Revision, lease cluster.Lease, p int, hint changelog.Position) (*Runner, error) {
	name := rv.Rec.Name
	parts := max(rv.Spec.Partitions, 1)
	t := startTimings()
	defer t.logIfSlow(cfg.Logger.With("deployment", name, "partition", p), "taking the partition over took long")
	instance := lineageOf(rv.Rec)
	if parts > 1 {
		instance += "." + strconv.Itoa(p) // message ids <name>.<lineage>.<partition>.<batch>.<seq>
	}
	r := newRunner(cfg, deps, rv, options{lease: lease, instance: instance, part: p})
	// The input opens meanwhile: its consumer is created at once, and rewound (which would
	// disturb a runtime that took the partition since) once the fence holds.
	held := make(chan error, 1)
	r.input = r.startInput(ctx, held)
	abandon := func(err error) (*Runner, error) {
		held <- err
		r.input.wait()
		return nil, err
	}
	cl, err := changelog.OpenChangelog(ctx, r.env.JS, name, r.env.Replicas)
	if err != nil {
		return abandon(fmt.Errorf("changelog: %w", err))
	}
	if _, err := cl.Fence(ctx, p, lease.Epoch); err != nil {
		return abandon(fmt.Errorf("fencing the changelog at epoch %d: %w", lease.Epoch, err))
	}
	held <- nil
	t.mark("fence")
	snaps, err := changelog.OpenSnapshots(ctx, r.env.JS, r.env.Replicas)
	if err != nil {
		r.input.wait()
		return nil, fmt.Errorf("snapshots: %w", err)
	}
	r.ks.SetReplicator(nil)
	res, err := changelog.Restore(ctx, cl, snaps, p, r.ks, hint)
	if err != nil {
		r.input.wait()
		return nil, fmt.Errorf("restoring from the changelog: %w", err)
	}
	t.mark("restore")
	r.env.Logger.Info("state restored from the changelog", "deployment", name, "partition", p, "records_applied", res.Applied, "last_seq", res.Last,
		"from_standby", hint.Held > 0)
	r.env.Metrics.RestoredRecords(name, res.Applied)
	repl := changelog.NewReplicator(cl, p, lease.Epoch, res.Last)
	r.ks.SetReplicator(repl)
	r.snaps = &snapshotter{cl: cl, snaps: snaps, repl: repl, partition: p, interval: rv.Spec.Snapshot.Interval.Std(), last: time.Now(), metrics: r.env.Metrics}
	if err := r.setup(ctx, rv.Rec.ResetState != ""); err != nil {
		r.ks.SetReplicator(nil)
		return nil, err
	}
	t.mark("open")
	r.opened = append(t.attrs(), r.opened...) // the takeover's steps, then the open's
	return r, nil
}

// lineageOf is the instance of a replicated deployment's output message ids: the same on
// every runtime, so a republication after a takeover is dropped as a duplicate.
func lineageOf(rec registry.Record) string {
	if rec.Lineage != "" {
		return rec.Lineage
	}
	return "l0" // a record written before lineages: still the same on every runtime
}

// snapshotKeep is how many snapshots of a partition are kept. The log is purged below the
// oldest kept one, so a restore that chose the newest just before it was replaced still
// finds the log after it.
const snapshotKeep = 2

// snapshotter snapshots a replicated deployment's state every interval, then purges the
// changelog below the oldest snapshot kept. Only the runner's loop calls maybe; a snapshot
// runs in its own goroutine, one at a time, while batches go on.
type snapshotter struct {
	cl        *changelog.Changelog
	snaps     *changelog.Snapshots
	repl      *changelog.Replicator
	partition int
	interval  time.Duration
	metrics   Metrics

	last    time.Time   // when the last snapshot started (or the runner did)
	lastSeq uint64      // the log sequence the last snapshot holds
	running atomic.Bool // a snapshot is being taken
	wg      sync.WaitGroup
}

// maybe starts a snapshot of ks when one is due and none is running.
func (sn *snapshotter) maybe(ctx context.Context, name string, ks *state.Deployment, logger *slog.Logger) {
	if sn == nil || time.Since(sn.last) < sn.interval || sn.running.Load() {
		return
	}
	after, failed := sn.repl.Position()
	if failed != nil || after == sn.lastSeq {
		return // nothing new, or the log is no longer this runner's
	}
	sn.last = time.Now()
	sn.running.Store(true)
	sn.wg.Add(1)
	go func() {
		defer sn.wg.Done()
		defer sn.running.Store(false)
		start := time.Now()
		m, err := sn.take(ctx, name, ks)
		if err != nil {
			logger.Warn("snapshot failed; the changelog is kept until one succeeds", "err", err)
			return
		}
		sn.lastSeq = m.Seq
		logger.Info("snapshot taken", "seq", m.Seq, "batch", m.BatchID, "bytes", m.Bytes, "chunks", m.Chunks,
			"uploaded_chunks", m.UploadedChunks, "uploaded_bytes", m.UploadedBytes, "reused_chunks", m.ReusedChunks,
			"took", time.Since(start).Round(time.Millisecond))
	}()
}

// take exports ks at a point between two writes, with the log sequence it holds, stores it,
// then purges the log below the oldest snapshot kept and prunes the older snapshots.
func (sn *snapshotter) take(ctx context.Context, name string, ks *state.Deployment) (changelog.SnapshotMeta, error) {
	meta := changelog.SnapshotMeta{Epoch: sn.repl.Epoch()}
	m, err := sn.snaps.Put(ctx, name, sn.partition, &meta, func(yield func([]byte) error) error {
		_, err := ks.ExportAt(0, func(p state.Progress) error {
			// No write of ks runs now, so the replicator's last sequence is exactly what
			// the export holds.
			after, failed := sn.repl.Position()
			if failed != nil {
				return failed
			}
			meta.Seq, meta.BatchID = after, p.BatchID
			return nil
		}, yield)
		return err
	})
	if err != nil {
		return changelog.SnapshotMeta{}, err
	}
	sn.metrics.SnapshotUploaded(name, m.UploadedBytes)
	metas, err := sn.snaps.List(ctx, name, sn.partition)
	if err != nil {
		return m, err
	}
	if len(metas) >= snapshotKeep {
		oldest := metas[snapshotKeep-1]
		if err := sn.cl.Purge(ctx, sn.partition, oldest.Seq+1); err != nil {
			return m, err
		}
		if err := sn.snaps.Prune(ctx, name, sn.partition, snapshotKeep); err != nil {
			return m, err
		}
	}
	return m, nil
}

// wait waits for a snapshot being taken.
func (sn *snapshotter) wait() {
	if sn != nil {
		sn.wg.Wait()
	}
}
