package bench

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
)

// extismPlugin is logincount's per-key logic as an Extism plugin (testdata/extism).
//
//go:embed testdata/extism/logincount.wasm
var extismPlugin []byte

// extismPerGroup measures ns per key group when each group is one Extism plugin call, the
// way an Extism host calls a plugin per record: the key, the state and the row go in as the
// call's input, the new state and the emitted row come back as its output. The runtime is
// configured as groupstate's (interruptible calls), so the comparison is of call models.
func extismPerGroup(ctx context.Context, d time.Duration) (float64, error) {
	manifest := extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: extismPlugin}}}
	plugin, err := extism.NewPlugin(ctx, manifest, extism.PluginConfig{
		RuntimeConfig: wazero.NewRuntimeConfig().WithCloseOnContextDone(true),
	}, nil)
	if err != nil {
		return 0, err
	}
	defer plugin.Close(ctx)
	var inputs [][]byte
	for i := range 4096 {
		inputs = append(inputs, fmt.Appendf(nil, "\"user-%06d\"\n{\"login_count\":41}\n{\"user_id\":\"user-%06d\",\"ts\":1700000000000}", i, i))
	}
	if _, out, err := plugin.CallWithContext(ctx, "handle", inputs[0]); err != nil || len(out) == 0 {
		return 0, fmt.Errorf("plugin call: %v (output %q)", err, out)
	}
	calls := 0
	start := time.Now()
	for time.Since(start) < d {
		for _, in := range inputs {
			if _, _, err := plugin.CallWithContext(ctx, "handle", in); err != nil {
				return 0, err
			}
		}
		calls += len(inputs)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(calls), nil
}
