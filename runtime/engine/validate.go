package engine

import (
	"context"

	"github.com/groupstate/groupstate/runtime/internal/host"
	"github.com/groupstate/groupstate/runtime/spec"
)

// ValidateModule checks that wasm is a usable module for spec: it compiles, satisfies the ABI,
// and initializes with the spec's config within its limits (one instance, closed again). It
// needs no store and writes nothing; the errors are NewEngine's ([ErrInvalidModule],
// [ErrABIVersion], [ErrModuleInit], [ErrCeiling], and host's loading limits). It is safe for concurrent use.
func (r *Runtime) ValidateModule(ctx context.Context, sp *spec.Spec, wasm []byte) error {
	return r.ValidateModuleUnder(ctx, sp, wasm, r.ceil)
}

// ValidateModuleUnder is ValidateModule under ceil instead of the Runtime's ceilings: a
// client checks a deployment against the ceilings of the runtimes that will run it.
func (r *Runtime) ValidateModuleUnder(ctx context.Context, sp *spec.Spec, wasm []byte, ceil Ceilings) error {
	ceil.EnsureDefaults()
	if err := ceil.Check(sp); err != nil {
		return err
	}
	lim, load := ceil.hostLimits(sp, 1)
	h, err := r.newHost(ctx, host.Config{Wasm: wasm, Cache: r.cache, Init: initFor(sp), Logger: r.logger, Limits: lim, Load: load})
	if err != nil {
		return err
	}
	return h.Close(ctx)
}
