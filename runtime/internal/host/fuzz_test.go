package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
)

// FuzzInstrument: whatever the bytes, instrument returns a module or an error and never
// panics; and a module wazero compiles that instrument accepts is still one wazero compiles
// after the rewrite (the rewrite never makes a valid module invalid). Seeded with the
// hostile corpus and the samples.
func FuzzInstrument(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/hostile/*.wasm")
	samples, _ := filepath.Glob("../../../samples/*/c/*.wasm")
	for _, p := range append(seeds, samples...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, wasm []byte) {
		ins, err := instrument(wasm, LoadLimits{})
		if err != nil {
			return
		}
		orig, err := rt.CompileModule(ctx, wasm)
		if err != nil {
			return // not a valid module: the rewrite of it need not be either
		}
		orig.Close(ctx)
		cm, err := rt.CompileModule(ctx, ins.wasm)
		if err != nil {
			t.Fatalf("the instrumented module does not compile: %v", err)
		}
		cm.Close(ctx)
	})
}
