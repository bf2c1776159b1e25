package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// TestSharedModuleIsolation: two hosts of one module share its compilation and nothing else.
// While one runs keys that flood the log until the time limit interrupts them, the other
// runs healthy calls on the same compiled module: none of them is interrupted or fails, and
// none of the first's log reaches the second's logger.
func TestSharedModuleIsolation(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile(filepath.Join("testdata/hostile", "log-flood.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	var loggedA, loggedB atomic.Int64
	cfgA, cfgB := testConfig(wasm), testConfig(wasm)
	cfgA.Logger, cfgB.Logger = slog.New(byteCounter{&loggedA}), slog.New(byteCounter{&loggedB})
	cfgA.Limits.CallTimeout, cfgB.Limits.CallTimeout = 200*time.Millisecond, 200*time.Millisecond
	a, err := New(ctx, cfgA)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := New(ctx, cfgB)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if a.compiled != b.compiled {
		t.Fatal("the two hosts do not share the compiled module; the test would prove nothing")
	}
	hostile := &handler.Call{ProcessingTimeMs: 1000}
	for i := range 4 {
		hostile.Groups = append(hostile.Groups, handler.Group{Key: []byte(fmt.Sprintf(`"x%d"`, i)), Rows: [][]byte{[]byte(`{}`)}})
	}
	done := make(chan error, 1)
	go func() {
		res := make([]handler.Result, len(hostile.Groups))
		err := a.Process(ctx, hostile, res)
		for i, r := range res {
			if err == nil && (r.Err == nil || !strings.Contains(r.Err.Error(), "per-call time limit")) {
				err = fmt.Errorf("hostile key %d: %v, want the time limit", i, r.Err)
			}
		}
		done <- err
	}()
	healthy := &handler.Call{ProcessingTimeMs: 1000, Groups: []handler.Group{{Key: []byte(`"h"`), Rows: [][]byte{[]byte(`{}`)}}}}
	calls := 0
	for running := true; running || calls == 0; calls++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		res := make([]handler.Result, 1)
		if err := b.Process(ctx, healthy, res); err != nil || res[0].Err != nil || len(res[0].Emits) != 1 {
			t.Fatalf("a healthy call on the other host, while the first floods: %v %+v", err, res)
		}
	}
	if loggedA.Load() == 0 || loggedB.Load() != 0 {
		t.Fatalf("logged: %d bytes by the flooding host, %d by the healthy one; want some and none", loggedA.Load(), loggedB.Load())
	}
	t.Logf("%d healthy calls ran while the other host's keys flooded the log", calls)
}
