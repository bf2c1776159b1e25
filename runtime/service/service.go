package service

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/runner"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// Options configures a [Service].
type Options struct {
	// DataDir holds the state store (DataDir/state) and the compilation cache
	// (DataDir/cache, unless CacheDir names another). Required.
	DataDir string
	// CacheDir is the directory of the compilation cache (engine.Options.CacheDir), when
	// not DataDir/cache: several runtimes may share one (compiled code is keyed by the
	// module's digest, the wazero version and the CPU's features). Optional.
	CacheDir string
	// Conn is the NATS connection (required; not closed by the service).
	Conn *nats.Conn
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock gives batch processing times. Default timeouts.System.
	Clock timeouts.Clock
	// Metrics, when set, receive the deployments' Prometheus metrics (see NewMetrics).
	Metrics *Metrics
	// ID names the runtime to the others: its membership key, the owner recorded for the
	// deployments it runs, the subject it answers pings on. 1 to 64 bytes of A-Z, a-z, 0-9,
	// '-' and '_'. Default: the state store's ID, made once and kept in DataDir, so a restart
	// on the same directory is the same runtime. Two live runtimes must never share an ID.
	ID string
	// MemberTTL is how long a runtime that stops renewing its membership (a crash, a cut
	// from NATS) stays a member: every runtime of one NATS must use the same. Default 5s, at
	// least 1s.
	MemberTTL time.Duration
	// Replicas is the replica count of the streams and buckets the service creates (those
	// that exist keep theirs). Default (0): 3 when the NATS server is clustered, 1 otherwise.
	Replicas int
	// StateOptions tune the state store (for example its cache size, or a fault-injecting
	// filesystem in tests). Logger is set by the service. Optional.
	StateOptions *state.Options
	// NATSFault, when set, tells what keeps the NATS server from storing messages (nil when
	// nothing does): serve sets it to the embedded server's disk watch (see
	// [EmbeddedFault]). The service shows it in every running deployment's status and in
	// [Service.Fault] (/readyz). Optional.
	NATSFault func() error
	// Ceilings bound what deployments' modules may use (engine.Ceilings; zero fields take
	// the defaults). They are published in this runtime's membership, where deploy reads
	// them.
	Ceilings engine.Ceilings
}

// ErrIncompleteOptions: Options miss DataDir or Conn.
var ErrIncompleteOptions = errors.New("service: Options need DataDir and Conn")

// Service runs every deployment registered in NATS: it watches the deployments bucket and
// starts, replaces and stops deployments as they are deployed, redeployed and undeployed.
type Service struct {
	cfg    Options
	logger *slog.Logger
	rt     *engine.Runtime
	js     jetstream.JetStream
	reg    *registry.Registry
	leases *cluster.Leases

	id      string // the runtime's ID (Options.ID, or the store's)
	members *cluster.Membership

	mu       sync.Mutex
	store    *state.Store
	runners  map[string]*runner.Runner
	standbys map[string]*standby // by keyspace: the standby copies kept here
	ensured  map[string]string   // by deployment revision (registry.Record.RevisionKey): its input stream, once a runner here ensured its streams
	starting map[string]bool     // by keyspace: the partitions being started off the loop (startPartitions)
	startsWG sync.WaitGroup      // the starts off the loop

	standbyPub sync.Mutex // orders the recordings of the standby copies (publishStandbys)

	// wms is the view of the partitions' watermarks (see watermarks), opened by the first
	// runner of a partitioned event-time deployment; wmMu guards it.
	wmMu sync.Mutex
	wms  *cluster.Watermarks

	ready       atomic.Bool
	storeFailed chan struct{}
	// storeDown is why the store is closed for a reopen (recoverStore), nil while it is open.
	storeDown atomic.Pointer[error]
	// beating is set while a heartbeat runs (see heartbeat).
	beating atomic.Bool
	// stopBy, once Run's context ended, is when the stop's writes to NATS (the final statuses,
	// the leave) give up, in Unix nanoseconds (see stopWritesBudget); 0 before.
	stopBy  atomic.Int64
	retries *retries                 // the deployments to apply again, which the loop drains
	backoff map[string]time.Duration // per deployment, for retries of a failed start; only the loop uses it
	// checked is the last revision of each deployment that check accepted, reused while the
	// record is the same (the partitions a runtime takes one after another, its placement
	// checks). Only the service's loop uses it.
	checked map[string]*runner.Revision
	// checks are the checks running off the loop, or their refusals not answered yet, and
	// checkDone where they end (see check). Only the service's loop uses checks.
	checks    map[string]checkResult
	checkDone chan checkResult
	// shapes is each deployment's shape, decoded once per revision (see shapeOf). Only the
	// service's loop uses it.
	shapes map[string]shape
}

// New opens the state store and the registry.
func New(ctx context.Context, cfg Options) (*Service, error) {
	if cfg.DataDir == "" || cfg.Conn == nil {
		return nil, ErrIncompleteOptions
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = timeouts.System
	}
	// Publishes that get no acknowledgement fail after a while instead of waiting forever,
	// and several deployments may each keep a full output.PublishWindow in flight.
	js, err := output.NewJetStream(cfg.Conn)
	if err != nil {
		return nil, err
	}
	reg, err := registry.OpenRegistry(ctx, js, cfg.Replicas)
	if err != nil {
		return nil, fmt.Errorf("service: opening the deployment registry: %w", err)
	}
	leases, err := cluster.OpenLeases(ctx, js, cfg.Replicas)
	if err != nil {
		return nil, fmt.Errorf("service: opening the partition leases: %w", err)
	}
	cacheDir := cfg.CacheDir
	if cacheDir == "" {
		cacheDir = filepath.Join(cfg.DataDir, "cache")
	}
	rt, err := engine.New(engine.Options{CacheDir: cacheDir, Logger: cfg.Logger, Ceilings: cfg.Ceilings})
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, logger: cfg.Logger, rt: rt, js: js, reg: reg, leases: leases,
		runners: map[string]*runner.Runner{}, standbys: map[string]*standby{}, ensured: map[string]string{}, starting: map[string]bool{}, checked: map[string]*runner.Revision{}, checks: map[string]checkResult{}, shapes: map[string]shape{}, checkDone: make(chan checkResult), storeFailed: make(chan struct{}, 1),
		retries: newRetries(), backoff: map[string]time.Duration{}}
	if s.store, err = s.openStore(); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	if s.id = cfg.ID; s.id == "" {
		s.id = s.store.ID()
	}
	// Record NATS outages in every deployment's status (last_error), keeping whatever
	// handler the connection already had.
	prev := cfg.Conn.Opts.DisconnectedErrCB
	cfg.Conn.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		if prev != nil {
			prev(c, err)
		}
		s.noteOutage(err)
	})
	return s, nil
}

func (s *Service) openStore() (*state.Store, error) {
	var o state.Options
	if s.cfg.StateOptions != nil {
		o = *s.cfg.StateOptions
	}
	o.Logger = s.logger
	st, err := state.Open(filepath.Join(s.cfg.DataDir, "state"), &o)
	if err != nil {
		return nil, fmt.Errorf("service: opening the state store: %w", err)
	}
	return st, nil
}

// Run runs deployments until ctx is done. Then every deployment stops after its batch in
// flight commits (a drain), every status is written as stopped, the runtime leaves the
// members, and Run returns nil.
func (s *Service) Run(ctx context.Context) error {
	defer s.rt.Close(context.Background())
	defer s.closeWatermarks() // after every runner stopped (the deferred calls run in reverse)
	defer func() {
		s.mu.Lock()
		st := s.store
		s.mu.Unlock()
		if st != nil {
			st.Close()
		}
	}()
	var events <-chan registry.Event
	err := s.untilStarted(ctx, "watching deployments", func(ctx context.Context) (err error) {
		events, err = s.reg.Watch(ctx, func(inv registry.Invalid) {
			s.logger.Warn("deployment record skipped: no runtime runs it until it is deployed again or undeployed",
				"key", inv.Key, "revision", inv.Revision, "reason", inv.Reason)
		})
		return err
	})
	if err != nil {
		return err
	}
	stopAPI, err := s.serveAPI()
	if err != nil {
		return err
	}
	defer stopAPI()
	err = s.untilStarted(ctx, "joining the runtimes", func(ctx context.Context) (err error) {
		ceil, _ := json.Marshal(s.rt.Ceilings())
		s.members, err = cluster.JoinMembers(ctx, s.js, cluster.MemberOptions{ID: s.id, TTL: s.cfg.MemberTTL, Replicas: s.cfg.Replicas, Ceilings: ceil})
		return err
	})
	if err != nil {
		return err
	}
	defer func() {
		// Leaving at once tells the others without waiting for the member TTL. Bounded like
		// a status write: a NATS server that cannot store (a full disk) never answers.
		lctx, cancel := s.natsWriteContext(context.Background())
		defer cancel()
		if err := s.members.Leave(lctx); err != nil {
			s.logger.Warn("leaving the runtimes failed; the others see this runtime gone after the member TTL", "err", err)
		}
	}()
	s.logger.Info("runtime started", "id", s.id, "data", s.cfg.DataDir)
	s.ready.Store(true)
	defer s.ready.Store(false)
	records := map[string]registry.Record{}
	// Replicated deployments are placed again when the members change, and at least once a
	// member TTL (a lease may have moved without a member change: a runtime that was paused).
	recheck := time.NewTicker(s.members.TTL())
	defer recheck.Stop()
	beat := time.NewTicker(client.StatusHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-beat.C:
			s.heartbeat(ctx)
		case <-s.members.Changes():
			s.replan(ctx, records)
		case <-recheck.C:
			s.replan(ctx, records)
		case <-ctx.Done():
			s.stopBy.Store(time.Now().Add(stopWritesBudget).UnixNano())
			s.announceLeaving()
			s.stopAll()
			s.logger.Info("runtime stopped")
			return nil
		case ev, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					continue
				}
				s.stopAll()
				return errors.New("service: the deployment watch ended")
			}
			if ev.InitialDone {
				continue
			}
			name := ev.Record.Name
			if ev.Deleted {
				delete(records, name)
				delete(s.backoff, name)
				delete(s.checked, name)
				delete(s.checks, name)
				delete(s.shapes, name)
				s.undeploy(name)
				continue
			}
			records[name] = ev.Record
			delete(s.backoff, name)
			s.apply(ctx, ev.Record)
		case <-s.retries.wake:
			s.retry(ctx, records)
		case c := <-s.checkDone:
			s.checkedOff(c)
			if cur, ok := records[c.rec.Name]; ok && cur.Revision == c.rec.Revision {
				s.apply(ctx, cur)
			}
		case <-s.storeFailed:
			s.recoverStore(ctx, records)
		}
	}
}

// apply starts or replaces the deployment of rec. When the new revision cannot start, the
// running one (if any) keeps running and the error goes to the deployment's status.
func (s *Service) apply(ctx context.Context, rec registry.Record) {
	if s.shapeOf(rec).replicated {
		s.applyReplicated(ctx, rec)
		return
	}
	s.mu.Lock()
	old := s.runners[rec.Name]
	me := s.id
	s.mu.Unlock()
	if old.Runs(rec) {
		return
	}
	// Exactly one runtime runs a deployment: its state lives on that runtime's disk.
	owner, err := s.reg.Claim(ctx, rec.Name, me)
	if err != nil {
		s.retryLater(rec, err)
		return
	}
	if owner != me {
		if old != nil {
			// Another runtime took it (deploy --reset-state while this one did not answer).
			s.stop(rec.Name, "taken over by runtime "+owner)
		}
		s.reportIfOrphaned(ctx, rec, owner)
		return
	}
	rv, ok := s.checkOrReport(ctx, rec, old)
	if !ok {
		return
	}
	if old != nil {
		// One writer at a time: the old runner commits its last batch and lets go of the
		// consumer before the new one resets the consumer and reads the progress.
		s.mu.Lock()
		delete(s.runners, rec.Name)
		s.mu.Unlock()
		old.Stop()
		old.Detach() // a replicated revision (replication switched off): its lease goes
	}
	r, err := runner.Build(ctx, s.runnerConfig(), runnerDeps{s}, rv, rec.ResetState != "")
	if err != nil {
		s.logger.Error("deployment could not start", "deployment", rec.Name, "err", err)
		s.putStatus(ctx, &client.Status{Name: rec.Name, State: client.StatusFailed, DeployedAt: rec.DeployedAt, Error: err.Error(), ModuleDigest: rec.ModuleDigest, Owner: me, UpdatedAt: time.Now()})
		if !permanent(err) {
			s.retryLater(rec, err)
		}
		return
	}
	if !s.clearReset(ctx, rec, r) {
		return
	}
	s.mu.Lock()
	s.runners[rec.Name] = r
	s.mu.Unlock()
	r.Start(ctx)
	s.logger.Info("deployment running", "deployment", rec.Name, "module", rec.ModuleDigest[:12])
}

// checkOrReport checks rec (see check). When it is refused, the running revision old (if
// any) keeps running with the error in its status, or a failed status is written; ok is
// false then.
func (s *Service) checkOrReport(ctx context.Context, rec registry.Record, old *runner.Runner) (rv *runner.Revision, ok bool) {
	rv, err := s.check(ctx, rec)
	if errors.Is(err, errChecking) {
		return nil, false // the loop applies rec again when its check is done
	}
	if err != nil {
		s.logger.Error("deployment refused", "deployment", rec.Name, "err", err)
		if old != nil && !old.Failed() {
			old.SetError(fmt.Errorf("redeploy refused, still running the previous revision: %w", err))
		} else {
			s.putStatus(ctx, &client.Status{Name: rec.Name, State: client.StatusFailed, DeployedAt: rec.DeployedAt, Error: err.Error(), ModuleDigest: rec.ModuleDigest, Owner: s.id, UpdatedAt: time.Now()})
		}
		if !permanent(err) {
			s.retryLater(rec, err)
		}
		return nil, false
	}
	delete(s.backoff, rec.Name)
	return rv, true
}

// clearReset, after r was built from rec with a state reset asked (rec.ResetState), clears
// the reset's token before anything runs, so that a restart does not reset again (until
// then a reset can be repeated: nothing ran since). It returns false, with r closed, when
// the record could not be updated.
func (s *Service) clearReset(ctx context.Context, rec registry.Record, r *runner.Runner) bool {
	if rec.ResetState == "" {
		return true
	}
	done := rec
	done.ResetState = ""
	rev, err := s.reg.Update(ctx, done)
	if err != nil {
		r.Abandon(ctx)
		if !errors.Is(err, registry.ErrRecordChanged) {
			s.retryLater(rec, err)
		} // else a newer record is on its way, and applies to the emptied state
		return false
	}
	done.Revision = rev
	r.ResetDone(done)
	s.logger.Warn("deployment state reset (deploy --reset-state)", "deployment", rec.Name)
	return true
}

// reportIfOrphaned writes the orphaned status of rec when its owner does not answer: the
// deployment's state is on that runtime's disk, so nothing runs it until that runtime comes
// back or a deploy --reset-state lets another one start from empty state.
func (s *Service) reportIfOrphaned(ctx context.Context, rec registry.Record, owner string) {
	up, err := api.Ping(ctx, s.cfg.Conn, owner)
	if err != nil || up {
		s.logger.Info("deployment is run by another runtime", "deployment", rec.Name, "owner", owner)
		return
	}
	msg := fmt.Sprintf("deployment %s is owned by runtime %s, which does not answer: its state is in that runtime's data directory. "+
		"Start a runtime on that data directory to resume it, or run `groupstate deploy -f SPEC --reset-state --confirm` "+
		"to start it from empty state on a runtime that is up, at the current input position", rec.Name, owner)
	s.logger.Warn("deployment orphaned: its owner does not answer", "deployment", rec.Name, "owner", owner)
	s.putStatus(ctx, &client.Status{Name: rec.Name, State: client.StatusOrphaned, Error: msg, ModuleDigest: rec.ModuleDigest, Owner: owner, DeployedAt: rec.DeployedAt, UpdatedAt: time.Now()})
}

// permanent tells whether a deployment failed to start for a reason that only a new deploy
// can fix (as opposed to NATS being unreachable for a moment).
func permanent(err error) bool {
	return errors.Is(err, spec.ErrInvalidSpec) || errors.Is(err, engine.ErrInvalidModule) || errors.Is(err, engine.ErrABIVersion) || errors.Is(err, engine.ErrModuleInit) || errors.Is(err, natsio.ErrAvoidedStream) || errors.Is(err, natsio.ErrForeignStream) || errors.Is(err, input.ErrInputsChanged) ||
		errors.Is(err, engine.ErrLoadLimit) || errors.Is(err, engine.ErrCeiling)
}

// retryLater starts rec again after a backoff that doubles per failure, up to a minute.
func (s *Service) retryLater(rec registry.Record, err error) {
	d := max(s.backoff[rec.Name]*2, 500*time.Millisecond)
	d = min(d, time.Minute)
	s.backoff[rec.Name] = d
	s.logger.Warn("deployment could not start; retrying", "deployment", rec.Name, "in", d, "err", err)
	s.retries.after(rec, d)
}

// retry drains the retries (see retries): a start off the loop that failed is retried
// later (retryLater), and a record due is applied again, each only while it is still its
// deployment's current record (records, by name).
func (s *Service) retry(ctx context.Context, records map[string]registry.Record) {
	failed, due := s.retries.take(time.Now())
	current := func(rec registry.Record) bool {
		cur, ok := records[rec.Name]
		return ok && cur.Revision == rec.Revision
	}
	for _, f := range failed {
		if current(f.rec) {
			s.retryLater(f.rec, f.err)
		}
	}
	for _, rec := range due {
		if ctx.Err() != nil {
			return // stopping: the loop ends
		}
		if current(rec) {
			s.apply(ctx, rec)
		}
	}
}

// undeploy stops a deployment that was removed. Its owner entry is not the service's to
// remove: client.Undeploy removes it (see there), because the runtime that owned the
// deployment may not be running at undeploy time, or ever again.
func (s *Service) undeploy(name string) {
	s.stop(name, "undeployed")
	s.endStandbys(name, true)
	s.mu.Lock()
	for key := range s.ensured {
		if strings.HasPrefix(key, name+"@") {
			delete(s.ensured, key)
		}
	}
	s.mu.Unlock()
}

func (s *Service) stop(name, why string) {
	s.waitStarts()
	s.mu.Lock()
	var rs []*runner.Runner
	for key, r := range s.runners {
		if r.Name() == name {
			rs = append(rs, r)
			delete(s.runners, key)
		}
	}
	s.mu.Unlock()
	for _, r := range rs {
		r.StopAndReport(false, false)
		s.logger.Info("deployment stopped", "deployment", name, "partition", r.Partition(), "why", why)
	}
}

// stopAll stops every deployment at once (a clean shutdown, a failed store), and writes
// each one's status as stopped: a status left at running would claim work that is not done.
func (s *Service) stopAll() {
	s.waitStarts()
	s.mu.Lock()
	runners := s.runners
	s.runners = map[string]*runner.Runner{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.StopAndReport(true, true)
		}()
	}
	wg.Wait()
	s.endStandbys("", false)
}

// recoverStore handles a failed state store (a Pebble write error): it stops every
// deployment, closes the store aside (a close can wait as long as Pebble's writes cannot
// reach the disk: see closeStore), reopens it with a backoff from 100 ms to 10 s until that
// works, and starts the deployments again from what reached disk. Meanwhile the statuses say
// why ("store failed: no space left on device" on a full disk) and so does [Service.Fault].
func (s *Service) recoverStore(ctx context.Context, records map[string]registry.Record) {
	s.mu.Lock()
	st := s.store
	s.mu.Unlock()
	var cause error = state.ErrFailed
	if st != nil {
		cause = cmp.Or(st.Fault(), cause)
	}
	why := storeFailed(cause)
	s.storeDown.Store(&why)
	defer s.storeDown.Store(nil)
	s.logger.Error("state store failed; stopping deployments and reopening it", "err", cause, "disk_full", state.IsDiskFull(cause))
	s.eachRunner(func(r *runner.Runner) { r.NoteError(why.Error()) })
	s.stopAll()
	s.mu.Lock()
	s.store = nil
	s.mu.Unlock()
	if st != nil && !s.closeStore(ctx, st) {
		return // stopping
	}
	for backoff := 100 * time.Millisecond; ctx.Err() == nil; backoff = min(2*backoff, 10*time.Second) {
		st, err := s.openStore()
		if err == nil {
			s.mu.Lock()
			s.store = st
			s.mu.Unlock()
			s.logger.Info("state store reopened; starting the deployments again")
			break
		}
		why := storeFailed(err)
		s.storeDown.Store(&why)
		s.logger.Error("reopening the state store failed; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
	for _, rec := range records {
		s.apply(ctx, rec)
	}
}

// storeCloseWarnEvery is how often closeStore says that a close still waits.
const storeCloseWarnEvery = 10 * time.Second

// closeStore closes st aside and waits for it until ctx ends (then false). Pebble's close
// waits for its writes and background jobs in flight, which wait for the disk (a full disk:
// until space returns); the store is reopened only once the close returned, since two opens
// of one directory would corrupt it. Every storeCloseWarnEvery it logs that it still waits.
func (s *Service) closeStore(ctx context.Context, st *state.Store) bool {
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	start := time.Now()
	warn := time.NewTicker(storeCloseWarnEvery)
	defer warn.Stop()
	for {
		select {
		case err := <-closed:
			if err != nil {
				s.logger.Info("failed state store closed", "err", err, "took", time.Since(start).Round(time.Millisecond))
			}
			return true
		case <-warn.C:
			s.logger.Warn("the failed state store is still closing: its writes wait for the disk (free space if it is full); it is reopened once closed",
				"waiting", time.Since(start).Round(time.Second), "fault", st.Fault())
		case <-ctx.Done():
			s.logger.Warn("stopping while the failed state store still closes; its files stay as they are, and the next start recovers from them")
			return false
		}
	}
}

// errStoreFailed prefixes the errors of a failed store in statuses and [Service.Fault].
var errStoreFailed = errors.New("store failed")

// storeFailed returns the error shown for a store failed by err: "store failed: no space
// left on device (...)" for a full disk, "store failed: ..." otherwise.
func storeFailed(err error) error {
	if state.IsDiskFull(err) {
		return fmt.Errorf("%w: no space left on device (free space on the runtime's data directory: the runtime resumes by itself): %w", errStoreFailed, err)
	}
	return fmt.Errorf("%w: %w", errStoreFailed, err)
}

// heartbeat, every client.StatusHeartbeat, rewrites the status of every running deployment
// (off the loop, one heartbeat at a time), so that a status older than client.StaleAfter
// means that this runtime cannot write it. A fault of the store or of the NATS server (see
// Fault) goes into each status as its last error, renewed at each heartbeat while it lasts.
func (s *Service) heartbeat(ctx context.Context) {
	if !s.beating.CompareAndSwap(false, true) {
		return // the last one is still writing (NATS slow or failing)
	}
	fault := s.Fault()
	go func() {
		defer s.beating.Store(false)
		s.eachRunner(func(r *runner.Runner) {
			if fault != nil {
				r.NoteError(fault.Error()) // its last error: an error (Error) would have the runner restarted
			}
			if !s.holds(r) {
				return // stopped since: its last status is its stop's
			}
			hctx, cancel := context.WithTimeout(ctx, client.StatusHeartbeat)
			defer cancel()
			r.Heartbeat(hctx)
		})
	}()
}

// holds tells whether r is still one of the service's running runners.
func (s *Service) holds(r *runner.Runner) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, held := range s.runners {
		if held == r {
			return true
		}
	}
	return false
}

// eachRunner calls f with each running runner, outside the service's lock.
func (s *Service) eachRunner(f func(*runner.Runner)) {
	s.mu.Lock()
	runners := make([]*runner.Runner, 0, len(s.runners))
	for _, r := range s.runners {
		runners = append(runners, r)
	}
	s.mu.Unlock()
	for _, r := range runners {
		f(r)
	}
}

// Fault returns what keeps the runtime from making progress, nil when nothing does: its
// state store failed or cannot write (a full disk: "store failed: no space left on device"),
// or the NATS server cannot store messages (Options.NATSFault). /readyz fails while there is
// one. Both heal by themselves once the cause is gone (the store is reopened, the embedded
// server's JetStream restarted).
func (s *Service) Fault() error {
	if f := s.cfg.NATSFault; f != nil {
		if err := f(); err != nil {
			return fmt.Errorf("NATS server: %w", err)
		}
	}
	if why := s.storeDown.Load(); why != nil {
		return *why
	}
	s.mu.Lock()
	st := s.store
	s.mu.Unlock()
	if st != nil {
		if err := st.Fault(); err != nil {
			return storeFailed(err)
		}
	}
	return nil
}

// noteOutage records a lost NATS connection in every running deployment's status.
func (s *Service) noteOutage(err error) {
	msg := "NATS connection lost"
	if err != nil {
		msg += ": " + err.Error()
	}
	s.mu.Lock()
	runners := make([]*runner.Runner, 0, len(s.runners))
	for _, r := range s.runners {
		runners = append(runners, r)
	}
	s.mu.Unlock()
	for _, r := range runners {
		r.NoteError(msg)
	}
}

func (s *Service) signalStoreFailed() {
	select {
	case s.storeFailed <- struct{}{}:
	default:
	}
}

// untilStarted runs step until it succeeds or ctx ends, logging each failure, with a backoff
// from 1 s to 10 s. The steps create or open buckets, which a cluster that has just started,
// or one under load, may not answer in time: a runtime started before its NATS cluster is
// ready waits for it (not ready in /readyz meanwhile) instead of exiting. step is given ctx
// itself, since what it starts (a watch, heartbeats) lives as long as ctx.
func (s *Service) untilStarted(ctx context.Context, what string, step func(context.Context) error) error {
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		err := step(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("service: %s: %w", what, err)
		}
		s.logger.Warn("startup step failed; retrying", "step", what, "attempt", attempt, "in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("service: %s: %w", what, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// ID returns the runtime's ID (Options.ID, or by default its state store's).
func (s *Service) ID() string { return s.id }

// Ready reports whether the service has started watching deployments (for /readyz).
func (s *Service) Ready() bool { return s.ready.Load() }

// statusPutTimeout bounds each status write, and the runtime's leave at its stop: a NATS
// server that cannot store (a full disk) does not answer, and must not hold a deployment's
// stop, or the runtime's, for long (the status then reads stale
// in the clients: see client.StaleAfter).
const statusPutTimeout = 2 * time.Second

// stopWritesBudget bounds the writes of a stop to NATS together (the final status of every
// deployment, the leave): when NATS does not answer, each would wait statusPutTimeout, one
// after the other.
const stopWritesBudget = 3 * time.Second

// natsWriteContext returns the context of one status write or the leave: ctx bounded by
// statusPutTimeout and, during a stop, by the stop's budget (at least 100 ms each).
func (s *Service) natsWriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	now := time.Now()
	deadline := now.Add(statusPutTimeout).UnixNano()
	if by := s.stopBy.Load(); by != 0 {
		deadline = min(deadline, max(by, now.Add(100*time.Millisecond).UnixNano()))
	}
	return context.WithDeadline(ctx, time.Unix(0, deadline))
}

func (s *Service) putStatus(ctx context.Context, st *client.Status) {
	doc, _ := json.Marshal(st)
	ctx, cancel := s.natsWriteContext(ctx)
	defer cancel()
	if err := s.reg.PutStatus(ctx, st.Name, doc); err != nil {
		s.logger.Warn("publishing status failed", "deployment", st.Name, "err", err)
	}
}
