// Package host runs handler modules on wazero: it compiles a module once per digest (through
// an on-disk compilation cache), validates it against the ABI, keeps a pool of initialized
// instances, and turns a batch of groups into one guest call per chunk of groups.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/internal/pyslot"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// Errors. Each is wrapped with detail.
var (
	// ErrInvalidModule: the bytes are not a usable ABI v1 module.
	ErrInvalidModule = errors.New("runtime: invalid module")
	// ErrABIVersion: the module implements an ABI version this host does not support.
	ErrABIVersion = errors.New("runtime: unsupported ABI version")
	// ErrInit: the module's gs_init failed.
	ErrInit = errors.New("runtime: module init failed")
)

// Limits bound what one deployment's module may use.
type Limits struct {
	// MemoryBytes caps each instance's linear memory.
	MemoryBytes uint64
	// CallTimeout bounds one guest call (one chunk of groups).
	CallTimeout time.Duration
	// RetryTimeout bounds the retries of one Process: from the first call that failed as a
	// whole, the retries of every chunk must end within it; then the retry running is
	// interrupted and the groups not retried get an error wrapping ErrRetryBudget. Calls
	// that succeed are not bounded by it. 0: no bound.
	RetryTimeout time.Duration
	// MaxResultBytes caps the result buffer of one guest call.
	MaxResultBytes uint32
	// Instances is the pool size: how many guest calls may run at once.
	Instances int
	// MaxGroupsPerCall and MaxBytesPerCall cut a batch into chunks.
	MaxGroupsPerCall int
	MaxBytesPerCall  int
	// LogBytesPerCall caps what the module logs (groupstate.log, stdout and stderr) during one
	// guest call, and during one instance's initialization; the rest of that call's output is
	// dropped, and one line says so. Default [DefaultLogBytesPerCall] (256 KiB).
	LogBytesPerCall int
	// OutputBytesPerBatch caps the bytes one Process or ProcessV2 call's groups emit (and,
	// ABI v1, store as their state), all calls together: a group whose results would take the
	// total past it fails with [ErrOutputLimit] (dead-lettered) instead. Default
	// [DefaultOutputBytesPerBatch] (256 MiB).
	OutputBytesPerBatch int64
	// StateBytesPerCall and StateBytesPerBatch cap the ABI v2 state writes (the bytes of the
	// state requests and of the ops in the results) of one guest call and of one ProcessV2:
	// the request that passes one is refused and its group fails with [ErrStateLimit].
	// Defaults [DefaultStateBytesPerCall] (64 MiB) and [DefaultStateBytesPerBatch] (256 MiB).
	StateBytesPerCall  int64
	StateBytesPerBatch int64
}

// The defaults of the ceilings of [Limits] that the runtime, not the spec, sets.
const (
	DefaultLogBytesPerCall     = 256 << 10
	DefaultOutputBytesPerBatch = 256 << 20
	DefaultStateBytesPerCall   = 64 << 20
	DefaultStateBytesPerBatch  = 256 << 20
)

// ErrOutputLimit is wrapped by the error of a group whose emits would take its batch's
// outputs past Limits.OutputBytesPerBatch.
var ErrOutputLimit = errors.New("the batch's outputs are over the runtime's limit")

// ErrStateLimit is wrapped by the error of a group whose state writes would take its call's
// or its batch's past Limits.StateBytesPerCall or Limits.StateBytesPerBatch.
var ErrStateLimit = errors.New("state writes over the runtime's limit")

// Config is everything needed to start a module for one deployment.
type Config struct {
	// Wasm is the module's bytes.
	Wasm []byte
	// Cache is the compilation cache shared by all deployments (may be nil).
	Cache wazero.CompilationCache
	// InstrumentedDir, when set, is a directory where the module is kept as the runtime
	// rewrites it to be interruptible, under its load limits, so that a later host, in this
	// process or another, reads it back instead of rewriting it again (with an on-disk Cache,
	// what a warm start of a Go module costs falls by about a third). Empty: rewritten at
	// every start. Keep it beside an on-disk Cache: it is as trusted.
	InstrumentedDir string
	// Init is handed to gs_init in every instance, with the module's ABI version. Its
	// abi.InitHasInputs flag and Inputs (a deployment with several inputs) are for an ABI v2
	// module only: a v1 module's init buffer has neither (abi/README.md 9.3a), and its rows
	// no input indexes.
	Init abi.Init
	// Limits bound the module.
	Limits Limits
	// Logger receives the module's stdout, stderr and log calls.
	Logger *slog.Logger
	// Load bounds what the module may declare (zero: the defaults).
	Load LoadLimits
}

// Host is one deployment's running module: a wazero runtime with the module compiled and a
// pool of instances. It implements handler.Handler. Safe for concurrent use.
type Host struct {
	cfg      Config
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	initBuf  []byte // the init buffer of a v1 module: never with abi.InitHasInputs
	// initBufV2 is that of a v2 module: the same, with abi_version 2 and, for a deployment
	// with several inputs, abi.InitHasInputs and the input names.
	initBufV2 []byte
	// inputs tells whether initBufV2 has abi.InitHasInputs: a v2 module's DATA rows then
	// carry their input indexes.
	inputs bool
	// version and decls are the module's ABI version and (v2) variable declarations, set by
	// the first instance's handshake in New and never changed after.
	version uint32
	decls   []abi.VarDecl
	// mod is the compiled module this host shares with the others of the same module (rt and
	// compiled are its), released by Close.
	mod *module
	// hasStart tells whether the module had a start section, which the instrumented module
	// exports as StartExport for each instance to call after instantiation.
	hasStart bool
	// pySources are a Python handler's sources, taken out of its module so that what is
	// compiled is the Python runtime module, the same for every Python handler (wazero's
	// compilation cache then compiles CPython once, not once per handler); each instance's
	// memory gets them before its _initialize. Nil for any other module.
	pySources *pyslot.Sources

	pool chan *instance // idle instances
	sem  chan struct{}  // one token per instance that may exist

	mu     sync.Mutex
	closed bool
}

// New compiles and validates the module and starts one instance (so a module whose
// initialization fails is refused here, not at the first batch).
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	lim := &cfg.Limits
	if lim.Instances <= 0 {
		lim.Instances = runtime.GOMAXPROCS(0)
	}
	if lim.MaxGroupsPerCall <= 0 {
		lim.MaxGroupsPerCall = 4096
	}
	if lim.MaxBytesPerCall <= 0 {
		lim.MaxBytesPerCall = 8 << 20
	}
	if lim.MaxResultBytes == 0 {
		lim.MaxResultBytes = 64 << 20
	}
	if lim.CallTimeout <= 0 {
		lim.CallTimeout = 5 * time.Second
	}
	if lim.LogBytesPerCall <= 0 {
		lim.LogBytesPerCall = DefaultLogBytesPerCall
	}
	if lim.OutputBytesPerBatch <= 0 {
		lim.OutputBytesPerBatch = DefaultOutputBytesPerBatch
	}
	if lim.StateBytesPerCall <= 0 {
		lim.StateBytesPerCall = DefaultStateBytesPerCall
	}
	if lim.StateBytesPerBatch <= 0 {
		lim.StateBytesPerBatch = DefaultStateBytesPerBatch
	}
	initV1 := cfg.Init
	initV1.Flags &^= abi.InitHasInputs
	initV1.Inputs = nil
	h := &Host{cfg: cfg, initBuf: abi.AppendInit(nil, initV1)}
	initV2 := cfg.Init
	initV2.ABIVersion = abi.Version2
	h.initBufV2 = abi.AppendInit(nil, initV2)
	h.inputs = initV2.Flags&abi.InitHasInputs != 0
	if h.inputs {
		if _, err := abi.ParseInit(h.initBufV2); err != nil {
			return nil, fmt.Errorf("runtime: the deployment's input names: %w", err)
		}
	}
	// A Python handler's module is the runtime module with the handler's sources in it: the
	// host compiles (and shares) the runtime module and writes the sources into each instance.
	wasm := cfg.Wasm
	if rt, src, ok := pyslot.Split(wasm); ok {
		wasm, h.pySources = rt, &src
	}
	m, err := acquireModule(ctx, cfg, wasm)
	if err != nil {
		return nil, err
	}
	// The module's bytes are not needed once compiled: instances are made from the compiled
	// module, which the hosts of the same module share. Dropped, an idle host holds only that.
	h.mod, h.rt, h.compiled, h.hasStart, h.cfg.Wasm = m, m.rt, m.compiled, m.hasStart, nil
	h.pool = make(chan *instance, lim.Instances)
	h.sem = make(chan struct{}, lim.Instances)
	in, err := h.newInstance(ctx)
	if err != nil {
		m.release(ctx)
		return nil, err
	}
	if h.version == abi.Version2 && !importsGroupBegin(h.compiled) {
		in.close(ctx)
		m.release(ctx)
		return nil, fmt.Errorf("%w: an ABI v2 module must import %s.%s (abi/README.md 9.1)", ErrInvalidModule, abi.ImportModule, abi.ImportGroupBegin)
	}
	h.sem <- struct{}{}
	h.pool <- in
	return h, nil
}

// compile compiles wasm within timeout. wazero's compiler cannot be interrupted: past the
// timeout the compilation goes on in the background (the loading limits bound how long), and
// its result is dropped; the caller gets ErrLoadLimit at once. At most two compilations run
// at a time per process (compileSlots), so modules that take the compiler long hold two cores
// at most, and one slow module leaves room for another deployment's.
func compile(ctx context.Context, rt wazero.Runtime, wasm []byte, timeout time.Duration) (wazero.CompiledModule, error) {
	type result struct {
		cm  wazero.CompiledModule
		err error
	}
	done := make(chan result, 1)
	wait := time.NewTimer(timeout)
	defer wait.Stop()
	select {
	case compileSlots <- struct{}{}:
	case <-wait.C:
		return nil, fmt.Errorf("%w: waited %s for other modules' compilations to finish", ErrCompileTimeout, timeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	compiling.Add(1)
	go func() {
		defer func() { <-compileSlots }()
		cm, err := rt.CompileModule(context.WithoutCancel(ctx), wasm)
		done <- result{cm, err}
	}()
	// abandon leaves the compilation to end in the background: what it makes is closed, and
	// then the runtime, which must outlive it (wazero's engine must not be closed under a
	// compilation); the caller does not close rt.
	abandon := func() {
		go func() {
			defer compiling.Done()
			if r := <-done; r.err == nil {
				_ = r.cm.Close(context.Background())
			}
			_ = rt.Close(context.Background())
		}()
	}
	limit := time.NewTimer(timeout) // the compilation's own time, apart from the wait for a slot
	defer limit.Stop()
	select {
	case r := <-done:
		compiling.Done()
		if r.err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidModule, r.err)
		}
		return r.cm, nil
	case <-limit.C:
		abandon()
		return nil, fmt.Errorf("%w: compiling the module took longer than %s: %w", ErrCompileTimeout, timeout, errAbandoned)
	case <-ctx.Done():
		abandon()
		return nil, fmt.Errorf("%w: %w", ctx.Err(), errAbandoned)
	}
}

// errAbandoned marks the error of a compile that goes on in the background, which closes the
// wazero runtime when it ends.
var errAbandoned = errors.New("the compilation goes on in the background")

// compiling counts the compilations in progress, abandoned ones included (WaitCompilations).
var compiling counter

// counter is a count that can be waited for to reach zero, however often it does.
type counter struct {
	mu   sync.Mutex
	n    int
	zero *sync.Cond
}

func (c *counter) Add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zero == nil {
		c.zero = sync.NewCond(&c.mu)
	}
	if c.n += d; c.n == 0 {
		c.zero.Broadcast()
	}
}

func (c *counter) Done() { c.Add(-1) }

func (c *counter) wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.n > 0 {
		c.zero.Wait()
	}
}

// WaitCompilations waits until no compilation runs in the process: call it before closing a
// compilation cache that abandoned compilations may still be writing to.
func WaitCompilations() { compiling.wait() }

// ErrCompileTimeout is the error of a module whose compilation did not end within the
// compile timeout (LoadLimits.CompileTimeout), or that waited that long for a compilation
// slot. Unlike ErrLoadLimit it may pass on a quieter machine, and the compilation that went on
// in the background fills the compilation cache for the next attempt.
var ErrCompileTimeout = errors.New("runtime: module compilation timed out")

// compileSlots lets two modules compile at a time in the process.
var compileSlots = make(chan struct{}, 2)

// Process implements handler.Handler: it cuts the call into chunks and runs them on pooled
// instances in parallel, their retries within Limits.RetryTimeout. It returns an error only
// when ctx ends (wrapping ctx.Err(); the call running is interrupted) or the host is
// unusable.
func (h *Host) Process(ctx context.Context, call *handler.Call, results []handler.Result) error {
	budget := &retryBudget{d: h.cfg.Limits.RetryTimeout}
	defer budget.stop()
	out := &outputBudget{limit: h.cfg.Limits.OutputBytesPerBatch}
	if before := handler.IsolationOf(ctx); before != nil {
		for i := range call.Groups {
			if err := before(call.Groups[i].Key); err != nil {
				return err
			}
			if err := h.runChunk(ctx, budget, call, span{i, i + 1}, results, out); err != nil {
				return err
			}
		}
		return before(nil) // no group runs any more
	}
	chunks := h.chunks(call)
	if len(chunks) == 1 {
		return h.runChunk(ctx, budget, call, chunks[0], results, out)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(chunks))
	for i, c := range chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.runChunk(ctx, budget, call, c, results, out)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

type span struct{ lo, hi int }

// chunks cuts the groups into runs of at most MaxGroupsPerCall groups and MaxBytesPerCall
// bytes. A call big enough to be worth spreading (256 groups or more) is cut into a multiple
// of the instance count of runs of equal size, so the instances finish together: 9500 groups
// on two instances are four runs of 2375, not 4096, 4096 and 1308 (of which the last would run
// alone).
func (h *Host) chunks(call *handler.Call) []span {
	lim := h.cfg.Limits
	return cut(len(call.Groups), spreadPer(len(call.Groups), lim), lim.MaxBytesPerCall, func(i int) int {
		g := &call.Groups[i]
		return abi.GroupSize(g.Key, g.State, g.Rows)
	})
}

// spreadPer is the most groups a chunk of a call of n groups gets: MaxGroupsPerCall, or for
// a call worth spreading over the instances (256 groups or more, and more than one instance)
// the size of a multiple of the instance count of equal runs.
func spreadPer(n int, lim Limits) int {
	per := lim.MaxGroupsPerCall
	if k := lim.Instances; k > 1 && n >= 256 {
		runs := (n + per - 1) / per
		runs = (runs + k - 1) / k * k
		per = (n + runs - 1) / runs
	}
	return per
}

// cut cuts n groups, group i of size(i) bytes, into runs of at most per groups and maxBytes
// bytes (a bigger group alone); no groups are one empty run.
func cut(n, per, maxBytes int, size func(i int) int) []span {
	var out []span
	lo, bytes := 0, 0
	for i := range n {
		sz := size(i)
		if i > lo && (i-lo >= per || bytes+sz > maxBytes) {
			out = append(out, span{lo, i})
			lo, bytes = i, 0
		}
		bytes += sz
	}
	if lo < n || n == 0 {
		out = append(out, span{lo, n})
	}
	return out
}

// runChunk runs one chunk on one instance, and when the guest call fails as a whole (trap,
// time limit, memory limit, malformed result) settles its groups (settle) so the failure is
// pinned on the groups that cause it and the others proceed.
func (h *Host) runChunk(ctx context.Context, budget *retryBudget, call *handler.Call, s span, results []handler.Result, out *outputBudget) error {
	groups, res := call.Groups[s.lo:s.hi], results[s.lo:s.hi]
	run := func(ctx context.Context, lo, hi int) error {
		sub := &handler.Call{ProcessingTimeMs: call.ProcessingTimeMs, WatermarkMs: call.WatermarkMs, Groups: groups[lo:hi]}
		err := h.withInstance(ctx, func(in *instance) error { return in.process(ctx, sub, res[lo:hi], h.cfg.Limits) })
		if err != nil {
			handler.FailAll(res[lo:hi], pinned(err, hi-lo)) // replaced if the groups are retried
			return err
		}
		for i := lo; i < hi; i++ {
			if r := &res[i]; r.Err == nil {
				if err := out.take(emitted(r.Emits) + int64(len(r.State))); err != nil {
					*r = handler.Result{Err: err}
				}
			}
		}
		return nil
	}
	fail := func(lo, hi int, err error) { handler.FailAll(res[lo:hi], err) }
	return h.settle(ctx, budget, 0, len(groups), run(ctx, 0, len(groups)), true, run, fail)
}

// settle settles the groups [lo, hi) of a chunk whose call failed with err (nil: nothing to
// do), with run running a span of them in one call and recording the outcome of its groups
// (the failure of a whole call included), and fail recording the failure of groups that are
// not run again.
//
// When the guest said which group it was running when the call failed (a suspect), the
// suspect runs again alone, the groups before it together, and the groups after it (which
// did not run) together, split over the other instances when parallel; all at once when
// parallel. A suspect that fails alone is the culprit, and no other group is blamed for it; a
// suspect that succeeds alone was innocent (a call of many slow groups that overran its time
// limit, say) and its result stands. Pinned this way, every failed call settles at least one
// group, so a batch with k culprits costs at most about 2k failed calls, whatever
// Limits.RetryTimeout says, and no healthy group is ever failed for another's fault.
//
// When the guest did not say (a module that announces no groups, or a failure outside any
// group), retryAlone runs the groups again one by one, within budget.
func (h *Host) settle(ctx context.Context, budget *retryBudget, lo, hi int, err error, parallel bool, run func(ctx context.Context, lo, hi int) error, fail func(lo, hi int, err error)) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case hi-lo == 1:
		return nil // the group failed alone: run recorded it
	}
	c, ok := suspect(err, hi-lo)
	if !ok {
		return h.retryAlone(ctx, budget, lo, hi, run, fail)
	}
	c += lo
	spans := []span{{c, c + 1}}
	if lo < c {
		spans = append(spans, span{lo, c})
	}
	// The groups after the suspect have not run: with instances to spare, they run in as many
	// parts, so that several hostile keys among them are found at once, not one after another.
	parts := 1
	if parallel {
		parts = max(1, min(h.cfg.Limits.Instances-1, hi-c-1))
	}
	for k := range parts {
		a, b := c+1+(hi-c-1)*k/parts, c+1+(hi-c-1)*(k+1)/parts
		if a < b {
			spans = append(spans, span{a, b})
		}
	}
	errs := make([]error, len(spans))
	one := func(i int) {
		s := spans[i]
		errs[i] = h.settle(ctx, budget, s.lo, s.hi, run(ctx, s.lo, s.hi), parallel, run, fail)
	}
	if !parallel {
		for i := range spans {
			one(i)
		}
		return errors.Join(errs...)
	}
	var wg sync.WaitGroup
	for i := range spans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			one(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// retryAlone runs the groups [lo, hi) of a chunk, whose call failed without saying which
// group it was running, again one by one, so the failure is pinned on the groups that cause
// it. Once a group's call alone exceeded the time limit (a group that loops, say), the groups
// after it are called together again: a chunk with one looping key costs two call timeouts,
// not one per group after it; a failure of that call is settled (settle) like any other. The
// retries run within budget (Limits.RetryTimeout, shared by the chunks of the Process, from
// the first failure on): when it is spent, the retry running is interrupted and the groups
// not retried fail, so a handler that loops for every key without announcing its groups costs
// the first call's time limit and the budget, not a call timeout per key.
func (h *Host) retryAlone(ctx context.Context, budget *retryBudget, lo, hi int, run func(ctx context.Context, lo, hi int) error, fail func(lo, hi int, err error)) error {
	retry := budget.start(ctx)
	var cause error // the last failure, for the errors of groups not retried
	for lo < hi {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if retry.Err() != nil {
			fail(lo, hi, h.budgetError("not retried", cause))
			return nil
		}
		err := run(retry, lo, lo+1)
		switch {
		case err == nil:
			lo++
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case retry.Err() != nil:
			// The budget ran out during the retry (or while it waited for an instance).
			fail(lo, lo+1, h.budgetError("the retry was interrupted", cause))
			fail(lo+1, hi, h.budgetError("not retried", cause))
			return nil
		}
		cause = err
		lo++
		if errors.Is(err, ErrTimeLimit) && lo < hi {
			// The groups after a looping one, together again.
			return h.settle(ctx, budget, lo, hi, run(retry, lo, hi), false, run, fail)
		}
	}
	return nil
}

// outputBudget is what the groups of one Process may still emit (Limits.OutputBytesPerBatch).
// The chunks of a Process take from it as their calls succeed, so when they run in parallel
// which group passes the limit first depends on the order they finish.
type outputBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64
}

// take spends n bytes for one group, or returns the group's error when they do not fit.
func (b *outputBudget) take(n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return fmt.Errorf("%w: its outputs and state (%d bytes) would take the batch's past the limit of %d bytes (serve --max-batch-output)", ErrOutputLimit, n, b.limit)
	}
	b.used += n
	return nil
}

// refund gives back n bytes a group took and then lost (its state writes were refused).
func (b *outputBudget) refund(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// emitted is the size of a group's emits.
func emitted(emits [][]byte) int64 {
	var n int64
	for _, e := range emits {
		n += int64(len(e))
	}
	return n
}

// pinned is the error of the groups of a call of n groups that failed as a whole with err:
// a handler.Fault when the guest call ran one group alone (the failure is that group's), err
// itself otherwise (the groups are to be retried). A canceled call, or one that never
// reached the guest, is nobody's fault.
func pinned(err error, n int) error {
	var f *callFailure
	if n != 1 || !errors.As(err, &f) || errors.Is(err, context.Canceled) {
		return err // not a guest call's failure: an instance that could not start, a closed host
	}
	return &handler.Fault{Err: err}
}

// retryBudget is the time the chunks of one Process may spend retrying: it starts with the
// first retry, so calls that succeed never spend it.
type retryBudget struct {
	d      time.Duration // 0: no bound
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
}

// start returns the context of retries under parent, starting the budget on its first call.
func (b *retryBudget) start(parent context.Context) context.Context {
	if b.d <= 0 {
		return parent
	}
	b.once.Do(func() { b.ctx, b.cancel = context.WithTimeout(parent, b.d) })
	return b.ctx
}

// stop releases the budget's timer once the Process is over.
func (b *retryBudget) stop() {
	if b.cancel != nil {
		b.cancel()
	}
}

// ErrRetryBudget is wrapped by the error of a group that was not retried, or whose retry did
// not finish, within the retry budget of its Process (Limits.RetryTimeout).
var ErrRetryBudget = errors.New("the retry budget was spent")

// budgetError is the error of a group that the spent budget stopped: what happened to it, and
// after which failure.
func (h *Host) budgetError(what string, cause error) error {
	return fmt.Errorf("%s: %w (limits.retry_timeout %s), after a call failed: %v", what, ErrRetryBudget, h.cfg.Limits.RetryTimeout, cause)
}

// withInstance runs f (one guest call) on a pooled instance. An error means the whole call
// failed: the instance is discarded (a new one is made on demand); else it goes back to the
// pool.
func (h *Host) withInstance(ctx context.Context, f func(in *instance) error) error {
	in, err := h.acquire(ctx)
	if err != nil {
		return err
	}
	if err := f(in); err != nil {
		in.close(context.Background())
		<-h.sem // the instance's slot is free; a new one is made on demand
		return err
	}
	h.put(in)
	return nil
}

// put returns in to the pool, or closes it when the host closed meanwhile (Close closed the
// instances that were in the pool; this one was running a call).
func (h *Host) put(in *instance) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		in.close(context.Background())
		return
	}
	h.pool <- in
}

func (h *Host) acquire(ctx context.Context) (*instance, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return nil, handler.ErrClosed
	}
	select {
	case in := <-h.pool:
		return in, nil
	default:
	}
	select {
	case in := <-h.pool:
		return in, nil
	case h.sem <- struct{}{}:
		in, err := h.newInstance(ctx)
		if err != nil {
			<-h.sem
			return nil, err
		}
		return in, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Release closes the instances waiting in the pool (those running a call are left alone), so
// that an idle module holds no instance memory; the next call makes one again, on demand, as
// after a failed call. It returns how many it closed. Safe for concurrent use with calls.
func (h *Host) Release(ctx context.Context) int {
	n := 0
	for {
		h.mu.Lock()
		closed := h.closed
		h.mu.Unlock()
		if closed {
			return n
		}
		select {
		case in := <-h.pool:
			in.close(ctx)
			<-h.sem // the instance's slot is free
			n++
		default:
			return n
		}
	}
}

// InstanceMemoryBytes returns the size of the largest linear memory among the idle instances
// (0 when none is idle): the guest memory one instance of the module holds (its heap, its
// stack, its data; a memory never shrinks). Safe for concurrent use with calls, whose
// instances it does not see.
func (h *Host) InstanceMemoryBytes() uint64 {
	var idle []*instance
	var most uint64
	for taking := true; taking; {
		select {
		case in := <-h.pool:
			idle = append(idle, in)
			if in.mem != nil {
				most = max(most, uint64(in.mem.Size()))
			}
		default:
			taking = false
		}
	}
	for _, in := range idle {
		h.pool <- in
	}
	return most
}

// Close closes the host's instances (those running a call when they return) and releases its
// compiled module: the last host of a module closes its wazero runtime. Compiled code stays in
// the cache.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for len(h.pool) > 0 {
		(<-h.pool).close(ctx)
	}
	h.mu.Unlock()
	h.mod.release(ctx)
	return nil
}
