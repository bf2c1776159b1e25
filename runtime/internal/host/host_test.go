package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// testCache is the compilation cache of the hosts testConfig configures: the tests' shared
// one (testutil.CompileCacheDir), so that each module compiles once, not in every test.
var testCache = func() wazero.CompilationCache {
	c, err := wazero.NewCompilationCacheWithDir(testutil.CompileCacheDir())
	if err != nil {
		return wazero.NewCompilationCache()
	}
	return c
}()

func testConfig(wasm []byte) Config {
	return Config{
		Cache:  testCache,
		Wasm:   wasm,
		Init:   abi.Init{ABIVersion: abi.Version, Name: []byte("t"), Config: []byte("{}")},
		Logger: slog.New(slog.DiscardHandler),
		Limits: Limits{CallTimeout: 2 * time.Second, MemoryBytes: 64 << 20},
	}
}

// TestRefusedModules: modules that cannot work are refused when the host starts, with a
// message naming the problem.
func TestRefusedModules(t *testing.T) {
	withoutExport := func(name string) wasmModule {
		m := stubModule(1)
		for i, f := range m.funcs {
			if f.export == name {
				m.funcs[i].export = ""
			}
		}
		return m
	}
	badSig := stubModule(1)
	badSig.funcs[1].params = nil
	envImport := stubModule(1)
	envImport.imports = []wasmImport{{module: "env", name: "abort", params: []byte{tI32}}}
	unknownHost := stubModule(1)
	unknownHost.imports = []wasmImport{{module: "groupstate", name: "state_get", params: []byte{tI32}}}
	badHostSig := stubModule(1)
	badHostSig.imports = []wasmImport{{module: "groupstate", name: "log", params: []byte{tI32}}}
	trapStart := stubModule(1)
	trapStart.funcs = append(trapStart.funcs, wasmFunc{export: "_initialize", body: unreachable})
	command := stubModule(1)
	command.funcs = append(command.funcs, wasmFunc{export: "_start"})
	noMemory := stubModule(1)
	noMemory.memory = false

	tests := []struct {
		name string
		wasm []byte
		err  error
		msg  string
	}{
		{"not wasm", []byte("hello, I am not a module"), ErrInvalidModule, "not a WebAssembly binary"},
		{"too large", append([]byte("\x00asm\x01\x00\x00\x00"), make([]byte, MaxModuleBytes)...), ErrLoadLimit, "the module size limit is 67108864"},
		{"empty", nil, ErrInvalidModule, "not a WebAssembly binary"},
		{"truncated", []byte("\x00asm\x01\x00\x00\x00\x01\x05"), ErrInvalidModule, "invalid module"},
		{"missing gs_process", withoutExport("gs_process").bytes(), ErrInvalidModule, `missing export "gs_process" with signature (i32, i32) -> (i64)`},
		{"missing everything", wasmModule{memory: true}.bytes(), ErrInvalidModule, `missing export "gs_abi_version"`},
		{"command module", command.bytes(), ErrInvalidModule, "the module is a WASI command (it exports _start); build a reactor instead"},
		{"no memory", noMemory.bytes(), ErrInvalidModule, `missing export "memory"`},
		{"wrong signature", badSig.bytes(), ErrInvalidModule, `export "gs_alloc" has signature () -> (i32), want (i32) -> (i32)`},
		{"env import", envImport.bytes(), ErrInvalidModule, `imports env.abort: only "wasi_snapshot_preview1" and "groupstate" imports are allowed`},
		{"unknown host function", unknownHost.bytes(), ErrInvalidModule, "imports unknown host function groupstate.state_get"},
		{"host function signature", badHostSig.bytes(), ErrInvalidModule, "imports groupstate.log with signature (i32) -> (), want (i32, i32, i32) -> ()"},
		{"ABI version 3", stubModule(3).bytes(), ErrABIVersion, "the module implements ABI version 3; this runtime supports versions 1 and 2"},
		{"ABI version 0", stubModule(0).bytes(), ErrABIVersion, "ABI version 0"},
		{"_initialize traps", trapStart.bytes(), ErrInit, "_initialize: module trapped"},
		{"init result outside memory", stubModule(1).bytes(), ErrInit, "gs_alloc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(context.Background(), testConfig(tc.wasm))
			if err == nil {
				h.Close(context.Background())
				t.Fatal("module accepted")
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v\nwant %v containing %q", err, tc.err, tc.msg)
			}
		})
	}
}

func sampleWasm(t testing.TB, name string) []byte {
	b, err := os.ReadFile("../../../samples/" + name + "/go/" + name + ".wasm")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInitError: a module whose gs_init fails (here the sessions sample with a zero gap) is
// refused with the module's own message.
func TestInitError(t *testing.T) {
	cfg := testConfig(sampleWasm(t, "sessions"))
	cfg.Init.Mode = abi.TimeoutEventTime
	cfg.Init.Flags = abi.InitHasWatermark
	cfg.Init.Config = []byte(`{"gap": "0s"}`)
	_, err := New(context.Background(), cfg)
	if !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("err = %v, want ErrInit naming the gap", err)
	}
}

// TestChunking: a big call is cut into chunks that respect the group and byte limits, and
// every group gets its own result in order.
func TestChunking(t *testing.T) {
	cfg := testConfig(sampleWasm(t, "logincount"))
	cfg.Init.Mode = abi.TimeoutProcessingTime
	cfg.Limits.MaxGroupsPerCall = 100
	cfg.Limits.Instances = 2
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	call := &handler.Call{ProcessingTimeMs: 1000}
	for i := range 1000 {
		key := []byte(`"u` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + `"`)
		call.Groups = append(call.Groups, handler.Group{Key: key, Rows: [][]byte{[]byte(`{}`)}})
	}
	spans := h.chunks(call)
	total := 0
	for _, s := range spans {
		if n := s.hi - s.lo; n > 100 || n == 0 {
			t.Fatalf("chunk of %d groups", n)
		}
		if s.lo != total {
			t.Fatalf("chunks not contiguous: %v", spans)
		}
		total = s.hi
	}
	if total != 1000 {
		t.Fatalf("chunks cover %d groups", total)
	}
	res := make([]handler.Result, 1000)
	if err := h.Process(context.Background(), call, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Action != abi.ActionUpdate || len(r.Emits) != 1 || !strings.Contains(string(r.Emits[0]), string(call.Groups[i].Key)) {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
}

// TestChunkBalance: big calls are cut into equal runs, as many as a multiple of the instances.
func TestChunkBalance(t *testing.T) {
	tests := []struct {
		groups, instances int
		want              []int // run sizes
	}{
		{9500, 2, []int{2375, 2375, 2375, 2375}},
		{8192, 2, []int{4096, 4096}},
		{5000, 2, []int{2500, 2500}},
		{1000, 2, []int{500, 500}},
		{1000, 3, []int{334, 334, 332}},
		{255, 2, []int{255}}, // too small to spread
		{9500, 1, []int{4096, 4096, 1308}},
	}
	for _, tt := range tests {
		h := &Host{cfg: Config{Limits: Limits{MaxGroupsPerCall: 4096, MaxBytesPerCall: 8 << 20, Instances: tt.instances}}}
		call := &handler.Call{Groups: make([]handler.Group, tt.groups)}
		var got []int
		for _, s := range h.chunks(call) {
			got = append(got, s.hi-s.lo)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%d groups on %d instances: runs %v, want %v", tt.groups, tt.instances, got, tt.want)
		}
	}
}

// TestInstrumentSamples: every sample module of every language can be instrumented (else the
// host falls back to wazero's slower interruption), and the result still satisfies the ABI.
func TestInstrumentSamples(t *testing.T) {
	mods, _ := filepath.Glob("../../../samples/*/*/*.wasm")
	mods = append(mods, "../../engine/testdata/probe/probe.wasm")
	if len(mods) < 10 {
		t.Fatalf("found only %d modules", len(mods))
	}
	for _, p := range mods {
		wasm, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out, err := instrument(wasm, LoadLimits{})
		if err != nil {
			t.Errorf("%s: not instrumented: %v", p, err)
			continue
		}
		again, _ := instrument(wasm, LoadLimits{})
		if !bytes.Equal(out.wasm, again.wasm) {
			t.Errorf("%s: instrumenting is not deterministic", p)
		}
		h, err := New(context.Background(), testConfig(wasm))
		if err != nil {
			if errors.Is(err, ErrInit) && strings.Contains(err.Error(), "config") {
				continue // sessions and carts need their spec's config; init ran, which is the point
			}
			t.Errorf("%s: %v", p, err)
			continue
		}
		// The host keeps no copy of the bytes once compiled: an instance of the instrumented
		// module is what exports the stop flag and the stack estimate (interrupt.go).
		err = h.withInstance(context.Background(), func(in *instance) error {
			if in.stop == nil || in.frames == nil {
				t.Errorf("%s: host did not use the instrumented module", p)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", p, err)
		}
		h.Close(context.Background())
	}
}

// TestInterruptLoop: an endless loop in an instrumented module is stopped at the deadline.
func TestInterruptLoop(t *testing.T) {
	loop := stubModule(1)
	// gs_process: loop forever (loop; br 0; end), then return 0.
	loop.funcs[3].body = append([]byte{0x03, 0x40, 0x0c, 0x00, 0x0b}, i64Const(0)...)
	cfg := testConfig(loop.bytes())
	cfg.Limits.CallTimeout = 200 * time.Millisecond
	// The stub's gs_alloc returns 0, which fails every call before gs_process; test invoke
	// directly on an instance instead.
	h := &Host{cfg: cfg}
	ins, err := instrument(cfg.Wasm, LoadLimits{})
	if err != nil {
		t.Fatal(err)
	}
	h.rt = wazero.NewRuntimeWithConfig(context.Background(), wazero.NewRuntimeConfig())
	defer h.rt.Close(context.Background())
	compiled, err := h.rt.CompileModule(context.Background(), ins.wasm)
	if err != nil {
		t.Fatal(err)
	}
	h.compiled = compiled
	mod, err := h.rt.InstantiateModule(context.Background(), compiled, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	in := rawInstance(mod)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// Garbage collections while the guest loops: compiled code has no safepoints, so a loop
	// that never left it would stall every stop-the-world, and the timer that stops it.
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		for ctx.Err() == nil {
			goruntime.GC()
		}
	}()
	start := time.Now()
	err = in.invoke(ctx, mod.ExportedFunction("gs_process"))
	elapsed := time.Since(start)
	<-gcDone
	t.Logf("stopped after %v", elapsed)
	if !errors.Is(err, ErrTimeLimit) || elapsed > 800*time.Millisecond {
		t.Fatalf("err = %v after %v (deadline 200ms)", err, elapsed)
	}
	// The same instance runs again once the flag is reset (a call that returns quickly).
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if err := in.invoke(ctx2, mod.ExportedFunction("gs_abi_version")); err != nil || in.stack[0] != 1 {
		t.Fatalf("next call: %v %v", err, in.stack[0])
	}
}

// TestInstrumentBulkMemory: modules built with bulk memory (memory.copy and memory.fill, as
// clang emits for memcpy and memset with -mbulk-memory) are instrumented: the scanner skips
// the instructions' immediates exactly, so the loop after them gets its check, and the
// rewritten module computes what the original does.
func TestInstrumentBulkMemory(t *testing.T) {
	var (
		memFill = []byte{0xfc, 0x0b, 0x00}       // memory.fill 0
		memCopy = []byte{0xfc, 0x0a, 0x00, 0x00} // memory.copy 0 0
		load    = []byte{0x28, 0x02, 0x00}       // i32.load align=4 offset=0
		store   = []byte{0x36, 0x02, 0x00}       // i32.store align=4 offset=0
	)
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	// once: fill [0,4) with 42, copy it to [4,8), load [4,8).
	once := cat(i32Const(0), i32Const(42), i32Const(4), memFill,
		i32Const(4), i32Const(0), i32Const(4), memCopy,
		i32Const(4), load)
	// count: clear [16,24), then mem[16]++ and copy it to mem[20] until it reaches 3; return
	// mem[20]. Each bulk instruction is followed by a loop (the inner one runs once), so an
	// instruction whose immediates were over-skipped would hide that loop from the scanner.
	count := cat(i32Const(16), i32Const(0), i32Const(8), memFill,
		[]byte{0x03, 0x40}, // loop
		i32Const(16), i32Const(16), load, i32Const(1), []byte{0x6a}, store,
		i32Const(20), i32Const(16), i32Const(4), memCopy,
		[]byte{0x03, 0x40, 0x0b},                                  // an inner loop, run once
		i32Const(16), load, i32Const(3), []byte{0x49, 0x0d, 0x00}, // i32.lt_u; br_if 0
		[]byte{0x0b}, // end
		i32Const(20), load)
	// spin: an endless loop that only copies and fills.
	spin := cat([]byte{0x03, 0x40},
		i32Const(8), i32Const(0), i32Const(8), memCopy,
		i32Const(0), i32Const(1), i32Const(8), memFill,
		[]byte{0x0c, 0x00, 0x0b}) // br 0; end
	m := wasmModule{memory: true, funcs: []wasmFunc{
		{export: "once", results: []byte{tI32}, body: once},
		{export: "count", results: []byte{tI32}, body: count},
		{export: "spin", body: spin},
	}}
	ins, err := instrument(m.bytes(), LoadLimits{})
	if err != nil {
		t.Fatalf("a module with memory.copy and memory.fill was not instrumented: %v", err)
	}
	wasm := ins.wasm
	// Each loop, and nothing else, got a check right after its block type. The module has no
	// globals of its own, so the added counter is global 1; its three functions come before
	// the slow path the checks call, function 3.
	check := check(1, 3)
	for _, f := range m.funcs {
		var want []byte
		rest := f.body
		for { // the body's only 0x03 0x40 bytes are loop headers
			i := bytes.Index(rest, []byte{0x03, 0x40})
			if i < 0 {
				break
			}
			want, rest = cat(want, rest[:i+2], check), rest[i+2:]
		}
		want = cat(want, rest)
		if !bytes.Contains(wasm, want) {
			t.Errorf("%s: instrumented body not found:\n%x", f.export, want)
		}
	}
	if t.Failed() {
		return
	}

	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]uint64{"once": 0x2a2a2a2a, "count": 3} {
		if got, err := mod.ExportedFunction(name).Call(ctx); err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("%s() = %v, %v; want %#x", name, got, err, want)
		}
	}
	in := rawInstance(mod)
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := in.invoke(tctx, mod.ExportedFunction("spin")); !errors.Is(err, ErrTimeLimit) {
		t.Fatalf("spin: %v, want the time limit", err)
	}
}

// rawInstance is an instance of an instrumented module instantiated by a test itself.
func rawInstance(mod api.Module) *instance {
	return &instance{mod: mod, stack: make([]uint64, 2),
		stop:   mod.ExportedGlobal(StopGlobal).(api.MutableGlobal),
		frames: mod.ExportedGlobal(StackGlobal).(api.MutableGlobal), stackMax: DefaultStackBytes}
}

// TestRelease: Release closes the idle instances, and the next call makes one again and runs
// as before; a second Release closes that one. InstanceMemoryBytes sees the idle instance's
// memory, and none once it is released.
func TestRelease(t *testing.T) {
	cfg := testConfig(sampleWasm(t, "logincount"))
	cfg.Init.Mode = abi.TimeoutProcessingTime
	cfg.Limits.Instances = 2
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	call := func() {
		t.Helper()
		res := make([]handler.Result, 1)
		c := &handler.Call{ProcessingTimeMs: 1000, Groups: []handler.Group{{Key: []byte(`"ada"`), Rows: [][]byte{[]byte(`{}`)}}}}
		if err := h.Process(context.Background(), c, res); err != nil || res[0].Err != nil || len(res[0].Emits) != 1 {
			t.Fatalf("call: %v, %+v", err, res[0])
		}
	}
	call()
	if m := h.InstanceMemoryBytes(); m == 0 || m%(64<<10) != 0 || len(h.pool) != 1 {
		t.Fatalf("InstanceMemoryBytes with one idle instance: %d bytes, %d pooled after; want whole wasm pages and the instance back in the pool", m, len(h.pool))
	}
	if n := h.Release(context.Background()); n != 1 {
		t.Fatalf("Release closed %d instances, want the 1 the host had", n)
	}
	if m := h.InstanceMemoryBytes(); m != 0 {
		t.Fatalf("InstanceMemoryBytes with no instance: %d, want 0", m)
	}
	if len(h.pool) != 0 || len(h.sem) != 0 {
		t.Fatalf("after Release: %d pooled, %d slots taken; want none", len(h.pool), len(h.sem))
	}
	call()
	if n := h.Release(context.Background()); n != 1 {
		t.Fatalf("second Release closed %d instances, want 1", n)
	}
}
