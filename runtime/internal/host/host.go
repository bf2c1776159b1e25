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
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/groupstate/groupstate/abi"
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
}

// Config is everything needed to start a module for one deployment.
type Config struct {
	// Wasm is the module's bytes.
	Wasm []byte
	// Cache is the compilation cache shared by all deployments (may be nil).
	Cache wazero.CompilationCache
	// Init is handed to gs_init in every instance, with the module's ABI version. Its
	// abi.InitHasInputs flag and Inputs (a deployment with several inputs) are for an ABI v2
	// module only: a v1 module's init buffer has neither (abi/README.md 9.3a), and its rows
	// no input indexes.
	Init abi.Init
	// Limits bound the module.
	Limits Limits
	// Logger receives the module's stdout, stderr and log calls.
	Logger *slog.Logger
	// NoInstrument keeps the module as it is and interrupts calls with wazero's checks
	// (for comparisons; slower).
	NoInstrument bool
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
	wasm    []byte // what is compiled: the module, instrumented when possible
	// instrumented tells whether the module was rewritten with a stop flag (interrupt.go);
	// otherwise wazero's WithCloseOnContextDone interrupts calls.
	instrumented bool

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
	wasm := cfg.Wasm
	if len(wasm) <= MaxModuleBytes && !cfg.NoInstrument {
		if w, ok := instrument(wasm); ok {
			wasm, h.instrumented = w, true
		}
	}
	h.wasm = wasm
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(!h.instrumented)
	if cfg.Cache != nil {
		rc = rc.WithCompilationCache(cfg.Cache)
	}
	if lim.MemoryBytes > 0 {
		pages := lim.MemoryBytes / 65536
		if pages == 0 {
			pages = 1
		}
		if pages > 65536 {
			pages = 65536
		}
		rc = rc.WithMemoryLimitPages(uint32(pages))
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	h.rt = rt
	if err := h.setup(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	h.pool = make(chan *instance, lim.Instances)
	h.sem = make(chan struct{}, lim.Instances)
	in, err := h.newInstance(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	if h.version == abi.Version2 && !importsGroupBegin(h.compiled) {
		in.close(ctx)
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("%w: an ABI v2 module must import %s.%s (abi/README.md 9.1)", ErrInvalidModule, abi.ImportModule, abi.ImportGroupBegin)
	}
	h.sem <- struct{}{}
	h.pool <- in
	return h, nil
}

// MaxModuleBytes caps the size of a module. The Go SDK's modules are about 3.5 MB; the cap
// keeps a mistaken or hostile upload from taking the compiler's time and memory.
const MaxModuleBytes = 64 << 20

func (h *Host) setup(ctx context.Context) error {
	if n := len(h.cfg.Wasm); n > MaxModuleBytes {
		return fmt.Errorf("%w: the module is %d bytes; the limit is %d bytes (64 MiB)", ErrInvalidModule, n, MaxModuleBytes)
	}
	if len(h.cfg.Wasm) < 8 || string(h.cfg.Wasm[:4]) != "\x00asm" {
		return fmt.Errorf("%w: not a WebAssembly binary (it does not start with \\0asm)", ErrInvalidModule)
	}
	compiled, err := h.rt.CompileModule(ctx, h.wasm)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	if err := validate(compiled); err != nil {
		return err
	}
	h.compiled = compiled
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, h.rt); err != nil {
		return err
	}
	_, err = h.rt.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(groupBegin), []api.ValueType{i32}, nil).
		Export(abi.ImportGroupBegin).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(h.guestLog), []api.ValueType{i32, i32, i32}, nil).
		Export(abi.ImportLog).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(guestState), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		Export(abi.ImportState).
		Instantiate(ctx)
	return err
}

// Process implements handler.Handler: it cuts the call into chunks and runs them on pooled
// instances in parallel, their retries within Limits.RetryTimeout. It returns an error only
// when ctx ends (wrapping ctx.Err(); the call running is interrupted) or the host is
// unusable.
func (h *Host) Process(ctx context.Context, call *handler.Call, results []handler.Result) error {
	budget := &retryBudget{d: h.cfg.Limits.RetryTimeout}
	defer budget.stop()
	chunks := h.chunks(call)
	if len(chunks) == 1 {
		return h.runChunk(ctx, budget, call, chunks[0], results)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(chunks))
	for i, c := range chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.runChunk(ctx, budget, call, c, results)
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
	n := len(call.Groups)
	per := lim.MaxGroupsPerCall
	if k := lim.Instances; k > 1 && n >= 256 {
		runs := (n + per - 1) / per
		runs = (runs + k - 1) / k * k
		per = (n + runs - 1) / runs
	}
	return cut(n, per, lim.MaxBytesPerCall, func(i int) int {
		g := &call.Groups[i]
		return abi.GroupSize(g.Key, g.State, g.Rows)
	})
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

// runChunk runs one chunk on one instance. When the guest call fails as a whole (trap, time
// limit, memory limit, malformed result), the instance is replaced and the groups are retried
// alone, so the failure is pinned on the groups that cause it and the others proceed. Once a
// group's call alone exceeded the time limit (a group that loops, say), the groups after it
// are called together again: a chunk with one looping key costs two call timeouts, not one per
// group after it. The retries run within budget (Limits.RetryTimeout, shared by the chunks of
// the Process, from the first failure on): when it is spent, the retry running is interrupted
// and the groups not retried fail, so a handler that loops for every key costs the first
// call's time limit and the budget, not a call timeout per key.
func (h *Host) runChunk(ctx context.Context, budget *retryBudget, call *handler.Call, s span, results []handler.Result) error {
	groups, res := call.Groups[s.lo:s.hi], results[s.lo:s.hi]
	run := func(ctx context.Context, lo, hi int) error {
		sub := &handler.Call{ProcessingTimeMs: call.ProcessingTimeMs, WatermarkMs: call.WatermarkMs, Groups: groups[lo:hi]}
		err := h.withInstance(ctx, func(in *instance) error { return in.process(ctx, sub, res[lo:hi], h.cfg.Limits) })
		if err != nil {
			handler.FailAll(res[lo:hi], err) // replaced if the groups are retried
		}
		return err
	}
	fail := func(lo, hi int, err error) { handler.FailAll(res[lo:hi], err) }
	return h.retryAlone(ctx, budget, len(groups), run, fail)
}

// retryAlone runs the n groups of a chunk with one call of run, and when that call fails as a
// whole, retries them as runChunk says, with fail recording the failure of the groups that are
// not retried (or whose retry the budget interrupted). run records the outcome of its groups,
// the failure of a whole call included.
func (h *Host) retryAlone(ctx context.Context, budget *retryBudget, n int, run func(ctx context.Context, lo, hi int) error, fail func(lo, hi int, err error)) error {
	cause := run(ctx, 0, n) // the last failure, for the errors of groups not retried
	switch {
	case cause == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case n == 1:
		return nil
	}
	retry := budget.start(ctx)
	together := false // the next call is of every group left, not of one alone
	for lo := 0; lo < n; {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if retry.Err() != nil {
			fail(lo, n, h.budgetError("not retried", cause))
			return nil
		}
		hi := lo + 1
		if together {
			hi = n
		}
		err := run(retry, lo, hi)
		switch {
		case err == nil:
			lo = hi
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case retry.Err() != nil:
			// The budget ran out during the retry (or while it waited for an instance).
			fail(lo, hi, h.budgetError("the retry was interrupted", cause))
			fail(hi, n, h.budgetError("not retried", cause))
			return nil
		}
		cause = err
		if hi-lo > 1 {
			together = false // retry each group alone
			continue
		}
		lo++
		together = errors.Is(err, ErrTimeLimit)
	}
	return nil
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
	h.pool <- in
	return nil
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

// Close closes every instance and the wazero runtime. Compiled code stays in the cache.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	return h.rt.Close(ctx)
}
