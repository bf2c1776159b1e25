package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/host"
	"github.com/groupstate/groupstate/runtime/internal/nativehook"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// Errors of the engine.
var (
	// ErrInvalidModule: the module is not a usable ABI v1 module (wrapped with what is wrong).
	ErrInvalidModule = host.ErrInvalidModule
	// ErrLoadLimit: the module declares more than a loading limit allows (wrapped with the
	// limit and its value; docs/guarantees.md, "The sandbox").
	ErrLoadLimit = host.ErrLoadLimit
	// ErrABIVersion: the module was built for an ABI version this runtime does not support.
	ErrABIVersion = host.ErrABIVersion
	// ErrModuleInit: the module's initialization failed (its message is wrapped).
	ErrModuleInit = host.ErrInit
	// ErrKeyFailed: under on_error: fail, a call for one key failed; the batch did not commit.
	// The error wraps a [*KeyError] naming the key.
	ErrKeyFailed = errors.New("engine: handler failed for a key")
	// ErrDeliveryPending: outputs of an earlier batch could not be delivered yet, so no new
	// batch ran (the sink's error is wrapped). Retry later; nothing is lost (the outputs are
	// committed in the outbox).
	ErrDeliveryPending = errors.New("engine: earlier outputs are not delivered yet")
	// ErrIncompleteConfig: a Config misses its Spec, Wasm, Store or Sink.
	ErrIncompleteConfig = errors.New("engine: Config needs Spec, Wasm, Store and Sink")
	// ErrEngineClosed: RunBatch was called after Close.
	ErrEngineClosed = errors.New("engine: closed")
	// ErrTimeModeChanged: a transformWithState (ABI v2) module started on a keyspace that ran
	// under another timeout mode (Spark's STATE_STORE_INVALID_CONFIG_AFTER_RESTART): its timers
	// mean processing time or event time, not both.
	ErrTimeModeChanged = errors.New("runtime: the deployment's timeout mode cannot change")
	// ErrABISwitch: a module started on a keyspace that holds the state of a module of the
	// other ABI version (flatMapGroupsWithState and transformWithState state differ).
	ErrABISwitch = errors.New("runtime: the deployment's state is another kind of handler's")
	// ErrDrainRows: a BatchInput with Drain set had rows; a drain takes none.
	ErrDrainRows = errors.New("engine: a drain batch takes no rows")
	// ErrInputTooLarge: a BatchInput had more rows than trigger.max_rows, or more bytes of
	// row data than trigger.max_bytes (and more than one row); RunBatch ran nothing of it.
	ErrInputTooLarge = errors.New("engine: batch input over the spec's trigger bounds")
	// ErrUnknownInput: a BatchInput had a row whose Input is not the index of one of the
	// spec's inputs; RunBatch ran nothing of it.
	ErrUnknownInput = errors.New("engine: row of an unknown input")
)

func init() {
	nativehook.Use = func(cfg any, mods ...handler.BufferModule) { cfg.(*Config).native = mods }
}

// Config configures an [Engine]. Spec, Wasm, Store and Sink are required.
type Config struct {
	// Spec is the deployment spec, validated by NewEngine. The engine keeps it and does not
	// modify it; do not modify it while the engine runs.
	Spec *spec.Spec
	// Wasm is the handler module. The engine does not keep it: it may be reused once
	// NewEngine returned.
	Wasm []byte
	// Store holds the state: the engine reads and writes the keyspace Keyspace, and does
	// not close the store. A store has one writer per keyspace: run at most one engine per
	// keyspace on a store at a time.
	Store *state.Store
	// Sink receives outputs, dead letters and late rows after each commit (see [Sink] and
	// [PipelinedSink]). The engine calls it on the goroutine that calls RunBatch and Close,
	// never concurrently.
	Sink Sink
	// Keyspace is the store keyspace the engine reads and writes (see [state.Store.Deployment]).
	// Default: Spec.Name. A deployment split into partitions runs one engine per partition,
	// each on the keyspace [state.PartitionName] names.
	Keyspace string
	// Logger receives the engine's and the module's logs, with the deployment name attached.
	// Default: the Runtime's logger.
	Logger *slog.Logger
	// WrongPartition, when set, is asked about every row's canonical key (as
	// [rowjson.AppendCanonicalKey] writes it) before the row is grouped; a non-nil error says
	// the key belongs to another partition than the one whose input the row came from (a
	// deployment that the NATS server partitions by key.subject_token, whose row's key field
	// disagrees with its subject), and the row is dead-lettered with [ReasonWrongPartition]
	// and that error, never processed here. It must not keep key. Default: nil, no check.
	//
	// [rowjson.AppendCanonicalKey]: github.com/groupstate/groupstate/runtime/internal/rowjson.AppendCanonicalKey
	WrongPartition func(key []byte) error
	// SharedWatermark, for a partition of a deployment split into partitions under
	// event_time, bounds the watermark by the other partitions' event times (see
	// [WatermarkBound]): the engine then records the partition's max event time with its
	// progress, and a no-data batch whose watermark the bound moves commits. Nil (the
	// default, and every deployment of one partition): the watermark follows the
	// deployment's own rows only, W_next = max(W, batch max - watermark_delay), and nothing
	// more is stored.
	SharedWatermark WatermarkBound
	// ShareModule, when not empty, lets the engines of one Runtime with the same ShareModule
	// share one running module: its compiled code and its pool of limits.instances instances
	// (see [Runtime.NewEngine]). The caller promises that they have the same Wasm and Spec: a
	// deployment's partitions, named by the deployment and its revision. The module's logs
	// then carry the deployment's name but not the engine's Logger attributes. Default: ""
	// (every engine starts its own).
	ShareModule string
	// Manifests makes every commit record the batch's [Manifest] in its outbox, as its last
	// entry, of kind state.OutboxManifest: committed with the batch and delivered with its
	// outputs, so a deployment's history can be run again (replayed) exactly. Default false.
	Manifests bool

	// Revision names the deployment's revision (the service: its registry record's): keys
	// quarantined under another revision are released (see [Engine.Quarantined]). Default ""
	// (one revision throughout, as in groupstate test).
	Revision string

	// InitialState, when set, is applied in the engine's first batch, once per keyspace: if
	// the keyspace never applied one and holds no state (see [InitialState]). A partition's
	// engine gets only its keys ([InitialState.Partition]). Default: nil, none.
	InitialState *InitialState

	native []handler.BufferModule // in place of Wasm, for groupstate's own tests (nativehook)
	// chunkKeys and chunkBytes replace TimeoutChunkKeys and TimeoutChunkBytes (tests).
	chunkKeys, chunkBytes int
}

// The bounds of one commit's timeout calls: a batch in which more timeouts expire commits them
// in chunks (see [Engine.RunBatch]), so that its memory and its Pebble batch stay bounded
// however many keys time out at once (after an outage, say, or once a watermark passed many
// timeouts). A chunk holds at most TimeoutChunkKeys keys, and stops taking timeouts when its
// keys and state values reach TimeoutChunkBytes bytes; the first chunk also holds the batch's
// data calls, whose number the input bounds (trigger.max_rows), and its timeouts fill what
// they leave. 16384 keys are four guest calls of 4096 groups, enough for every instance of a
// small pool to work, and the timeouts that follow a batch of trigger.max_rows' default of
// 10000 rows fit in one commit.
const (
	TimeoutChunkKeys  = 16384
	TimeoutChunkBytes = 32 << 20
)

// Row is one input message.
type Row struct {
	// Data is the JSON message. The engine does not modify it. It keeps no reference to it
	// after RunBatch returns but one: a dead-lettered or late row reaches the sink with Data
	// itself as its Payload, so with a [PipelinedSink] Data must stay unchanged until that
	// batch's delivery was awaited (in the next RunBatch, or in Close).
	Data []byte
	// Subject is the subject it arrived on (for dead-letter headers; may be empty).
	Subject string
	// Sequence is its input stream sequence (for dead-letter headers; may be 0).
	Sequence uint64
	// Input is the index of the row's input among the spec's inputs (spec.Spec.InputList):
	// 0 for a deployment with one input.
	Input int
}

// BatchInput is one micro-batch.
type BatchInput struct {
	// ProcessingTimeMs is the caller's wall clock at batch start in epoch milliseconds. The
	// batch's processing time T, constant in the batch, is the larger of it and the last
	// committed batch's (state.Progress.ProcessingTimeMs), so T never decreases, even when
	// the clock steps back or a runtime whose clock is behind takes over (docs/semantics.md,
	// "A micro-batch"; BatchReport.ClockStepBack).
	ProcessingTimeMs int64
	// Rows in arrival order; none for a no-data batch. See [Row] for who owns their data.
	Rows []Row
	// Position is the input position after this batch (committed with it); 0 keeps the
	// previous position.
	Position uint64
	// Drain makes this the deployment's last batch (docs/semantics.md, "transformWithState
	// handlers", rule 9; Flink's stop --drain): it takes no rows and fires every timeout the
	// keys hold, as if processing time and the watermark had jumped past them, in timeout
	// order, so that the handler emits its final records. A timeout a drained call sets again
	// does not fire. The caller then stops the deployment. A drain whose timeouts commit in
	// chunks and is interrupted between them (a crash) is finished as an ordinary batch: drain
	// again.
	Drain bool
	// NextWatermarkMs, when not nil, is the watermark the batch commits, in place of the one
	// its rows (and Config.SharedWatermark) give: a batch run again as its [Manifest]
	// recorded it (a replay) moves the watermark as it did then. Default nil.
	NextWatermarkMs *int64
}

// BatchReport describes the batch a RunBatch ran: committed, or skipped (Skipped). Each
// RunBatch returns a new one, which belongs to the caller.
type BatchReport struct {
	// BatchID is the committed batch's id (1, 2, ...).
	BatchID uint64
	// RowsIn counts input rows, LateRows those dropped as late, DeadLetters the entries sent
	// to the dead-letter sink (bad rows, the rows of failed keys, one per failed timeout
	// call).
	RowsIn, LateRows, DeadLetters int
	// DataCalls and TimeoutCalls count handler calls; FailedKeys those that failed.
	// InitialCalls counts the calls of keys that had an initial state and no rows (the
	// first batch only; see [InitialState]). For an ABI v2 module, TimeoutCalls counts the
	// timers fired and InitialCalls the initial-state calls of every key of the file.
	DataCalls, TimeoutCalls, InitialCalls, FailedKeys int
	// TTLExpired counts the state variable entries (values, list elements, map entries) whose
	// TTL expired and that the batch removed (ABI v2 modules only).
	TTLExpired int
	// Emitted counts the rows emitted by calls that succeeded.
	Emitted int
	// WatermarkMs is the watermark the next batch runs at: what this batch committed (for a
	// skipped batch, what the last commit did). WatermarkAdvanced tells whether this batch
	// raised it. Without event_time it does not move.
	WatermarkMs       int64
	WatermarkAdvanced bool
	// MaxEventMs is the largest event time the partition has seen, as committed
	// (state.Progress.MaxEventMs), for the caller to publish to the other partitions;
	// timeouts.NoEventTime when none, and always without Config.SharedWatermark.
	MaxEventMs int64
	// NeedsNoDataBatch is set under event-time timeouts after a batch that advanced the
	// watermark, which docs/semantics.md ("A micro-batch": No-data batches) says "is followed
	// at once by a no-data batch, which fires the timeouts the new watermark passed": the
	// caller should call RunBatch again at once, without rows. (The no-data batches of
	// processing-time timeouts, one every trigger interval, are the caller's schedule and
	// not flagged here.)
	NeedsNoDataBatch bool
	// Inputs are the batch's counts and the inputs' watermarks, one per input in the spec's
	// order, for a deployment with several inputs (spec inputs); nil otherwise, and for the
	// rest of an open batch (Resumed). RowsIn and LateRows above are
	// their sums.
	Inputs []InputReport
	// Duration is how long RunBatch took, deliveries to the sink included.
	Duration time.Duration
	// Skipped is set for a no-data batch that had nothing to do (no timeout expired): nothing
	// was committed and BatchID is the previous batch's.
	Skipped bool
	// Commits counts the batch's commits: 1, or more for a batch that committed its timeout
	// calls in chunks (see [Engine.RunBatch]); BatchID is then the last one's id. 0 when
	// skipped.
	Commits int
	// Open is set when a batch committed in chunks stopped after one because its delivery
	// failed: its input is committed, and the next RunBatch delivers the outbox and then
	// finishes the batch before it runs its own input.
	Open bool
	// ClockBehindMs is how far BatchInput.ProcessingTimeMs was behind the last committed
	// batch's processing time, which the batch ran at instead; 0 when it was not behind.
	// ClockStepBack is set when the clock stepped back: it is earlier than the previous
	// RunBatch's, or, at the engine's first batch, than the last committed processing time
	// (a takeover by a runtime whose clock is behind). Each step is reported once, and
	// logged at Warn.
	ClockBehindMs int64
	ClockStepBack bool
	// Undelivered is set, to the error, when a delivery of committed outputs failed during this
	// RunBatch (this batch's, or the previous one's whose acknowledgements it awaited): they
	// wait in the outbox, and the next RunBatch delivers them before it runs anything, failing
	// with [ErrDeliveryPending] while it cannot.
	Undelivered string
	// Resumed reports the batch that this RunBatch finished first, when the last commit left
	// one open (a crash, an error or a failed delivery between its chunks): its remaining
	// timeout calls ran at its own processing time and watermark. Nil otherwise.
	Resumed *BatchReport
}

// KeyError is the error of a key whose call failed.
type KeyError struct {
	// Key is the canonical JSON scalar of the key.
	Key string
	// Err is the failure.
	Err error
}

// Error returns "key KEY: ERR".
func (e *KeyError) Error() string { return fmt.Sprintf("key %s: %v", e.Key, e.Err) }

// Unwrap returns Err.
func (e *KeyError) Unwrap() error { return e.Err }

// Engine runs one deployment's micro-batches over its keyspace of the state store, one batch
// at a time. It is not safe for concurrent use: one goroutine drives it (every method), and
// it calls its Sink on that goroutine.
type Engine struct {
	spec  *spec.Spec
	rules timeouts.Rules
	// inputs are the rules of the deployment's inputs (one for a spec without inputs), by
	// Row.Input; multi is the state of a deployment with several (nil with one).
	inputs    []inputRule
	multi     *multiInput
	hasTime   bool           // the deployment has event time
	manifests bool           // Config.Manifests
	bound     WatermarkBound // Config.SharedWatermark; nil: none
	quar      *quarantine    // the quarantined keys
	att       *attempts      // the attempts of the next batch
	h         handler.Handler
	ks        *state.Deployment
	sink      Sink
	logger    *slog.Logger
	progress  state.Progress // the last commit's: the batch id, watermark and position to go on from
	// lastClockMs is the previous RunBatch's BatchInput.ProcessingTimeMs (0: none yet), to
	// tell a clock step back (checkClock).
	lastClockMs int64
	pending     bool // the outbox may hold undelivered entries
	// acksUnsynced: an acknowledgement was written since the last synced write. A batch's
	// commit syncs it (the log is sequential); when none follows, syncAcks must.
	acksUnsynced bool
	inflight     *inflight
	closed       bool
	batch        batch // the batch being run, and the working memory every batch reuses
	// chunkKeys and chunkBytes bound a commit's timeout calls (TimeoutChunkKeys and
	// TimeoutChunkBytes).
	chunkKeys, chunkBytes int
	// wrongPartition is Config.WrongPartition (nil: none).
	wrongPartition func(key []byte) error
	// initial is Config.InitialState while it is to be applied (see initialPending): by the
	// next batch, which marks it applied; nil once it was, or when there is none.
	initial *InitialState
	// v2 is set when the module implements ABI v2 (transformWithState): its batches run in
	// phases (runV2).
	v2 *v2engine
}

// NewEngine starts a deployment's engine: it validates the spec and the module, starts the
// module's instances (limits.instances; ctx bounds their compilation and initialization) and
// reads the deployment's progress, so the engine goes on from the last committed batch. It
// writes nothing and sends nothing: outbox entries left by an earlier run go out at the
// start of the first RunBatch, which also finishes a batch left open between its chunks. Errors: [ErrIncompleteConfig], the spec's validation error,
// [ErrInvalidModule], [ErrABIVersion], [ErrModuleInit], or the store's. NewEngine is safe for
// concurrent use; close the engine with [Engine.Close].
func (r *Runtime) NewEngine(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Spec == nil || cfg.Store == nil || cfg.Sink == nil || (cfg.Wasm == nil && cfg.native == nil) {
		return nil, ErrIncompleteConfig
	}
	sp := cfg.Spec
	if err := sp.Validate(); err != nil {
		return nil, err
	}
	if err := r.ceil.Check(sp); err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = r.logger
	}
	logger = logger.With("deployment", sp.Name)
	keyspace := cfg.Keyspace
	if keyspace == "" {
		keyspace = sp.Name
	}
	e := &Engine{spec: sp, ks: cfg.Store.Deployment(keyspace), sink: cfg.Sink, logger: logger, pending: true,
		chunkKeys: TimeoutChunkKeys, chunkBytes: TimeoutChunkBytes}
	if cfg.chunkKeys > 0 {
		e.chunkKeys, e.chunkBytes = cfg.chunkKeys, cfg.chunkBytes
	}
	e.batch = batch{e: e, seed: maphash.MakeSeed()}
	e.manifests = cfg.Manifests
	e.hasTime = sp.HasEventTime()
	if e.hasTime && !sp.HasInputs() {
		e.bound = cfg.SharedWatermark // without event time there is no watermark to share
	}
	e.rules = timeouts.Rules{Mode: sp.Timeout, HasWatermark: e.hasTime}
	e.inputs = newInputRules(sp)
	e.wrongPartition = cfg.WrongPartition
	p, err := e.ks.Progress()
	if err != nil {
		return nil, err
	}
	if e.multi, err = loadMultiInput(e.ks, sp, e.inputs); err != nil {
		return nil, err
	}
	if e.quar, err = loadQuarantine(e.ks, r.ceil.QuarantineAfter, cfg.Revision); err != nil {
		return nil, err
	}
	var suspect []byte
	if e.att, suspect, err = openAttempts(e.ks, cfg.Revision, p.BatchID+1, logger); err != nil {
		return nil, err
	}
	if suspect != nil && sp.OnError == spec.OnErrorFail {
		// on_error: fail never dead-letters: the deployment stops with the key named.
		return nil, fmt.Errorf("%w: %w", ErrKeyFailed, &KeyError{Key: string(suspect), Err: fmt.Errorf("the runtime stopped while it ran this key alone, after batch %d was attempted %d times without committing", p.BatchID+1, e.att.prev.Starts)})
	}
	if suspect != nil {
		e.quar.add(suspect, fmt.Sprintf("the runtime stopped while it ran this key alone, after batch %d was attempted %d times without committing", p.BatchID+1, e.att.prev.Starts), time.Now().UnixMilli())
		logger.Warn("quarantined the key that was running alone when the runtime stopped", "key", string(suspect), "batch", p.BatchID+1)
	}
	e.progress = p
	if e.initial, err = initialPending(e.ks, p, cfg.InitialState, logger); err != nil {
		return nil, err
	}

	if cfg.native != nil {
		init := abi.AppendInit(nil, initFor(sp))
		for _, m := range cfg.native {
			st, msg, err := abi.ParseInitResult(m.Init(init))
			if err != nil || st != abi.StatusOK {
				return nil, fmt.Errorf("%w: %s", ErrModuleInit, msg)
			}
		}
		e.h = handler.NewNative(cfg.native...)
	} else {
		h, err := r.moduleHost(ctx, cfg, logger)
		if err != nil {
			return nil, err
		}
		e.h = h
		if v2h, ok := h.(handler.V2); ok && v2h.ABIVersion() == abi.Version2 {
			if e.v2, err = newV2(e.ks, v2h, e.rules.Mode); err != nil {
				_ = h.Close(ctx)
				return nil, err
			}
		}
	}
	if err := checkABISwitch(e.ks, p, e.v2 != nil); err != nil {
		_ = e.h.Close(ctx)
		return nil, err
	}
	return e, nil
}

// checkABISwitch refuses a module of one ABI version on a keyspace that holds the state of a
// module of the other: a flatMapGroupsWithState (v1) key's value and timeout are not a
// transformWithState (v2) key's variables and timers, and the two would misread each
// other's timers. A keyspace is a v2 one once a v2 batch committed (it records its timeout
// mode, state.Deployment.TimeMode); a v1 one while it holds keys, timeouts or an open batch
// without that record.
func checkABISwitch(ks *state.Deployment, p state.Progress, v2 bool) error {
	_, ranV2, err := ks.TimeMode()
	if err != nil {
		return err
	}
	switch {
	case v2 && !ranV2 && (p.Keys > 0 || p.TimerKeys > 0 || p.Open.Active):
		return fmt.Errorf("%w: the deployment holds the state of a flatMapGroupsWithState (ABI v1) handler (%d keys), which a transformWithState (ABI v2) module cannot take over; deploy it under a new name (or drop the state with deploy --reset-state --confirm)", ErrABISwitch, p.Keys)
	case !v2 && ranV2:
		return fmt.Errorf("%w: the deployment holds the state of a transformWithState (ABI v2) handler, which a flatMapGroupsWithState (ABI v1) module cannot take over; deploy it under a new name (or drop the state with deploy --reset-state --confirm)", ErrABISwitch)
	}
	return nil
}

// initFor is the init buffer content a module gets for spec.
func initFor(sp *spec.Spec) abi.Init {
	init := abi.Init{ABIVersion: abi.Version, Mode: abi.TimeoutMode(sp.Timeout), Name: []byte(sp.Name), Config: sp.ConfigJSON()}
	if sp.HasEventTime() {
		init.Flags |= abi.InitHasWatermark
	}
	if sp.HasInputs() {
		// The host hands the names to ABI v2 modules only (v1's init buffer never changes).
		init.Flags |= abi.InitHasInputs
		for _, in := range sp.Inputs {
			init.Inputs = append(init.Inputs, []byte(in.Name))
		}
	}
	return init
}

// hostConfig is the WASM host configuration of spec's module on instances instances.
func (r *Runtime) hostConfig(sp *spec.Spec, wasm []byte, logger *slog.Logger, instances int) host.Config {
	lim, load := r.ceil.hostLimits(sp, instances)
	return host.Config{Wasm: wasm, Cache: r.cache, Init: initFor(sp), Logger: logger, Limits: lim, Load: load}
}

func mustPath(s string) rowjson.Path {
	p, err := rowjson.ParsePath(s)
	if err != nil {
		panic(err) // Validate checked it
	}
	return p
}

// Quarantined returns the keys the engine has quarantined, oldest first (see
// [Ceilings].QuarantineAfter and [ReasonQuarantined]). The slice is the caller's.
func (e *Engine) Quarantined() []state.QuarantinedKey { return e.quar.list() }

// Progress returns the progress of the last committed batch, as NewEngine read it and then
// as each commit wrote it. Its WatermarkMs is the watermark the next batch runs at.
func (e *Engine) Progress() state.Progress { return e.progress }

// Spec returns the engine's spec, the Config's (do not modify it).
func (e *Engine) Spec() *spec.Spec { return e.spec }

// Close waits for the delivery of the last batch's outbox (until ctx ends; what is not
// acknowledged by then is delivered again by the next engine), makes the acknowledgements
// durable (one sync of the store, when any is not yet) and stops the engine's module
// instances. It does not close the store. Later calls of Close return nil, and RunBatch
// returns [ErrEngineClosed].
func (e *Engine) Close(ctx context.Context) error {
	if e.closed {
		return nil
	}
	e.closed = true
	if err := e.finishInflight(ctx); err != nil {
		e.logger.Warn("outbox delivery did not finish before close; the next start delivers it", "err", err)
	}
	return errors.Join(e.syncAcks(), e.att.close(), e.h.Close(ctx))
}

// syncAcks makes the acknowledgements written since the last commit durable, where no commit
// follows them: an idle deployment's (skipped batches write nothing) and a closing one's. An
// acknowledgement lost in a power loss would bring its entries back from the outbox, to be
// delivered again, perhaps after the output stream's duplicate window.
func (e *Engine) syncAcks() error {
	if !e.acksUnsynced {
		return nil
	}
	if err := e.ks.SyncAcks(); err != nil {
		return fmt.Errorf("engine: syncing outbox acknowledgements: %w", err)
	}
	e.acksUnsynced = false
	return nil
}

// ack deletes the outbox entries up to upTo, which were delivered. It does not sync (see
// syncAcks).
func (e *Engine) ack(upTo state.OutboxID) error {
	if err := e.ks.AckOutbox(upTo); err != nil {
		return err
	}
	e.acksUnsynced = true
	return nil
}

// deliverPending hands the outbox to the sink and acknowledges what it took.
func (e *Engine) deliverPending(ctx context.Context) error {
	if !e.pending {
		return nil
	}
	e.abandonInflight(ctx)
	var entries []state.OutboxEntry
	if err := e.ks.Outbox(func(en state.OutboxEntry) error {
		entries = append(entries, en)
		return nil
	}); err != nil {
		return err
	}
	if err := e.deliver(ctx, entries); err != nil {
		return err
	}
	e.pending = false
	return nil
}

func (e *Engine) deliver(ctx context.Context, entries []state.OutboxEntry) error {
	if len(entries) == 0 {
		return nil
	}
	if err := e.sink.Deliver(ctx, e.spec.Name, entries); err != nil {
		return fmt.Errorf("engine: delivering %d outbox entries: %w", len(entries), err)
	}
	return e.ack(entries[len(entries)-1].ID)
}

// inflight is a batch's delivery whose acknowledgements are on their way.
type inflight struct {
	d    Delivery
	n    int
	last state.OutboxID
}

// deliverCommitted delivers what the batch just committed. With a sink that can, it only
// sends the entries: their acknowledgements are awaited after the next batch committed (or
// when it is skipped, or at Close), so the next batch runs while the streams store this one's
// messages. Outputs stay in order, because a batch's entries are sent only after the previous
// batch's were acknowledged; when they were not, nothing more is sent until the whole outbox
// is delivered again (deliverPending, before the next batch).
func (e *Engine) deliverCommitted(ctx context.Context, entries []state.OutboxEntry) error {
	if err := e.finishInflight(ctx); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	ps, ok := e.sink.(PipelinedSink)
	if !ok {
		return e.deliver(ctx, entries)
	}
	e.inflight = &inflight{d: ps.Start(ctx, e.spec.Name, entries), n: len(entries), last: entries[len(entries)-1].ID}
	return nil
}

// finishInflight awaits the acknowledgements of the delivery in flight, if any, and deletes
// its entries from the outbox.
func (e *Engine) finishInflight(ctx context.Context) error {
	f := e.inflight
	if f == nil {
		return nil
	}
	e.inflight = nil
	if err := f.d.Wait(ctx); err != nil {
		return fmt.Errorf("engine: delivering %d outbox entries: %w", f.n, err)
	}
	return e.ack(f.last)
}

// abandonInflight forgets the delivery in flight before the outbox is delivered again as a
// whole: it waits for the acknowledgements (so nothing of it is still being sent) but ignores
// the outcome.
func (e *Engine) abandonInflight(ctx context.Context) {
	if f := e.inflight; f != nil {
		e.inflight = nil
		_ = f.d.Wait(ctx)
	}
}
