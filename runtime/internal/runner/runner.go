package runner

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Runner drives one partition of a deployment (the whole of it, unpartitioned): its loop
// takes batches from its source (live input or, for a shadow, the primary's batches: see
// batchSource), runs them, has the source acknowledge the input once a batch committed, and
// publishes the partition's status.
//
// Build or BuildReplicated makes a runner, Start runs it, and Stop, StopAndReport or the end
// of Start's context end it. Its methods are for one goroutine, its holder's (the service's),
// unless they say otherwise. Its parts are owned as each says: the holder owns the runner
// but for what the loop owns once started (the source, the engine and the consumer: see
// opening; the shared watermark's lastRowAt; takeoverAt); the status is shared through its
// reporter's lock; the rest is set before Start and read-only after.
type Runner struct {
	env     Config         // what the runners of the process share and only read
	deps    Deps           // what the runner asks of the process that holds it
	unit                   // what it runs
	opening                // the engine and the consumer
	report  statusReporter // the status, behind its own lock
	// in is where the loop takes its batches from: shadow, or the live input (see
	// batchSource); shadow is a shadow's source (nil: not a shadow; see shadow.go).
	in                 batchSource
	shadow             *shadowSource
	partitionWatermark // the partition's share of the event-time watermark
	routing            // partition 0's router
	replication        // lease, snapshots, takeover and handover of a replicated deployment
	control            // how the service ends the loop or has it drain
}

// unit is what a runner runs: the revision, and which partition of it. Set by newRunner and
// read-only after, but for rec, which the holder updates before Start (see ResetDone).
type unit struct {
	rec    registry.Record
	spec   *spec.Spec
	wasm   []byte
	logger *slog.Logger
	// part is the partition the runner runs of a deployment split into parts partitions
	// (parts 1: the whole deployment, partition 0). key names the runner's unit: its keyspace,
	// the key of its status and of s.runners, and what the state API is asked by (see topology.Keyspace).
	part, parts int
	key         string
	// inputOf names the deployment whose input-side streams the runner reads (partitioned
	// stream, inputs stream, default input stream names): its own, or a shadow's primary's,
	// kept once promoted (registry.Record.InputOf).
	inputOf  string
	instance string       // of the output message ids; empty: the store's ID
	initial  *InitialLoad // the revision's initial state, shared by its runners here
}

// opening is what a runner's open makes: the engine and the consumer its source reads. Set by
// open, in setup and then only by the loop (heal), which owns them once started; the engine
// is closed by end once the loop ended.
type opening struct {
	store *state.Store
	ks    *state.Deployment
	eng   *engine.Engine
	src   *input.Source
	// input is the opening of the runner's input started before its first open (see
	// BuildReplicated), which open takes; nil otherwise.
	input *inputOpen
	// opened is how long the steps of the runner's last open took (slog attributes, see
	// timings), for the log line of a takeover.
	opened []any
}

// partitionWatermark is a runner's part of the watermark its partition shares with the
// others (see watermark.go). wm is set by setup and read-only after; lastRowAt is the loop's.
type partitionWatermark struct {
	// wm is the runtime's view of the partitions' watermarks, for a partition of a deployment
	// under event_time (nil otherwise); lastRowAt is when the partition's last row arrived (by
	// the service's clock), published with its max event time; published is the record last
	// given to wm (republished while the partition idles: see republishWatermark).
	wm        *cluster.Watermarks
	lastRowAt time.Time
	published *cluster.WatermarkRecord
}

// routing is the router of partition 0 of a deployment that the runtime splits into
// partitions (without key.subject_token): set by setup, run by start, waited for by end.
type routing struct {
	router     *input.Router // partition 0 of several, without key.subject_token: routes the input to the partitions
	routerDone chan struct{} // closed when the router's goroutine ended (nil: none started)
}

// replication is a runner's part in the replication of a replicated deployment (lease Epoch
// 0: not replicated). lease and snaps are set before start (buildReplicated) and read-only
// after; takeoverAt is set before start and then the loop's; handoverAsked is the service
// goroutine's; logLost is written by the loop and read by the service.
type replication struct {
	lease cluster.Lease // of a replicated deployment (Epoch 0: none)
	snaps *snapshotter  // of a replicated deployment (nil: none)
	// logLost: the loop ended because the changelog refused or lost a write; the deployment
	// is to be restored again (see lostReplication).
	logLost atomic.Bool
	// takeoverAt is when the lease was acquired, until the first batch committed (for
	// groupstate_takeover_seconds); zero otherwise.
	takeoverAt time.Time
	// handoverAsked is when the plan first moved the partition to another runtime while this
	// runner held it (it hands over once the newcomer's copy is warm); zero otherwise.
	handoverAsked time.Time
}

// control is how the service ends a runner's loop or has it drain. Set by newRunner and start,
// before the loop runs; drained is written by the loop and read by any goroutine.
type control struct {
	cancel context.CancelFunc // ends the loop and cancels the batch in flight
	drain  context.CancelFunc // ends the loop after the batch in flight
	done   chan struct{}      // closed when the loop ended

	// drainReq takes a drain request (undeploy --drain) to the loop, which runs the drain
	// batch and then nothing more; drained is the report once it did (nil before).
	drainReq chan chan drainResult
	drained  atomic.Pointer[engine.BatchReport]
}

// CopyPos returns what r's keyspace holds of its changelog, for a stopped runner of a
// replicated deployment (the zero changelog.Position otherwise): every record up to its last append.
func (r *Runner) CopyPos() changelog.Position {
	if r.snaps == nil || r.snaps.repl == nil {
		return changelog.Position{}
	}
	after, failed := r.snaps.repl.Position()
	p, err := r.ks.Progress()
	if failed != nil || err != nil {
		return changelog.Position{} // an append whose outcome is unknown: the restore finds the copy's place
	}
	return changelog.Position{Held: after, Batch: p.BatchID}
}

// DropCopy, for a stopped runner of a replicated deployment that this runtime keeps no copy
// of (the plan gives it neither the partition nor a standby of it), deletes its keyspace here:
// the changelog has all of it.
func (r *Runner) DropCopy() {
	if r.lease.Epoch == 0 {
		return
	}
	r.ks.SetReplicator(nil) // the drop is this runtime's alone, not a write of the partition
	if err := r.ks.Drop(); err != nil {
		r.logger.Warn("dropping the local copy of a partition run elsewhere failed", "err", err)
	}
}

// Revision is a deployment record whose spec and module were checked: what a runner runs.
// It is read-only once made, but for Initial, which is safe for concurrent use.
type Revision struct {
	Rec  registry.Record
	Spec *spec.Spec
	Wasm []byte
	// Initial is the record's initial state, loaded and parsed once for the revision's
	// partitions on this runtime (see Runner.initialState); NewRevision makes it.
	Initial *InitialLoad
}

// NewRevision returns the revision of rec, whose spec sp and module wasm were checked.
func NewRevision(rec registry.Record, sp *spec.Spec, wasm []byte) *Revision {
	return &Revision{Rec: rec, Spec: sp, Wasm: wasm, Initial: &InitialLoad{}}
}

// InitialLoad holds a revision's parsed initial state once one of its runners loaded it.
// Safe for concurrent use; the zero InitialLoad holds none yet.
type InitialLoad struct {
	mu sync.Mutex
	is *engine.InitialState
}

// get returns the initial state, loaded by load the first time (and again after a load
// failed); one load runs at a time.
func (l *InitialLoad) get(load func() (*engine.InitialState, error)) (*engine.InitialState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.is == nil {
		is, err := load()
		if err != nil {
			return nil, err
		}
		l.is = is
	}
	return l.is, nil
}

// options are what a replicated deployment's runner has besides the others'.
type options struct {
	lease    cluster.Lease
	instance string
	part     int // the partition, of a deployment with spec.Partitions > 1
}

// Build makes the runner of rv, a deployment that is not replicated, and opens it: it
// ensures the deployment's streams, creates the input consumer (reset to its ack floor, and
// reconciled with the committed position) and the engine. With reset (deploy --reset-state),
// the deployment's state is emptied first. The previous runner of the deployment, if any,
// must have stopped: only one writer uses the consumer and the state at a time. The runner
// runs once started (Start).
func Build(ctx context.Context, cfg Config, deps Deps, rv *Revision, reset bool) (*Runner, error) {
	r := newRunner(cfg, deps, rv, options{})
	if err := r.setup(ctx, reset); err != nil {
		return nil, err
	}
	return r, nil
}

// newRunner makes the runner of rv, not set up yet: nothing of it reaches NATS.
func newRunner(cfg Config, deps Deps, rv *Revision, o options) *Runner {
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	rec, sp := rv.Rec, rv.Spec
	logger := cfg.Logger.With("deployment", sp.Name)
	r := &Runner{env: cfg, deps: deps, unit: unit{rec: rec, spec: sp, wasm: rv.Wasm, initial: rv.Initial, logger: logger, instance: o.instance, part: o.part, parts: max(sp.Partitions, 1)},
		opening: opening{store: cfg.Store}, control: control{done: make(chan struct{}), drainReq: make(chan chan drainResult)}}
	r.lease = o.lease
	r.key = topology.Keyspace(sp.Name, r.part, r.parts)
	r.inputOf = rec.InputDeployment() // a shadow recorded before InputOf: its primary
	if rec.ShadowOf != "" {
		r.shadow = &shadowSource{feed: feed{r: r, poll: sp.Trigger.Interval.Std()}}
		r.in = r.shadow
	} else {
		r.in = &liveSource{feed: feed{r: r, poll: max(idlePoll, sp.Trigger.Interval.Std()), topUp: true}}
	}
	if r.parts > 1 {
		r.logger = logger.With("partition", r.part)
	}
	r.ks = cfg.Store.Deployment(r.key)
	if o.lease.Epoch == 0 {
		// Not replicated: no changelog replicator left by an earlier replicated revision
		// (replication switched off with --reset-state) may receive its writes.
		r.ks.SetReplicator(nil)
	}
	return r
}

// setup opens the runner made by newRunner (see open; with reset, its state emptied first),
// with its router and watermarks when it has them, ready to start.
func (r *Runner) setup(ctx context.Context, reset bool) error {
	sp, rec := r.spec, r.rec
	var err error
	if r.sharesWatermark() {
		if r.wm, err = r.deps.Watermarks(ctx); err != nil {
			return err
		}
		if rec, ok := r.wm.Record(sp.Name, r.part); ok {
			r.lastRowAt = rec.LastRowAt // a takeover does not make an idle partition look busy
		}
	}
	notes, err := r.open(ctx, reset)
	if err != nil {
		return err
	}
	if r.parts > 1 && r.part == 0 && !r.bySubject() && !r.shadowing() { // a shadow reads what its primary's router routed
		if r.router, err = r.deps.NewRouter(ctx, sp, r.inputOf); err != nil {
			r.eng.Close(context.WithoutCancel(ctx))
			return fmt.Errorf("input router: %w", err)
		}
	}
	st := client.Status{Name: r.key, State: client.StatusRunning, ModuleDigest: rec.ModuleDigest, DeployedAt: rec.DeployedAt, StartedAt: time.Now(), Owner: r.env.ID,
		ShadowOf: rec.ShadowOf}
	if in := r.shadow; in != nil && in.promoted {
		st.Promoted, st.PromotedBatch, st.PromotedPosition = true, in.handover.Batch, in.handover.Position
	}
	for _, in := range sp.Inputs {
		st.Inputs = append(st.Inputs, client.InputStatus{Name: in.Name})
	}
	if notes != "" {
		st.LastError, st.LastErrorAt = notes, time.Now()
	}
	r.report.reset(st)
	r.report.setCounters(r.eng.Progress().Counters) // they go on from the last commit, here or on another runtime
	return nil
}

// open ensures the streams, creates the input consumer, reconciles it with the committed
// position (see reconcile) and creates the engine, which it sets as r.src and r.eng (closing
// an engine r had). It runs in build, and in the loop to heal a deleted stream or consumer;
// nothing else uses r.src and r.eng meanwhile. With reset, it empties the state first (see
// resetState). It returns what reconcile found, for status.
func (r *Runner) open(ctx context.Context, reset bool) (notes string, err error) {
	sp := r.spec
	t := startTimings()
	defer t.logIfSlow(r.logger, "opening the deployment took long")
	in := r.input
	r.input = nil
	if in == nil {
		in = r.startInput(ctx, nil)
	}
	inStream, src, err := in.wait()
	t.steps = append(t.steps, in.steps...)
	t.mark("input_wait")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			r.deps.ForgetStreams(r.rec) // the next open ensures them again
		}
	}()
	var resetNote string
	if reset {
		dropped, err := resetState(ctx, r.ks, src)
		if err != nil {
			return "", fmt.Errorf("resetting the state: %w", err)
		}
		if dropped.total() > 0 {
			resetNote = dropped.String()
			r.logger.Warn(resetNote, "outputs", dropped.outputs, "entries", dropped.total())
		}
	}
	defer func() {
		if err == nil && resetNote != "" {
			notes = strings.Join(slices.DeleteFunc([]string{resetNote, notes}, func(s string) bool { return s == "" }), "; ")
		}
	}()
	if r.shadow != nil && r.rec.Promoting {
		// A promotion that committed the shadow's input position but stopped before storing
		// the record: the position counts in the input, not in the manifests.
		if _, err = r.promotionCommitted(ctx); err != nil {
			return "", err
		}
	}
	if r.shadow == nil || !r.shadow.promoted {
		if notes, err = reconcile(ctx, r.env.JS, r.ks, inStream, src, r.logger); err != nil {
			return "", err
		}
	}
	t.mark("reconcile")
	p, err := r.ks.Progress()
	if err != nil {
		return "", err
	}
	pub := output.NewPublisher(r.env.JS, output.Subjects{Output: sp.Output.Subject, DeadLetter: sp.DeadLetter.Subject, Late: sp.Late.Subject,
		Manifest: topology.ManifestSubject(sp.Name, r.part)}).
		WithInstance(cmp.Or(r.instance, r.store.ID())).WithGeneration(p.Generation, p.GenerationFrom)
	cfg := engine.Config{Spec: sp, Wasm: r.wasm, Store: r.store, Keyspace: r.key, Sink: publisherSink{pub}, Logger: r.engineLogger(),
		SharedWatermark: r.engineBound(), Manifests: true, Revision: deployRevision(r.rec)}
	if r.bySubject() {
		cfg.WrongPartition = r.wrongPartition
	}
	if r.parts > 1 {
		// The partitions here of one revision run on one module: a partition taken over
		// starts no module of its own, and limits.instances bounds them together.
		cfg.ShareModule = r.rec.RevisionKey()
	}
	if r.rec.InitialState != "" {
		// Loaded only while the keyspace has not applied it: the engine then decides.
		applied, err := r.ks.InitialStateApplied()
		if err != nil {
			return "", err
		}
		if !applied {
			if cfg.InitialState, err = r.initialState(ctx); err != nil {
				return "", err
			}
			t.mark("initial_state")
		}
	}
	eng, err := r.env.Runtime.NewEngine(ctx, cfg)
	if err != nil {
		return "", err
	}
	t.mark("engine")
	if r.eng != nil {
		r.eng.Close(context.WithoutCancel(ctx))
	}
	r.eng, r.src = eng, src
	r.opened = t.steps
	return notes, nil
}

// ensureStreams ensures the deployment's streams (see Deps.EnsureStreams; with
// partitions, the partitioned stream too) and returns the input stream's name. A runner's
// first open skips it when another partition of the same revision here ensured them; a heal
// (r.eng set: a stream or the consumer was deleted) never does.
func (r *Runner) ensureStreams(ctx context.Context) (string, error) {
	key := r.rec.RevisionKey()
	inStream, done := r.deps.StreamsEnsured(key)
	if done && r.eng == nil {
		return inStream, nil
	}
	inStream, err := r.deps.EnsureStreams(ctx, r.spec, r.inputStreams())
	if err != nil {
		return "", err
	}
	if r.parts > 1 && !r.shadowing() {
		if err := r.ensurePartitioned(ctx, inStream); err != nil {
			return "", fmt.Errorf("partitioned input stream: %w", err)
		}
	}
	r.deps.EnsuredStreams(key, inStream)
	return inStream, nil
}

// inputStreams names the deployment whose input-side streams r ensures: r.inputOf, or none
// (empty) for a shadow, which reads its primary's.
func (r *Runner) inputStreams() string {
	if r.shadowing() {
		return ""
	}
	return r.inputOf
}

// bySubject tells whether the NATS server splits the deployment's input into its partitions
// (key.subject_token with partitions above 1) rather than the router.
func (r *Runner) bySubject() bool {
	return r.parts > 1 && r.spec.Key.SubjectToken > 0
}

// ensurePartitioned ensures the partitioned stream the partition reads, of input stream
// inStream: written by the router, or sourcing the input through the server's transforms.
func (r *Runner) ensurePartitioned(ctx context.Context, inStream string) error {
	sp := r.spec
	if !r.bySubject() {
		return input.EnsurePartitionedStream(ctx, r.env.JS, r.inputOf, r.env.Replicas, sp.Input.MaxAge.Std())
	}
	return input.EnsureSourcedPartitionedStream(ctx, r.env.JS, input.SourcedOptions{Deployment: r.inputOf, InputStream: inStream,
		InputSubjects: sp.Input.Subjects, Token: sp.Key.SubjectToken, Partitions: r.parts, Replicas: r.env.Replicas, MaxAge: sp.Input.MaxAge.Std()})
}

// wrongPartition is the engine's WrongPartition check of a deployment the server partitions:
// a row whose key field is not the partition's key, though its subject's token put it there,
// is dead-lettered (engine.ReasonWrongPartition) rather than processed in the wrong partition.
func (r *Runner) wrongPartition(key []byte) error {
	if p := partition.Of(key, r.parts); p != r.part {
		return fmt.Errorf("key field %s = %s is a key of partition %d, but token %d of the row's subject put the row in partition %d: the key field and the subject token disagree",
			r.spec.Key.Field, key, p, r.spec.Key.SubjectToken, r.part)
	}
	return nil
}

// engineLogger is the logger given to the engine, which adds the deployment's name itself.
func (r *Runner) engineLogger() *slog.Logger {
	if r.parts > 1 {
		return r.env.Logger.With("partition", r.part)
	}
	return r.env.Logger
}

// reconcile compares the deployment's committed input position with the input stream and
// the consumer src, before an engine reads the position, and repairs what it can:
//   - the stream is not the one the position counts in (it was deleted and re-created, and its
//     sequences started again at 1: its creation time differs from the one recorded with the
//     position, or it ends before the position): the position goes back to just before the stream's first message,
//     so the new rows are not skipped as already processed;
//   - the consumer's ack floor is ahead of the position (the state was restored from a
//     backup, or rows were acknowledged without being committed): the consumer is rewound to
//     the row after the position, so those rows come again, and the deployment starts a new
//     generation, so the batch ids it repeats get new output message ids;
//   - rows after the position are no longer in the stream (removed by its retention): they
//     are lost; the deployment goes on from the stream's first message.
//
// A change of position or generation is committed to the store. Each finding is logged at
// Warn; reconcile returns them joined, for the status's LastError (empty: nothing found).
func reconcile(ctx context.Context, js jetstream.JetStream, ks *state.Deployment, stream string, src *input.Source, logger *slog.Logger) (string, error) {
	p, err := ks.Progress()
	if err != nil {
		return "", err
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return "", fmt.Errorf("input stream: %w", err)
	}
	info := st.CachedInfo().State
	created := st.CachedInfo().Created.UnixNano()
	pos, gen := p.Position, p.Generation
	var notes []string
	if (p.InputCreated != 0 && p.InputCreated != created && pos > 0) || info.LastSeq < pos {
		pos = max(info.FirstSeq, 1) - 1
		notes = append(notes, fmt.Sprintf("input stream %s was re-created (it is not the stream the committed position %d counts in): starting again from its first message, sequence %d", stream, p.Position, pos+1))
		logger.Warn("input stream re-created; starting from its first message",
			"stream", stream, "last_seq", info.LastSeq, "position", p.Position, "from", pos+1)
	}
	floor, err := src.AckFloor(ctx)
	if err != nil {
		return "", err
	}
	if floor < pos && floor < info.LastSeq {
		// Committed but not acknowledged (a crash between the two, or a consumer created
		// afresh): start the consumer after the position rather than skip those rows.
		if err := src.Rewind(ctx, pos+1); err != nil {
			return "", err
		}
	}
	if floor > pos && p.BatchID > 0 {
		// A filtered consumer's floor passes the stream's other subjects (a partition of
		// GS_<NAME>_KG, whose floor moves over the other partitions' rows): it is ahead only
		// when one of its own messages lies between the position and the floor.
		next, found, err := src.NextMatch(ctx, pos+1)
		if err != nil {
			return "", err
		}
		if !found || next > floor {
			floor = pos
		}
	}
	if floor > pos && p.BatchID == 0 {
		// State made afresh (a new data directory taking over, or deploy --reset-state): it
		// starts where the consumer is, like any new deployment of an existing stream, rather
		// than replaying the stream's history. Its store ID is new, so its message ids are too.
		pos = floor
	}
	if floor > pos {
		if err := src.Rewind(ctx, pos+1); err != nil {
			return "", err
		}
		gen++
		notes = append(notes, fmt.Sprintf("the input consumer had acknowledged up to sequence %d, beyond the committed position %d (state restored from a backup?): rewound it to sequence %d; outputs continue as generation %d", floor, pos, pos+1, gen))
		logger.Warn("input consumer ahead of the committed position (state restored from a backup?); rewound it, new output generation",
			"ack_floor", floor, "position", pos, "generation", gen)
	}
	if info.Msgs > 0 && info.FirstSeq > pos+1 {
		lost := info.FirstSeq - 1 - pos
		notes = append(notes, fmt.Sprintf("%d rows of input stream %s (sequences %d to %d) were removed by the stream's retention before they were processed", lost, stream, pos+1, info.FirstSeq-1))
		logger.Warn("input rows removed by retention before they were processed", "stream", stream, "rows", lost, "from", pos+1, "to", info.FirstSeq-1)
	}
	if pos != p.Position || gen != p.Generation || created != p.InputCreated {
		b := ks.NewBatch(p.BatchID + 1)
		b.SetInputCreated(created)
		b.SetProgress(p.WatermarkMs, pos)
		if p.Open.Active {
			b.SetOpen(p.Open)
		}
		if gen != p.Generation {
			b.SetGeneration(gen)
		}
		if _, err := b.Commit(); err != nil {
			return "", err
		}
	}
	return strings.Join(notes, "; "), nil
}

// resetState empties the deployment's state (deploy --reset-state): every key, timeout and
// output not yet delivered goes, and the deployment goes on at src's ack floor (the rows after
// the last one acknowledged), with the watermark at its start. The batch id and the output
// generation go on from where they were, so new outputs never reuse old message ids. Done
// again before anything ran (a crash before the reset was recorded as done), it does the same.
// It returns what of the outbox, committed but not yet delivered, it dropped.
func resetState(ctx context.Context, ks *state.Deployment, src *input.Source) (droppedOutbox, error) {
	var dropped droppedOutbox
	p, err := ks.Progress()
	if err != nil {
		return dropped, err
	}
	floor, err := src.AckFloor(ctx)
	if err != nil {
		return dropped, err
	}
	if err := ks.Outbox(func(e state.OutboxEntry) error {
		dropped.count(e.Kind)
		return nil
	}); err != nil {
		return dropped, err
	}
	if err := ks.Drop(); err != nil {
		return dropped, err
	}
	b := ks.NewBatch(p.BatchID + 1)
	b.SetProgress(0, floor)
	b.SetInputCreated(p.InputCreated)
	b.SetProcessingTime(p.ProcessingTimeMs) // processing time does not go back with the state
	if p.Generation != 0 {
		b.SetGeneration(p.Generation)
	}
	_, err = b.Commit()
	return dropped, err
}

// droppedOutbox counts the outbox entries a reset of the state dropped, by kind.
type droppedOutbox struct{ outputs, deadLetters, other int }

func (d *droppedOutbox) count(k state.OutboxKind) {
	switch k {
	case state.OutboxOutput:
		d.outputs++
	case state.OutboxDeadLetter:
		d.deadLetters++
	default:
		d.other++ // late rows, manifests
	}
}

func (d droppedOutbox) total() int { return d.outputs + d.deadLetters + d.other }

// String says what the reset dropped, for the log and the status's last error.
func (d droppedOutbox) String() string {
	return fmt.Sprintf("the state reset dropped %d outputs and %d dead letters committed but not yet delivered (and %d late rows or manifests); they are not published",
		d.outputs, d.deadLetters, d.other)
}

// Start runs the loop until ctx ends or the runner is stopped. The loop ends with ctx (a
// shutdown drains: the batch in flight finishes and commits); a batch is cancelled only by
// stop (an undeploy or a redeploy, which must not wait for a handler that loops).
func (r *Runner) Start(ctx context.Context) {
	r.env.Metrics.Started(r.spec.Name, r.lease.Epoch != 0)
	batchCtx, cancelBatch := context.WithCancel(context.WithoutCancel(ctx))
	loopCtx, cancelLoop := context.WithCancel(ctx)
	r.cancel = func() { cancelBatch(); cancelLoop() }
	r.drain = cancelLoop
	go r.loop(loopCtx, batchCtx)
	if r.router != nil {
		r.routerDone = make(chan struct{})
		go r.route(loopCtx)
	}
}

// route runs the router until ctx ends, starting it again after an error (logged, and in
// the status of partition 0) with a backoff from 1 s to 10 s.
func (r *Runner) route(ctx context.Context) {
	defer close(r.routerDone)
	backoff := time.Second
	for ctx.Err() == nil {
		err := r.router.Run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		r.logger.Error("routing the input to the partitions failed; retrying", "err", err, "in", backoff)
		r.SetError(fmt.Errorf("routing the input: %w", err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// Stop ends the loop, cancelling the batch in flight (nothing of it commits), and closes
// the engine.
func (r *Runner) Stop() { r.end(r.cancel) }

// finish ends the loop after the batch in flight committed (SIGTERM drains), and closes the
// engine.
func (r *Runner) finish() { r.end(r.drain) }

// end ends the loop by how (nil: it never started), waits for it and the router, then for
// the snapshot in progress, and closes the engine.
func (r *Runner) end(how context.CancelFunc) {
	r.env.Metrics.Stopped(r.spec.Name)
	if how != nil {
		how()
		<-r.done
		r.cancel()
		if r.routerDone != nil {
			<-r.routerDone
		}
	}
	r.snaps.wait()
	r.eng.Close(context.Background())
}

// StopAndReport ends the runner (drain: after the batch in flight, else cancelling it) and
// publishes its status as stopped; with keepFailed, a failed runner keeps its failed state (a
// shutdown does not hide why it stopped).
func (r *Runner) StopAndReport(keepFailed, drain bool) {
	if drain {
		r.finish()
	} else {
		r.Stop()
	}
	r.report.stopped(keepFailed)
	r.publishStatus(context.Background(), true)
	r.Detach()
}

// Detach, for a stopped runner of a replicated deployment, stops the state's writes going to
// the changelog and releases the lease, free at once for the runtime that takes over (a
// lease taken since is left alone).
func (r *Runner) Detach() {
	if r.lease.Epoch == 0 {
		return
	}
	r.ks.SetReplicator(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.env.Leases.Release(ctx, r.lease); err != nil && !errors.Is(err, cluster.ErrLeaseLost) {
		r.logger.Warn("releasing the deployment's lease failed; another runtime takes it when this one's membership expires", "err", err)
	}
}

// leaseLost tells whether r runs a replicated deployment whose lease another runtime has
// taken since (false when not, or when the lease cannot be read): r is then a zombie, whose
// status must not replace the new owner's.
func (r *Runner) leaseLost() bool {
	if r.lease.Epoch == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Is(r.env.Leases.Check(ctx, r.lease), cluster.ErrLeaseLost)
}

// Failed tells whether the deployment stopped by an error (on_error: fail, a failed store).
func (r *Runner) Failed() bool { return r.report.failed() }

// SetError notes err as the status's error and publishes the status.
func (r *Runner) SetError(err error) {
	r.report.setError(err)
	r.publishStatus(context.Background(), true)
}

// loop is the deployment's micro-batch loop: it runs the batches its source returns (see
// batchSource; fetching runs ahead of it, so the next batch's rows arrive while the current
// batch runs) and, once one committed, has the source acknowledge its input.
func (r *Runner) loop(ctx, batchCtx context.Context) {
	defer close(r.done)
	defer r.publishStatus(context.Background(), true) // not a zombie's: see publishStatus
	// A stop or redeploy cancels the batch in flight (batchCtx): the engine then commits
	// nothing of it, and its input, never acknowledged, is redelivered to the next runner. A
	// shutdown ends ctx only, so the batch in flight finishes. What follows a committed
	// batch (acknowledging its input, publishing the status) runs on after (a context that is
	// not cancelled).
	after := context.WithoutCancel(ctx)
	r.publishStatus(ctx, true) // running, before a first batch that may take long
	// The source's prefetch ends before the runner counts as stopped, so a redeploy's new
	// runner never shares the consumer with it.
	defer r.in.close()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		b, out := r.in.next(ctx, batchCtx, &backoff)
		switch out {
		case stopLoop:
			return
		case promoted:
			<-ctx.Done() // the service runs it again as a primary
			return
		case drainAsked:
			if r.runDrain(batchCtx, b.drain) {
				<-ctx.Done() // drained: nothing runs until the deployment goes
				return
			}
			continue
		}
		rep, err := r.run(batchCtx, b)
		if err != nil {
			if r.failedBatch(ctx, batchCtx, err, &backoff) {
				return
			}
			continue // the same rows again
		}
		r.in.committed(after, rep)
		backoff = 100 * time.Millisecond
		r.committed(after, rep)
	}
}

// run runs batch b (see batchSource.next).
func (r *Runner) run(ctx context.Context, b batch) (*engine.BatchReport, error) {
	if b.err != nil {
		return nil, b.err
	}
	return r.eng.RunBatch(ctx, b.in)
}

// failedBatch handles the failure err of a batch, telling whether the loop ends: after a stop
// cancelled it (batchCtx), a write of the state failed for good (see stopOnStateError), or a
// key failed under on_error: fail. Else the error goes to the status, with backoff (see
// fault), and the loop runs the batch again.
func (r *Runner) failedBatch(ctx, batchCtx context.Context, err error, backoff *time.Duration) bool {
	if batchCtx.Err() != nil && !errors.Is(err, state.ErrFailed) {
		r.logger.Info("batch in flight cancelled by a stop; its input will be redelivered", "err", err)
		return true
	}
	if r.stopOnStateError(err) {
		return true
	}
	if errors.Is(err, engine.ErrKeyFailed) {
		r.fail(err) // on_error: fail stops the deployment; nothing of the batch committed
		return true
	}
	if errors.Is(err, engine.ErrDeliveryPending) {
		r.report.block() // committed outputs wait in the outbox: status blocked (fault publishes it)
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		// No stream captures an output subject (an output stream was deleted): the
		// engine keeps the outbox; re-create the streams so that delivery can work.
		if _, serr := r.deps.EnsureStreams(ctx, r.spec, r.inputStreams()); serr != nil {
			r.logger.Warn("re-creating the output streams failed", "err", serr)
		}
	}
	r.fault(ctx, err, backoff)
	return false
}

// committed records a committed batch, after its source acknowledged its input: in the
// status's counters, the shared watermark and the metrics, then publishes the status
// (throttled) and takes a snapshot when one is due.
func (r *Runner) committed(ctx context.Context, rep *engine.BatchReport) {
	r.report.record(rep, r.eng.Progress().Counters)
	r.publishWatermark(rep)
	r.env.Metrics.Batch(r.spec.Name, rep)
	if !r.takeoverAt.IsZero() && !rep.Skipped {
		took := time.Since(r.takeoverAt)
		r.env.Metrics.Takeover(r.spec.Name, took)
		r.logger.Info("first batch committed after taking the partition over", "since_lease_acquired", took.Round(time.Millisecond), "rows", rep.RowsIn)
		r.takeoverAt = time.Time{}
	}
	r.publishStatus(ctx, false)
	r.snaps.maybe(ctx, r.spec.Name, r.ks, r.logger)
}

// idle is what the loop does when a fetch waited idlePoll and found nothing, and no batch
// runs: it takes a snapshot when one is due. It writes no status: the service's heartbeat
// (Heartbeat, every client.StatusHeartbeat) is what keeps an idle runner's status fresh, the
// one mechanism for that, as a batch's status is for a busy one.
func (r *Runner) idle(ctx context.Context) {
	r.snaps.maybe(ctx, r.spec.Name, r.ks, r.logger)
}

// stopOnStateError stops the runner (and tells so) on an error of a write of its state that
// no retry here can mend: a changelog append refused or lost (the deployment is restored from
// the changelog wherever the plan says) or a failed store (the service reopens it).
func (r *Runner) stopOnStateError(err error) bool {
	switch {
	case errors.Is(err, state.ErrReplication):
		// Fenced, or the changelog append failed: nothing of the write committed.
		r.report.setSilent(errors.Is(err, changelog.ErrFenced)) // else publishStatus checks the lease
		r.logLost.Store(true)
		r.fail(err)
		r.deps.LostReplication(r.rec, err)
		return true
	case errors.Is(err, state.ErrFailed):
		r.fail(err)
		r.deps.StoreFailed()
		return true
	}
	return false
}

// cutBatch splits msgs (in fetch order) into the first batch, at most maxBytes of data but at
// least one message, and the rest.
func cutBatch(msgs []input.Msg, maxBytes int) (batch, rest []input.Msg) {
	if maxBytes <= 0 {
		return msgs, nil
	}
	n := 0
	for i := range msgs {
		n += len(msgs[i].Data)
		if n > maxBytes && i > 0 {
			return msgs[:i], msgs[i:]
		}
	}
	return msgs, nil
}

// ackTimeout bounds the acknowledgement of one batch's input.
const ackTimeout = 5 * time.Second

// ack acknowledges m and every message before it (the consumer acknowledges all). A failure
// costs only redelivery: rows at or before the committed position are skipped.
func (r *Runner) ack(ctx context.Context, m input.Msg) {
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	if err := r.src.Ack(ctx, m); err != nil {
		r.logger.Warn("acknowledging input failed; it will be redelivered and skipped", "err", err)
	}
}

// fetcher is a running prefetch: its results, how the loop asks for one (see ready), and
// how to stop it.
type fetcher struct {
	out    <-chan fetchResult
	ask    chan struct{} // capacity 1: the loop waits for a result
	done   <-chan struct{}
	cancel context.CancelFunc
	// holding tells that a result waits for the loop to ask for it (for tests).
	holding atomic.Bool
}

// startFetcher starts prefetching from r.src until ctx ends or stop is called, each fetch
// waiting up to poll for its first row; with topUp, a result held while the loop ran a batch
// is topped up when the loop asks for it (see prefetch).
func (r *Runner) startFetcher(ctx context.Context, poll time.Duration, topUp bool) *fetcher {
	fctx, cancel := context.WithCancel(ctx)
	f := &fetcher{ask: make(chan struct{}, 1), cancel: cancel}
	f.out, f.done = r.prefetch(fctx, poll, topUp, f)
	return f
}

// stop ends the fetcher and waits for it: afterwards nothing uses r.src.
func (f *fetcher) stop() {
	f.cancel()
	<-f.done
}

// ready tells the fetcher that the loop waits for its next result now; the loop then
// receives from out. A ready not answered stays until unready withdraws it.
func (f *fetcher) ready() {
	select {
	case f.ask <- struct{}{}:
	default: // asked already
	}
}

// unready withdraws a ready that the fetcher has not taken, when the loop stopped waiting
// for something else (a drain, a wake-up): a result the fetcher holds then waits for the
// next ready, and is topped up then.
func (f *fetcher) unready() { drainAsk(f.ask) }

// drainAsk empties ask.
func drainAsk(ask chan struct{}) {
	select {
	case <-ask:
	default:
	}
}

// fetchResult is one fetch of the input: up to Trigger.MaxRows messages, or an error.
type fetchResult struct {
	msgs []input.Msg
	err  error
}

// prefetch fetches input ahead of the batch loop, one fetch at a time, until ctx ends: while
// a batch runs, the next fetch is in flight or its result is held for the loop (at most two
// batches of rows are held, the running one and the next). A result is handed over at once
// when the loop waits for it (it asked: ready); one fetched while the loop ran a batch is
// held until the loop asks, and then, with topUp, a fetch that does not wait adds what
// arrived meanwhile (up to trigger.max_rows and max_bytes), so that a batch takes the rows
// available when it starts (spec.TriggerSpec), not only those there when the batch before
// it started: under a steady flow of rows the fetch ends with the first rows that arrive
// during a batch, and without the top-up the rest waited a whole batch more. Order is kept
// (one goroutine fetches, a top-up continues the fetch it tops up, the channel is FIFO), and
// nothing is acknowledged here: rows fetched but never run are redelivered after a restart,
// and rows at or before the committed position are skipped. After a fetch error it fetches
// again once the loop has taken the error, so it retries at most once ahead of the loop's
// backoff; an error of a top-up is left to the next fetch, which meets it again.
func (r *Runner) prefetch(ctx context.Context, poll time.Duration, topUp bool, f *fetcher) (<-chan fetchResult, <-chan struct{}) {
	ask := f.ask
	out := make(chan fetchResult)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			msgs, err := r.src.Fetch(ctx, r.spec.Trigger.MaxRows, int(r.spec.Trigger.MaxBytes), poll)
			res := fetchResult{msgs: msgs, err: err}
			select {
			case out <- res: // the loop was waiting: nothing arrived since the fetch ended
				drainAsk(ask) // its ready, answered
				continue
			default:
			}
			f.holding.Store(true)
			select {
			case <-ask:
			case <-ctx.Done():
				return
			}
			f.holding.Store(false)
			if topUp {
				res = r.topUp(ctx, res)
			}
			select {
			case out <- res:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, done
}

// topUp adds to res, a fetch result held while the loop ran a batch, the rows available now,
// up to trigger.max_rows and max_bytes in all, without waiting for more (one request:
// input.Source.FetchAvailable). res is returned as it was when it failed, is full, or the
// fetch that does not wait fails (the next fetch meets its error again).
func (r *Runner) topUp(ctx context.Context, res fetchResult) fetchResult {
	maxRows, maxBytes := r.spec.Trigger.MaxRows, int(r.spec.Trigger.MaxBytes)
	if res.err != nil || len(res.msgs) >= maxRows {
		return res
	}
	room := 0 // no byte bound
	if maxBytes > 0 {
		used := 0
		for i := range res.msgs {
			used += len(res.msgs[i].Data)
		}
		if used >= maxBytes {
			return res
		}
		room = maxBytes - used
	}
	more, err := r.src.FetchAvailable(ctx, maxRows-len(res.msgs), room)
	if err != nil || len(more) == 0 {
		return res
	}
	res.msgs = append(res.msgs, more...)
	return res
}

// heal re-creates what a deleted consumer or stream took (see open), with backoff, until it
// succeeds or ctx ends. The fault stays in the status (Error) until a batch succeeds. The
// fetcher must have stopped: heal replaces r.src and r.eng.
func (r *Runner) heal(ctx context.Context, cause error, backoff *time.Duration) {
	r.logger.Warn("input consumer or stream gone; re-creating them", "err", cause)
	r.SetError(cause)
	for ctx.Err() == nil {
		notes, err := r.open(context.WithoutCancel(ctx), false)
		if err == nil {
			if notes != "" {
				r.SetError(fmt.Errorf("%v; %s", cause, notes))
			}
			r.logger.Info("input consumer re-created")
			return
		}
		r.fault(ctx, fmt.Errorf("re-creating the input after %v: %w", cause, err), backoff)
	}
}

// fault reports err, a failure the loop retries (a batch or a fetch), in the log and the
// status, and waits backoff (or until ctx ends), which it then doubles up to 10 s.
func (r *Runner) fault(ctx context.Context, err error, backoff *time.Duration) {
	r.logger.Error("batch failed; retrying", "err", err, "in", *backoff)
	r.SetError(err)
	select {
	case <-ctx.Done():
	case <-time.After(*backoff):
	}
	*backoff = min(2**backoff, 10*time.Second)
}

// fail reports err, which stopped the deployment, in the log and the status (failed).
func (r *Runner) fail(err error) {
	r.logger.Error("deployment stopped by an error", "err", err)
	r.report.fail(err)
}

// deployRevision names the deploy of rec for the engine's quarantine (engine.Config.Revision):
// a new deploy, even of the same module, releases the keys quarantined before it.
func deployRevision(rec registry.Record) string {
	return rec.ModuleDigest + "@" + rec.DeployedAt.UTC().Format(time.RFC3339Nano)
}

// publishStatus writes the status document, at most once a second unless forced; a
// replicated runner whose lease moved writes nothing, then or ever after.
func (r *Runner) publishStatus(ctx context.Context, force bool) {
	if r.report.silent() {
		return
	}
	st, ok := r.report.take(force)
	if !ok {
		return
	}
	if r.leaseLost() {
		// A zombie (its lease moved while it ran or idled): the status is the new owner's.
		r.report.silence()
		return
	}
	p := r.eng.Progress()
	st.StateKeys, st.TimerKeys, st.Position = p.Keys, p.TimerKeys, p.Position
	if r.spec.HasEventTime() {
		st.WatermarkMs = p.WatermarkMs
	}
	if n, err := r.in.pending(ctx); err == nil {
		st.InputLag = int64(n)
	}
	r.inputsLag(ctx, &st, p.Position)
	if n, err := r.ks.DiskUsage(); err == nil {
		st.StateBytes = int64(n)
	}
	st.UpdatedAt = time.Now()
	st.Isolating = r.eng.Isolating()
	st.QuarantinedKeys, st.Quarantined = 0, nil
	if q := r.eng.Quarantined(); len(q) > 0 {
		st.QuarantinedKeys = len(q)
		for _, k := range q[:min(len(q), client.MaxQuarantinedListed)] {
			st.Quarantined = append(st.Quarantined, client.QuarantinedKey{Key: k.Key, Reason: k.Reason, SinceMs: k.SinceMs, Partition: r.part})
		}
	}
	st.Partitions = []client.PartitionStatus{{Partition: r.part, Owner: st.Owner, Standbys: []string{}, MissingStandbys: r.spec.Standbys,
		Position: st.Position, Lag: st.InputLag, WatermarkMs: st.WatermarkMs}}
	r.env.Metrics.Status(r.spec.Name, r.part, &st, r.spec.HasEventTime())
	if r.lease.Epoch != 0 {
		if n, err := r.deps.ChangelogBytes(ctx, r.spec.Name); err == nil {
			r.env.Metrics.Changelog(r.spec.Name, n)
		}
	}
	r.deps.PutStatus(ctx, &st)
}

// inputsLagEvery is how often publishStatus counts the lag of each of several inputs (one
// short-lived consumer per input: see input.InputsPending); in between a status repeats the
// last count.
const inputsLagEvery = 5 * time.Second

// inputsLag sets the lag of each of the deployment's several inputs in st and the status
// (nothing for one input): the rows of the input in the inputs stream after position. With
// st.InputLag 0 every input's is 0; else they are counted at most every inputsLagEvery (the
// last count stays in between).
func (r *Runner) inputsLag(ctx context.Context, st *client.Status, position uint64) {
	if !r.spec.HasInputs() || r.shadowing() { // a shadow's position counts its primary's manifests
		return
	}
	var pending map[string]uint64
	if st.InputLag > 0 {
		if !r.report.inputsLagDue(inputsLagEvery) {
			return
		}
		names := make([]string, len(st.Inputs))
		for i := range st.Inputs {
			names[i] = st.Inputs[i].Name
		}
		var err error
		if pending, err = input.InputsPending(ctx, r.env.JS, r.inputOf, names, position); err != nil {
			r.logger.Debug("counting the inputs' lag", "err", err)
			return
		}
	}
	r.report.setInputsLag(st, pending)
}

// initialState loads the deployment's initial state (registry.Record.InitialState) and returns
// the keys of the runner's partition, for an engine whose keyspace committed no batch yet.
//
// The file is read and parsed once per revision on this runtime, for all its partitions here
// (a failed load is tried again by the next open).
func (r *Runner) initialState(ctx context.Context) (*engine.InitialState, error) {
	is, err := r.initial.get(func() (*engine.InitialState, error) {
		data, err := r.env.Registry.GetInitialState(ctx, r.rec.InitialState) // verifies the bytes' SHA-256
		if err != nil {
			return nil, fmt.Errorf("loading the initial state: %w", err)
		}
		is, err := engine.ParseInitialState(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("the initial state %s: %w", r.rec.InitialState, err)
		}
		return is, nil
	})
	if err != nil {
		return nil, err
	}
	if r.parts > 1 {
		is = is.Partition(r.part, r.parts)
	}
	r.logger.Info("applying the initial state in the first batch", "keys", is.Len())
	return is, nil
}

// drainResult is the outcome of a drain request: the drain batch's report, or why it failed.
type drainResult struct {
	rep *engine.BatchReport
	err error
}

// RequestDrain asks the loop to drain the deployment (see runDrain) and waits for it, or for
// ctx. A runner that drained already answers with its report at once. Safe for concurrent
// use (the API asks it while the loop runs).
func (r *Runner) RequestDrain(ctx context.Context) (*engine.BatchReport, error) {
	if rep := r.drained.Load(); rep != nil {
		return rep, nil
	}
	reply := make(chan drainResult, 1)
	select {
	case r.drainReq <- reply:
	case <-r.done:
		return nil, errors.New("the deployment stopped before it drained")
	case <-ctx.Done():
		return nil, fmt.Errorf("the deployment's loop did not take the drain: %w", ctx.Err())
	}
	select {
	case res := <-reply:
		return res.rep, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the drain batch: %w", ctx.Err())
	}
}

// runDrain runs the drain batch (engine.BatchInput.Drain: every timeout fires) at the
// clock's time, publishes its outputs and acknowledges nothing (it reads no input), and
// answers reply. It reports whether the deployment drained: then the loop runs nothing more
// and the status reads drained; else it goes on as before and the error is in the status.
func (r *Runner) runDrain(ctx context.Context, reply chan<- drainResult) bool {
	now := r.env.Clock.Now()
	rep, err := r.eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: timeouts.UnixMs(now), Drain: true})
	if err != nil {
		err = fmt.Errorf("drain batch: %w", err)
		r.SetError(err)
		reply <- drainResult{err: err}
		return false
	}
	r.report.record(rep, r.eng.Progress().Counters)
	r.env.Metrics.Batch(r.spec.Name, rep)
	r.drained.Store(rep)
	r.report.setState(client.StatusDrained)
	r.publishStatus(context.WithoutCancel(ctx), true)
	r.logger.Info("drained: every timeout fired; the deployment runs nothing more until it is undeployed",
		"batch", rep.BatchID, "timeout_calls", rep.TimeoutCalls, "emitted", rep.Emitted)
	reply <- drainResult{rep: rep}
	return true
}
