// Package engine is groupstate's embeddable micro-batch engine: it loads handler modules
// compiled to WebAssembly, runs micro-batches with Spark's GroupState semantics
// (docs/semantics.md) over a Pebble state store, and hands what the handlers emit to a
// [Sink]. It imports no NATS and uses no Prometheus (only Pebble links the Prometheus client,
// for its histograms): a Go program runs it in-process,
//
//	rt, _ := engine.New(engine.Options{CacheDir: dir})
//	eng, _ := rt.NewEngine(ctx, engine.Config{Spec: spec, Wasm: wasm, Store: store, Sink: sink})
//	report, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: now, Rows: rows})
//
// and the NATS service (package service, groupstate serve) is built from the same engine.
//
// A [Runtime] is shared by a process's deployments and is safe for concurrent use; an
// [Engine] runs one deployment on one goroutine. Each RunBatch commits its state, timers,
// watermark, input position and outputs atomically, and outputs reach the sink only after
// their commit, in order, through the store's outbox (see [Sink] and [PipelinedSink]).
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/tetratelabs/wazero"

	"github.com/groupstate/groupstate/runtime/internal/host"
)

// Options configures a [Runtime].
type Options struct {
	// CacheDir is the directory of the on-disk compilation cache, shared by every deployment
	// and every restart, so a module is compiled once per digest; New creates it when
	// missing. It keeps the modules as instrumented to be interruptible too (in its
	// subdirectory "instrumented", see host.Config.InstrumentedDir). Empty (the default): an
	// in-memory cache (compiled code is lost when the process exits).
	CacheDir string
	// Logger receives the runtime's and the modules' logs (an engine's Config.Logger
	// overrides it). Default: slog.Default().
	Logger *slog.Logger
	// Ceilings bound what deployments' modules may use (zero fields: the defaults).
	Ceilings Ceilings
}

// Runtime holds what deployments share: the compilation cache, the logger, and the running
// modules that engines of one deployment share (Config.ShareModule). Create one per
// process; it is safe for concurrent use.
type Runtime struct {
	cache  wazero.CompilationCache
	instr  string // the directory of the instrumented modules (host.Config.InstrumentedDir)
	logger *slog.Logger
	ceil   Ceilings      // with defaults
	loads  gate          // the module loads in progress, which Close waits for
	shared sharedModules // the modules engines share (Config.ShareModule)
}

// New creates a Runtime; the zero Options give an in-memory cache and slog.Default().
func New(opts Options) (*Runtime, error) {
	r := &Runtime{logger: opts.Logger, ceil: opts.Ceilings}
	r.ceil.EnsureDefaults()
	if r.logger == nil {
		r.logger = slog.Default()
	}
	if opts.CacheDir == "" {
		r.cache = wazero.NewCompilationCache()
		return r, nil
	}
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: compilation cache: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("engine: compilation cache: %w", err)
	}
	r.cache = c
	r.instr = filepath.Join(opts.CacheDir, "instrumented")
	return r, nil
}

// Ceilings returns the runtime's ceilings, with their defaults.
func (r *Runtime) Ceilings() Ceilings { return r.ceil }

// Close releases the compilation cache's in-memory part (an on-disk cache stays on disk).
// Engines must be closed first.
// It refuses new module loads ([ErrRuntimeClosed]) and waits for those in progress, and for
// the compilations that timed out and go on in the background: wazero's engine, which the
// cache holds, must not be closed under a compilation.
func (r *Runtime) Close(ctx context.Context) error {
	r.loads.close()
	host.WaitCompilations()
	return r.cache.Close(ctx)
}

// ErrRuntimeClosed is the error of a module load (NewEngine, ValidateModule) after
// Runtime.Close began.
var ErrRuntimeClosed = errors.New("engine: runtime closed")

// gate admits module loads until it is closed, and lets close wait for those admitted.
type gate struct {
	mu     sync.Mutex
	closed bool
	n      int
	idle   *sync.Cond
}

// enter admits a load; it reports false once the gate is closed.
func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.n++
	return true
}

// exit ends a load enter admitted.
func (g *gate) exit() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 && g.idle != nil {
		g.idle.Broadcast()
	}
}

// close admits no more loads and waits for those in progress.
func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.idle == nil {
		g.idle = sync.NewCond(&g.mu)
	}
	for g.n > 0 {
		g.idle.Wait()
	}
}

// newHost starts a module host of cfg, unless the Runtime is closing.
func (r *Runtime) newHost(ctx context.Context, cfg host.Config) (*host.Host, error) {
	if !r.loads.enter() {
		return nil, ErrRuntimeClosed
	}
	defer r.loads.exit()
	cfg.InstrumentedDir = r.instr
	return host.New(ctx, cfg)
}
