package engine

import (
	"context"
	"log/slog"
	"sync"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/host"
)

// sharedModules are the running modules that engines of a Runtime share (Config.ShareModule),
// by ShareModule; mu guards the map and every entry's refs.
type sharedModules struct {
	mu   sync.Mutex
	byID map[string]*sharedModule
}

// sharedModule is one running module and the engines that use it. ready is closed once the
// first engine started it (h set) or failed to (err set).
type sharedModule struct {
	ready chan struct{}
	h     *host.Host
	err   error
	refs  int // guarded by sharedModules.mu
}

// moduleHost returns the running module of an engine of cfg: its own, or with
// cfg.ShareModule the one the Runtime's engines of that ShareModule share, started by the
// first of them (the others wait for it) and closed with the last.
func (r *Runtime) moduleHost(ctx context.Context, cfg Config, logger *slog.Logger) (handler.Handler, error) {
	sp := cfg.Spec
	if cfg.ShareModule == "" {
		return r.newHost(ctx, r.hostConfig(sp, cfg.Wasm, logger, r.ceil.instances(sp)))
	}
	sm, id := &r.shared, cfg.ShareModule
	sm.mu.Lock()
	m := sm.byID[id]
	first := m == nil
	if first {
		m = &sharedModule{ready: make(chan struct{})}
		if sm.byID == nil {
			sm.byID = map[string]*sharedModule{}
		}
		sm.byID[id] = m
	}
	m.refs++
	sm.mu.Unlock()
	ref := &moduleRef{m: m, sm: sm, id: id}
	if first {
		m.h, m.err = r.newHost(ctx, r.hostConfig(sp, cfg.Wasm, r.logger.With("deployment", sp.Name), r.ceil.instances(sp)))
		if m.err != nil {
			sm.mu.Lock()
			if sm.byID[id] == m {
				delete(sm.byID, id) // the next engine tries again
			}
			sm.mu.Unlock()
		}
		close(m.ready)
	} else {
		select {
		case <-m.ready:
		case <-ctx.Done():
			_ = ref.Close(context.WithoutCancel(ctx))
			return nil, ctx.Err()
		}
	}
	if m.err != nil {
		_ = ref.Close(ctx)
		return nil, m.err
	}
	return ref, nil
}

// moduleRef is one engine's use of a shared module: Close releases it, and the last release
// closes the module.
type moduleRef struct {
	m      *sharedModule
	sm     *sharedModules
	id     string
	closed bool // guarded by sm.mu
}

func (mr *moduleRef) Process(ctx context.Context, call *handler.Call, results []handler.Result) error {
	return mr.m.h.Process(ctx, call, results)
}

// ABIVersion, VarDecls and ProcessV2 implement handler.V2 (sessions are per engine, and each
// guest call gets an instance of its own, so engines sharing a module may run them at once).
func (mr *moduleRef) ABIVersion() uint32 { return mr.m.h.ABIVersion() }

func (mr *moduleRef) VarDecls() []abi.VarDecl { return mr.m.h.VarDecls() }

func (mr *moduleRef) ProcessV2(ctx context.Context, call *handler.CallV2, sess handler.StateSession, results []handler.ResultV2) error {
	return mr.m.h.ProcessV2(ctx, call, sess, results)
}

// Release closes the shared module's idle instances (see Engine.ReleaseInstances).
func (mr *moduleRef) Release(ctx context.Context) int {
	return mr.m.h.Release(ctx)
}

func (mr *moduleRef) Close(ctx context.Context) error {
	mr.sm.mu.Lock()
	if mr.closed {
		mr.sm.mu.Unlock()
		return nil
	}
	mr.closed = true
	mr.m.refs--
	last := mr.m.refs == 0
	if last && mr.sm.byID[mr.id] == mr.m {
		delete(mr.sm.byID, mr.id)
	}
	mr.sm.mu.Unlock()
	if last && mr.m.h != nil {
		return mr.m.h.Close(ctx)
	}
	return nil
}
