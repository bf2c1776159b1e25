package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/groupstate/groupstate/abi"
)

// moduleKey names what makes two hosts' compiled modules the same: the module's bytes, what
// bounds its loading (and so its instrumentation), its memory limit (wazero decodes it into
// the module) and the compilation cache (whose engine holds the compiled code).
type moduleKey struct {
	digest [sha256.Size]byte
	load   LoadLimits
	pages  uint32
	cache  wazero.CompilationCache
}

// module is a compiled module that every Host of the same moduleKey in this process shares,
// with the wazero runtime it was compiled in (WASI and the groupstate host functions
// instantiated there): wazero keeps a decoded copy of each compiled module (its code and data
// sections, several MB for a Go module) beside the compiled code the cache shares, so a
// hundred deployments of one module held a hundred copies. Each Host makes its own instances
// from it. ready is closed once the first host compiled it (rt and compiled set) or failed
// (err set); refs, guarded by modules.mu, counts the hosts that hold it.
type module struct {
	key      moduleKey
	ready    chan struct{}
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	hasStart bool
	err      error
	refs     int
}

// modules are the compiled modules the process's hosts share (see module).
var modules struct {
	mu    sync.Mutex
	byKey map[moduleKey]*module
}

// acquireModule returns the compiled module of wasm (cfg's module, or the Python runtime module
// inside it) under cfg's limits, compiling it when no host holds it (the
// hosts that ask meanwhile wait for that compilation). Each module it returns is released
// once (release).
func acquireModule(ctx context.Context, cfg Config, wasm []byte) (*module, error) {
	key := moduleKey{digest: sha256.Sum256(wasm), load: cfg.Load, pages: memoryPages(cfg.Limits.MemoryBytes), cache: cfg.Cache}
	for {
		modules.mu.Lock()
		m := modules.byKey[key]
		first := m == nil
		if first {
			m = &module{key: key, ready: make(chan struct{})}
			if modules.byKey == nil {
				modules.byKey = map[moduleKey]*module{}
			}
			modules.byKey[key] = m
		}
		m.refs++
		modules.mu.Unlock()
		if first {
			m.err = m.build(ctx, cfg, wasm)
			if m.err != nil {
				modules.mu.Lock()
				delete(modules.byKey, key) // the next host tries again
				modules.mu.Unlock()
			}
			close(m.ready)
		} else {
			select {
			case <-m.ready:
			case <-ctx.Done():
				m.release(context.WithoutCancel(ctx))
				return nil, ctx.Err()
			}
		}
		if m.err == nil {
			return m, nil
		}
		err := m.err
		m.release(ctx)
		if !first && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue // the compiling host gave up: this one compiles
		}
		return nil, err
	}
}

// memoryPages is the wazero memory limit of MemoryBytes (0: wazero's default).
func memoryPages(memoryBytes uint64) uint32 {
	if memoryBytes == 0 {
		return 0
	}
	return uint32(min(max(memoryBytes/65536, 1), 65536))
}

// build instruments, compiles and validates wasm under cfg's limits in a runtime of its own, and
// instantiates there what its instances import (WASI, the groupstate host functions).
func (m *module) build(ctx context.Context, cfg Config, wasm []byte) error {
	ins, err := instrumentKept(cfg.InstrumentedDir, m.key.digest, wasm, cfg.Load)
	if err != nil {
		return err
	}
	m.hasStart = ins.hasStart
	rc := wazero.NewRuntimeConfig()
	if cfg.Cache != nil {
		rc = rc.WithCompilationCache(cfg.Cache)
	}
	if m.key.pages > 0 {
		rc = rc.WithMemoryLimitPages(m.key.pages)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	compiled, err := compile(ctx, rt, ins.wasm, cfg.Load.withDefaults().CompileTimeout)
	if err != nil {
		if !errors.Is(err, errAbandoned) { // else the abandoned compilation closes rt
			_ = rt.Close(ctx)
		}
		return err
	}
	if err := validate(compiled); err != nil {
		_ = rt.Close(ctx)
		return err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return err
	}
	_, err = rt.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(groupBegin), []api.ValueType{i32}, nil).
		Export(abi.ImportGroupBegin).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(guestLog), []api.ValueType{i32, i32, i32}, nil).
		Export(abi.ImportLog).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(guestState), []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}).
		Export(abi.ImportState).
		Instantiate(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return err
	}
	m.rt, m.compiled = rt, compiled
	return nil
}

// release gives up one host's hold on m; the last closes its runtime (compiled code stays in
// the cache).
func (m *module) release(ctx context.Context) {
	modules.mu.Lock()
	m.refs--
	last := m.refs == 0
	if last && modules.byKey[m.key] == m {
		delete(modules.byKey, m.key)
	}
	modules.mu.Unlock()
	if last && m.rt != nil {
		_ = m.rt.Close(ctx)
	}
}
