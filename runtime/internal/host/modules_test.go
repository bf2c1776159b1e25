package host

import (
	"context"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// TestHostsShareCompiledModule: hosts of the same module (and limits) share one compiled
// module, so wazero's decoded copy of it is held once whatever the count of deployments
// (issue 30: a hundred idle deployments of one module held a hundred copies); each host's
// instances are its own, a host closed leaves the others working, and the last one closed
// releases the module. A different memory limit compiles apart (wazero decodes it into the
// module).
func TestHostsShareCompiledModule(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(sampleWasm(t, "logincount"))
	cfg.Init.Mode = abi.TimeoutProcessingTime
	a, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.compiled != b.compiled || a.mod != b.mod {
		t.Fatal("two hosts of one module compiled it twice")
	}
	other := cfg
	other.Limits.MemoryBytes *= 2
	c, err := New(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if c.compiled == a.compiled {
		t.Fatal("a host with another memory limit shares the module")
	}
	call := &handler.Call{ProcessingTimeMs: 1000, Groups: []handler.Group{{Key: []byte(`"ada"`), Rows: [][]byte{[]byte(`{"user_id":"ada"}`)}}}}
	process := func(h *Host) {
		t.Helper()
		res := make([]handler.Result, 1)
		if err := h.Process(ctx, call, res); err != nil || res[0].Err != nil || len(res[0].Emits) != 1 {
			t.Fatalf("process: %v %+v", err, res)
		}
	}
	process(a)
	process(b)
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	process(b) // the module a shared is still b's
	process(c)
	b.Close(ctx)
	c.Close(ctx)
	modules.mu.Lock()
	defer modules.mu.Unlock()
	if m := modules.byKey[a.mod.key]; m != nil {
		t.Fatalf("the module is still held after its last host closed: %d refs", m.refs)
	}
}
