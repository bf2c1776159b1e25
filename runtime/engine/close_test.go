package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/host/hostile"
)

// TestCloseDuringCompile: closing a Runtime while a module compiles (here a validation of a
// module slow to compile, as the service checks a new revision on a goroutine of its own)
// waits for the compilation instead of closing wazero's engine under it, which panicked the
// whole process ("assignment to entry in nil map"); a load that starts after Close began is
// refused with ErrRuntimeClosed.
func TestCloseDuringCompile(t *testing.T) {
	rt, err := engine.New(engine.Options{CacheDir: t.TempDir()})
	require(t, err)
	sp := specFromYAML(t, budgetSpec)
	slow := hostile.SlowCompile(8_000).Wasm()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		done <- rt.ValidateModule(context.Background(), sp, slow)
	}()
	<-started
	require(t, rt.Close(context.Background()))
	if err := <-done; err != nil && !errors.Is(err, engine.ErrRuntimeClosed) {
		t.Fatalf("the validation during Close: %v", err)
	}
	if err := rt.ValidateModule(context.Background(), sp, slow); !errors.Is(err, engine.ErrRuntimeClosed) {
		t.Fatalf("a validation after Close: %v, want ErrRuntimeClosed", err)
	}
}
