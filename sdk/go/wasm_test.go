//go:build !wasip1

package groupstate

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/groupstate/groupstate/abi"
)

// buildFixture builds the handler in testdata/name as a wasip1 reactor and returns the
// module's bytes.
func buildFixture(t *testing.T, name string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", out, "./testdata/"+name)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signatures lists a module's imported or exported functions as "name(params)results".
func signatures(defs []api.FunctionDefinition, imports bool) []string {
	var out []string
	for _, d := range defs {
		name := ""
		if imports {
			mod, n, _ := d.Import()
			name = mod + "." + n
		} else if len(d.ExportNames()) > 0 {
			name = d.ExportNames()[0]
		}
		sig := name + "("
		for _, p := range d.ParamTypes() {
			sig += api.ValueTypeName(p)
		}
		sig += ")"
		for _, r := range d.ResultTypes() {
			sig += api.ValueTypeName(r)
		}
		out = append(out, sig)
	}
	sort.Strings(out)
	return out
}

// TestWasmFixtures builds the v1 and v2 fixtures with GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared and checks their imports and exports (abi/README.md 2.1, 2.2, 9.1): the
// v2 module imports groupstate.group_begin and groupstate.state, the v1 module neither (the
// linker drops the ABI v2 code of a module that registers no processor, and a v1 module
// announces its groups through gs_group_cell). It then runs the v2 module in wazero against the
// test host, through the real imports.
func TestWasmFixtures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds WebAssembly modules")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter()) // compiles 3 MB modules much faster
	defer r.Close(ctx)

	wantExports := []string{"_initialize()", "gs_abi_version()i32", "gs_alloc(i32)i32", "gs_group_cell()i32", "gs_init(i32i32)i64", "gs_process(i32i32)i64"}
	compiled := map[string]wazero.CompiledModule{}
	for _, name := range []string{"v1echo", "v2echo"} {
		cm, err := r.CompileModule(ctx, buildFixture(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		compiled[name] = cm
		var host []string
		for _, imp := range signatures(cm.ImportedFunctions(), true) {
			if strings.HasPrefix(imp, abi.ImportModule+".") {
				host = append(host, imp)
			} else if !strings.HasPrefix(imp, abi.WASIModule+".") {
				t.Errorf("%s imports %s", name, imp)
			}
		}
		// A v1 module announces its groups through the group cell (gs_group_cell), a v2
		// module with group_begin, which ABI v2 requires.
		var want []string
		if name == "v2echo" {
			want = []string{"groupstate.group_begin(i32)", "groupstate.state(i32i32i32i32)i32"}
		}
		if !reflect.DeepEqual(host, want) {
			t.Errorf("%s imports %v from groupstate, want %v", name, host, want)
		}
		var exports []string
		for _, e := range signatures(maps2slice(cm.ExportedFunctions()), false) {
			if strings.HasPrefix(e, "gs_") || strings.HasPrefix(e, "_") {
				exports = append(exports, e)
			}
		}
		if !reflect.DeepEqual(exports, wantExports) {
			t.Errorf("%s exports %v, want %v", name, exports, wantExports)
		}
		if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok || len(cm.ImportedMemories()) > 0 {
			t.Errorf("%s does not export its own memory", name)
		}
	}

	// Run v2echo through the imports, with the test host behind them.
	var th *testHost
	instantiateStateImports(t, ctx, r, &th)
	for _, name := range []string{"v1echo", "v2echo"} {
		mod, err := r.InstantiateModule(ctx, compiled[name], wazero.NewModuleConfig().WithName(name).WithStartFunctions("_initialize"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v, err := mod.ExportedFunction(abi.ExportABIVersion).Call(ctx)
		if want := map[string]uint64{"v1echo": 1, "v2echo": 2}[name]; err != nil || v[0] != want {
			t.Fatalf("%s: gs_abi_version %v %v, want %d", name, v, err, want)
		}
		if name == "v1echo" {
			continue
		}
		call := exportCaller(t, ctx, mod)
		st, msg, decls, err := abi.ParseInitResultV2(call(abi.ExportInit, initBufV2(abi.TimeoutProcessingTime, "{}")))
		if err != nil || st != abi.StatusOK {
			t.Fatalf("gs_init: %v %q %v", st, msg, err)
		}
		th = &testHost{t: t, mode: abi.TimeoutProcessingTime, decls: decls, keys: map[string]*keyState{}, cur: -1}
		gsProcess := func(in []byte) []byte { return call(abi.ExportProcess, in) }
		res := th.processWith(gsProcess, newV2Buf(1000, 0, 2).data(`"a"`, `{"x":1}`, `{"x":2}`).data(`7`, `{"y":1}`).b)
		requireOK(t, res)
		requireDump(t, th, `"a"`, `count=2 rows=[{"x":1} {"x":2}] timers=[2000]`)
		res = th.processWith(gsProcess, newV2Buf(3000, 0, 1).timers(`"a"`, 2000).b)
		requireOK(t, res)
		if want := []string{`{"x":1}`, `{"x":2}`}; !reflect.DeepEqual(res[0].emits, want) {
			t.Fatalf("timer emits %v, want %v", res[0].emits, want)
		}
		requireDump(t, th, `"a"`, `count=2`)
	}
}

func maps2slice(m map[string]api.FunctionDefinition) []api.FunctionDefinition {
	out := make([]api.FunctionDefinition, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	return out
}

// instantiateStateImports instantiates WASI and the groupstate host module in r, its
// group_begin and state functions served by *th, the test host of the calls (set it before
// a call that begins a group).
func instantiateStateImports(t *testing.T, ctx context.Context, r wazero.Runtime, th **testHost) {
	t.Helper()
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	_, err := r.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().WithFunc(func(ctx context.Context, i uint32) {
		if *th != nil {
			(*th).GroupBegin(i)
		}
	}).Export(abi.ImportGroupBegin).
		NewFunctionBuilder().WithFunc(func(ctx context.Context, m api.Module, reqPtr, reqLen, respPtr, respCap uint32) int32 {
		req, ok := m.Memory().Read(reqPtr, reqLen)
		if !ok {
			return abi.StateRefused
		}
		resp := make([]byte, respCap)
		n := (*th).State(req, resp)
		if n >= 0 && uint32(n) <= respCap && !m.Memory().Write(respPtr, resp[:n]) {
			return abi.StateRefused
		}
		return n
	}).Export(abi.ImportState).
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
}

// exportCaller returns a function that calls mod's export (gs_init, gs_process) with a buffer
// in guest memory and returns a copy of its result.
func exportCaller(t *testing.T, ctx context.Context, mod api.Module) func(export string, in []byte) []byte {
	return func(export string, in []byte) []byte {
		t.Helper()
		p, err := mod.ExportedFunction(abi.ExportAlloc).Call(ctx, uint64(len(in)))
		if err != nil || !mod.Memory().Write(uint32(p[0]), in) {
			t.Fatalf("gs_alloc: %v", err)
		}
		res, err := mod.ExportedFunction(export).Call(ctx, p[0], uint64(len(in)))
		if err != nil {
			t.Fatalf("%s: %v", export, err)
		}
		b, ok := mod.Memory().Read(abi.UnpackResult(res[0]))
		if !ok {
			t.Fatalf("%s: result outside the memory", export)
		}
		return slices.Clone(b)
	}
}
