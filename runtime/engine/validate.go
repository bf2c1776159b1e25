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
	if err := r.ceil.Check(sp); err != nil {
		return err
	}
	h, err := host.New(ctx, r.hostConfig(sp, wasm, r.logger, 1))
	if err != nil {
		return err
	}
	return h.Close(ctx)
}
