package service

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/placement"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/runner"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
)

// A deployment with replication: changelog is owned through a partition lease instead of
// the owners bucket: every runtime computes the same placement plan from the live members
// and the lease, the runtime the plan names acquires the lease (a new epoch), appends a fence
// record to the changelog, restores the state from the changelog, and runs; every write to
// the state then goes to the changelog before it is applied locally, so the runtime that
// takes the deployment over next (after a crash, a stop, a move) restores exactly what was
// committed. A runtime whose append is refused (another runtime took the lease: it was
// fenced) or fails stops the deployment; the plan decides again who runs it.

// shape is what placement needs of a deployment's spec: whether it is replicated
// (replication: changelog), its partitions and its standbys per partition. A record whose spec
// does not decode is shaped as one partition, not replicated, no standby: check reports it.
type shape struct {
	revision   uint64 // of the record it was decoded from
	replicated bool
	partitions int
	standbys   int
}

// shapeOf returns the shape of rec's deployment, decoding its spec once per revision of the
// record (the loop applies the same record again at every placement check). Only the loop
// calls it.
func (s *Service) shapeOf(rec registry.Record) shape {
	if sh, ok := s.shapes[rec.Name]; ok && sh.revision == rec.Revision {
		return sh
	}
	sh := shape{revision: rec.Revision, partitions: 1}
	if sp, err := api.SpecOf(rec); err == nil {
		sh.replicated = sp.Replication == spec.ReplicationChangelog
		sh.partitions = max(sp.Partitions, 1)
		sh.standbys = sp.Standbys
	}
	s.shapes[rec.Name] = sh
	return sh
}

// applyReplicated is apply for a replicated deployment: for each partition, it starts the
// partition here when the plan gives it to this runtime, stops it here when the plan gives
// it to another, and keeps a standby copy of it here when the plan names this runtime a
// standby.
func (s *Service) applyReplicated(ctx context.Context, rec registry.Record) {
	sh := s.shapeOf(rec)
	parts := sh.partitions
	if rec.ResetState != "" && parts > 1 {
		// The client refuses this (client.ErrResetPartitioned); a record written otherwise.
		s.putStatus(ctx, &client.Status{Name: rec.Name, State: client.StatusFailed, DeployedAt: rec.DeployedAt, ModuleDigest: rec.ModuleDigest, Owner: s.id, UpdatedAt: time.Now(),
			Error: "a reset of the state (deploy --reset-state) of a deployment with partitions is not supported by this version: deploy it under a new name"})
		return
	}
	leases, err := s.leases.List(ctx, rec.Name)
	if err != nil {
		s.retryLater(rec, err)
		return
	}
	owners := make(map[int]string, len(leases))
	for p, l := range leases {
		owners[p] = l.Owner
	}
	plan := placement.Plan(placement.Input{Deployment: rec.Name, Partitions: parts, Standbys: sh.standbys, Members: s.placeableIDs(), Owners: owners,
		CurrentStandbys: s.currentStandbys(rec.Name, parts)})
	var a applying
	for p := range parts {
		lease, ok := leases[p]
		if !ok {
			lease = cluster.Lease{Deployment: rec.Name, Partition: p}
		}
		if !s.applyPartition(ctx, rec, p, parts, plan[p], lease, &a) {
			break
		}
	}
	s.startPartitions(ctx, rec, &a)
	if a.held {
		// A partition the plan gives to this runtime is still held by its live owner, which
		// hands it over (see applyPartition): look again soon rather than at the next
		// periodic check.
		s.retries.after(rec, leaseHeldRetry)
	}
}

// leaseHeldRetry is how soon a runtime tries again for a partition the plan gives it while
// its previous owner, alive, still holds the lease (it hands it over after its batch in
// flight).
const leaseHeldRetry = 200 * time.Millisecond

// applying is what one apply of a replicated deployment carries from partition to
// partition.
type applying struct {
	rv      *runner.Revision // checked once, for the first partition that starts here
	checked bool
	held    bool             // a partition's lease was held by another live runtime
	starts  []partitionStart // the partitions to start here once every one was looked at
}

// applyPartition applies partition p of rec (of parts) given the plan's assignment and the
// lease as read: it gathers what this runtime knows of the partition, lets placement.Decide
// choose the action, and carries it out. a carries the revision check over the partitions
// of one apply. It returns false when the others need not be tried (the revision was
// refused, or the lease bucket failed: the deployment is applied again later).
func (s *Service) applyPartition(ctx context.Context, rec registry.Record, p, parts int, as placement.Assignment, lease cluster.Lease, a *applying) bool {
	key := topology.Keyspace(rec.Name, p, parts)
	owner := as.Owner
	s.mu.Lock()
	old, starting := s.runners[key], s.starting[key]
	s.mu.Unlock()
	f := placement.Facts{Me: s.id, Assignment: as, Lease: placement.Lease{Owner: lease.Owner, Epoch: lease.Epoch}, Starting: starting,
		Now: time.Now(), WarmMax: handoverWarmMax}
	if old != nil {
		f.Runner = &placement.Runner{Lease: placement.Lease{Owner: old.Lease().Owner, Epoch: old.Lease().Epoch}, Runs: old.Runs(rec),
			SameRevision: old.Record().Revision == rec.Revision, LogLost: old.LogLost(), HandoverAsked: old.HandoverAsked()}
		if owner != s.id && !starting {
			f.NewOwnerWarm = s.standbyWarm(owner, key)
		}
	}
	d := placement.Decide(f)
	switch d.Action {
	case placement.Starting:
		return true // applied again once started (see startPartitions)
	case placement.Keep:
		old.SetHandoverAsked(time.Time{})
		return true
	case placement.Acquire:
		return s.acquirePartition(ctx, rec, p, parts, key, old, f, a)
	}
	// The plan gives the partition to another runtime.
	if !d.Standby {
		defer s.endStandby(key, true)
	}
	switch d.Action {
	case placement.KeepStandby:
		s.keepStandby(rec.Name, p, parts, copyPos{})
	case placement.WaitForWarmCopy:
		// The plan moves the partition to another runtime (one joined) while this one holds
		// its lease: it is handed over once the newcomer's standby copy of it is warm (or
		// after handoverWarmMax). Its member value changing, or the periodic check, applies
		// this again.
		if old.HandoverAsked().IsZero() {
			old.SetHandoverAsked(f.Now)
			s.logger.Info("partition to hand over once the new owner's copy is warm", "deployment", rec.Name, "partition", p, "to", owner)
		}
	case placement.HandOver:
		// The batch in flight finishes, the status says stopped, and the lease is released
		// for the new owner to take at once.
		s.mu.Lock()
		delete(s.runners, key)
		s.mu.Unlock()
		old.StopAndReport(false, true)
		var waited time.Duration
		if !old.HandoverAsked().IsZero() {
			waited = time.Since(old.HandoverAsked()).Round(time.Millisecond)
		}
		s.logger.Info("partition handed over", "deployment", rec.Name, "partition", p, "to", owner, "waited_for_warm_copy", waited)
		if d.Standby {
			s.keepStandby(rec.Name, p, parts, old.CopyPos())
		} else {
			old.DropCopy()
		}
	case placement.StopFenced:
		// Another runtime holds the lease: this one was fenced (or is about to be, at its
		// next append). It stops quietly: the status and the lease are the new owner's.
		s.mu.Lock()
		delete(s.runners, key)
		s.mu.Unlock()
		old.Silence()
		old.Stop()
		s.logger.Info("deployment stopped here", "deployment", rec.Name, "partition", p, "owner", owner)
		if d.Standby {
			s.keepStandby(rec.Name, p, parts, copyPos{})
		} else {
			old.DropCopy()
		}
	}
	return true
}

// acquirePartition carries out placement.Acquire for partition p of rec (of parts), keyed
// key, that runner old (nil: none) does not run as it should: it checks the revision (once
// per apply), stops old, and acquires the lease; while another live runtime holds it, a
// standby copy is kept here (placement.AwaitLease), else the partition is added to the
// apply's starts. It returns false as applyPartition does.
func (s *Service) acquirePartition(ctx context.Context, rec registry.Record, p, parts int, key string, old *runner.Runner, f placement.Facts, a *applying) bool {
	if !a.checked {
		var ok bool
		if a.rv, ok = s.checkOrReport(ctx, rec, old); !ok {
			return false
		}
		a.checked = true
	}
	if old != nil {
		s.mu.Lock()
		delete(s.runners, key)
		s.mu.Unlock()
		old.Stop() // the lease stays this runtime's: it acquires it again below
	}
	lease, err := s.leases.Acquire(ctx, rec.Name, p, s.id, s.isLive)
	if errors.Is(err, cluster.ErrLeaseHeld) {
		f.AcquireRefused = true
		if placement.Decide(f).Action == placement.AwaitLease {
			// Its owner, alive, hands it over once this runtime's copy of it is warm: keep one.
			s.keepStandby(rec.Name, p, parts, copyPos{})
			s.mu.Lock()
			sb := s.standbys[key]
			s.mu.Unlock()
			warm := false
			if sb != nil {
				_, warm = sb.position()
			}
			s.logger.Debug("partition's lease is held by a live runtime; warming a copy of it", "deployment", rec.Name, "partition", p, "warm", warm, "err", err)
			a.held = a.held || warm // until it is warm, its member value changing applies this again
		}
		return true
	}
	if err != nil {
		s.retryLater(rec, err)
		return false
	}
	hint := s.endStandby(key, false)
	if old != nil {
		hint = old.CopyPos()
	}
	a.starts = append(a.starts, partitionStart{p: p, key: key, lease: lease, hint: hint, acquired: time.Now()})
	return true
}

// partitionStart is a partition whose lease this runtime acquired in an apply, to be
// restored and started here.
type partitionStart struct {
	p        int
	key      string
	lease    cluster.Lease
	hint     copyPos // what a standby copy (or the runner it replaces) here holds
	acquired time.Time
}

// parallelStarts bounds the partitions one apply restores and starts at once: a runtime
// that takes over a dead one's partitions restores them side by side (the restores wait on
// NATS; compiling is cached), so the last one is not delayed by all the others.
const parallelStarts = 4

// startPartitions restores and starts the partitions whose leases an apply of rec acquired,
// at most parallelStarts at once. A reset (one partition) is started on the service's loop;
// otherwise the starts run off it, so that the loop goes on taking the leases other
// runtimes release meanwhile (a runtime stopping, say) rather than waiting for these
// restores: each partition is marked starting (applyPartition leaves it alone) until its
// runner is registered, and rec is applied again once all are done.
func (s *Service) startPartitions(ctx context.Context, rec registry.Record, a *applying) {
	if len(a.starts) == 0 {
		return
	}
	if rec.ResetState != "" {
		for _, ps := range a.starts {
			r, err := runner.BuildReplicated(ctx, s.runnerConfig(), runnerDeps{s}, a.rv, ps.lease, ps.p, ps.hint)
			if err := s.startBuilt(ctx, rec, ps, r, err); err != nil {
				s.retryLater(rec, err)
			}
		}
		return
	}
	s.mu.Lock()
	for _, ps := range a.starts {
		s.starting[ps.key] = true
	}
	s.mu.Unlock()
	starts, rv := a.starts, a.rv
	s.startsWG.Add(1)
	go func() {
		defer s.startsWG.Done()
		errs := make([]error, len(starts))
		var wg sync.WaitGroup
		sem := make(chan struct{}, parallelStarts)
		for i, ps := range starts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				r, err := runner.BuildReplicated(ctx, s.runnerConfig(), runnerDeps{s}, rv, ps.lease, ps.p, ps.hint)
				errs[i] = s.startBuilt(ctx, rec, ps, r, err)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			s.retries.failedStart(rec, err) // the loop retries it, once for the apply
			return
		}
		s.retries.after(rec, 0) // the plan may have changed meanwhile
	}()
}

// startBuilt registers and starts the runner built (or not: err) for ps, and clears ps's
// starting mark. It returns err when a retry may fix it (nil for one fenced, or permanent).
func (s *Service) startBuilt(ctx context.Context, rec registry.Record, ps partitionStart, r *runner.Runner, err error) error {
	defer func() {
		s.mu.Lock()
		delete(s.starting, ps.key)
		s.mu.Unlock()
	}()
	if errors.Is(err, changelog.ErrFenced) {
		// A newer epoch fenced the log between the acquire and the fence: another runtime
		// owns the partition now, and its status is its own.
		s.logger.Info("deployment taken by another runtime while starting here", "deployment", rec.Name, "partition", ps.p, "err", err)
		return nil
	}
	if err != nil {
		s.logger.Error("deployment could not start", "deployment", rec.Name, "partition", ps.p, "err", err)
		s.putStatus(ctx, &client.Status{Name: ps.key, State: client.StatusFailed, DeployedAt: rec.DeployedAt, Error: err.Error(), ModuleDigest: rec.ModuleDigest, Owner: s.id, UpdatedAt: time.Now()})
		if permanent(err) {
			return nil
		}
		return err
	}
	if !s.clearReset(ctx, rec, r) {
		return nil
	}
	r.SetTakeoverAt(ps.acquired)
	s.mu.Lock()
	s.runners[ps.key] = r
	s.mu.Unlock()
	r.Start(ctx)
	s.logger.Info("deployment running (changelog replication)", append([]any{"deployment", rec.Name, "partition", ps.p, "epoch", ps.lease.Epoch,
		"since_lease_acquired", time.Since(ps.acquired).Round(time.Millisecond), "module", rec.ModuleDigest[:12]}, r.Opened()...)...)
	return nil
}

// waitStarts waits for the starts running off the service's loop to register their runners
// (before the runners are stopped, so that none is left running).
func (s *Service) waitStarts() { s.startsWG.Wait() }

// liveIDs returns the IDs of the live runtimes, this one included.
func (s *Service) liveIDs() []string {
	ids := []string{s.id}
	for _, m := range s.members.Live() {
		if m.ID != s.id {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// placeableIDs are the live runtimes that may be given partitions, sorted: the live ones but
// those leaving (a runtime stopping keeps its leases until it hands them over, but is left
// out of the plan at once, so that the others know where its partitions go).
func (s *Service) placeableIDs() []string {
	leaving := map[string]bool{}
	for _, m := range s.members.Live() {
		leaving[m.ID] = m.Leaving
	}
	return slices.DeleteFunc(s.liveIDs(), func(id string) bool { return leaving[id] })
}

// leavingTimeout bounds the member write that announces a clean stop (NATS may be down).
const leavingTimeout = 2 * time.Second

// announceLeaving, at a clean stop of a runtime that runs partitions of replicated
// deployments, tells the others that it is leaving before it stops them: they plan without
// it at once and take each partition as soon as its lease is released (within
// leaseHeldRetry), rather than only once every partition here has stopped and this runtime
// has left.
func (s *Service) announceLeaving() {
	s.mu.Lock()
	owns := false
	for _, r := range s.runners {
		owns = owns || r.Lease().Epoch != 0
	}
	s.mu.Unlock()
	if !owns {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leavingTimeout)
	defer cancel()
	if err := s.members.SetLeaving(ctx); err != nil {
		s.logger.Warn("announcing the stop to the other runtimes failed; they take the partitions once this one has left", "err", err)
	}
}

// isLive tells whether runtime id is a live member (leaving or not: it holds its leases
// until it releases them).
func (s *Service) isLive(id string) bool { return slices.Contains(s.liveIDs(), id) }

// replan applies every replicated deployment again: the members changed, or a lease may
// have (a periodic check), so the plan may give deployments to other runtimes.
func (s *Service) replan(ctx context.Context, records map[string]registry.Record) {
	for _, rec := range records {
		if s.shapeOf(rec).replicated {
			s.apply(ctx, rec)
		}
	}
}

// lostReplication handles a runner whose state writes can no longer reach the changelog:
// fenced (another runtime took the deployment) or the append failed. The runner has
// stopped; the deployment is applied again after a short wait, which restores it from the
// log here if the plan still gives it to this runtime.
func (s *Service) lostReplication(rec registry.Record, err error) {
	if errors.Is(err, changelog.ErrFenced) {
		s.cfg.Metrics.fenced(rec.Name)
		s.logger.Warn("deployment fenced: another runtime took it over", "deployment", rec.Name, "err", err)
	} else {
		s.logger.Error("deployment's changelog append failed; restoring it", "deployment", rec.Name, "err", err)
	}
	s.retries.after(rec, time.Second)
}

// changelogBytes is the size of deployment's changelog stream.
func (s *Service) changelogBytes(ctx context.Context, deployment string) (uint64, error) {
	st, err := s.js.Stream(ctx, topology.ChangelogStream(deployment))
	if err != nil {
		return 0, err
	}
	return st.CachedInfo().State.Bytes, nil
}
