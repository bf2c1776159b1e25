//go:build !wasip1

package groupstate

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/internal/toolchain"
)

// TestRustV2Example runs the Rust SDK's ABI v2 example processor (sdk/rust/examples/pageviews,
// built here with the rustc of groupstate build for wasm32-wasip1 or wasm32-wasi, the SDK with
// its feature v2) in wazero against this package's test host, through the real imports: the
// Rust guest's memory handling, its groupstate.state calls and its result buffers, checked by
// package abi's readers. It also checks
// that the module imports groupstate.state and that a v1 sample of the same SDK does not.
//
// It skips without a rustc with a WASI target and rust-lld (toolchain.Rustc), unless
// GROUPSTATE_REQUIRE_TOOLCHAINS is true (as in CI), where that is a failure.
func TestRustV2Example(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module with rustc")
	}
	// The rustc of groupstate build (package toolchain), which checks its target and rust-lld.
	rustc, target, err := toolchain.Rustc()
	if err != nil {
		if req, rerr := toolchain.Required(); req || rerr != nil {
			t.Fatalf("%v; 'bash .ci/install-toolchains' installs it (%s=%s)", err, toolchain.RequireEnv, os.Getenv(toolchain.RequireEnv))
		}
		t.Skipf("%v; 'bash .ci/install-toolchains' installs it", err)
	}

	// The flags of mk/rust.mk.
	root, dir := filepath.Join("..", ".."), t.TempDir()
	flags := []string{"--edition", "2021", "--target", target, "-C", "opt-level=s", "-C", "debuginfo=0",
		"-C", "strip=symbols", "-C", "panic=abort"}
	build := func(args ...string) {
		t.Helper()
		cmd := exec.Command(rustc, append(slices.Clone(flags), args...)...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("rustc %v: %v\n%s", args, err, out)
		}
	}
	rlib := filepath.Join(dir, "libgroupstate.rlib")
	build("--cfg", `feature="v2"`, "--crate-type=rlib", "--crate-name", "groupstate", "-C", "metadata=groupstate",
		"-o", rlib, "sdk/rust/src/lib.rs")
	for _, name := range []string{"pageviews", "logincount"} {
		src := "samples/logincount/rust/src/lib.rs"
		if name == "pageviews" {
			src = "sdk/rust/examples/pageviews/src/lib.rs"
		}
		build("--crate-type=cdylib", "--crate-name", name, "-C", "lto=fat", "-C", "codegen-units=1",
			"-L", dir, "--extern", "groupstate="+rlib, "-o", filepath.Join(dir, name+".wasm"), src)
	}

	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	compiled := map[string]wazero.CompiledModule{}
	for _, name := range []string{"pageviews", "logincount"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".wasm"))
		if err != nil {
			t.Fatal(err)
		}
		cm, err := r.CompileModule(ctx, b)
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
		want := []string{"groupstate.group_begin(i32)"}
		if name == "pageviews" {
			want = append(want, "groupstate.state(i32i32i32i32)i32")
		}
		if !reflect.DeepEqual(host, want) {
			t.Errorf("%s imports %v from groupstate, want %v", name, host, want)
		}
	}

	var th *testHost
	instantiateStateImports(t, ctx, r, &th)
	for _, name := range []string{"logincount", "pageviews"} {
		mod, err := r.InstantiateModule(ctx, compiled[name], wazero.NewModuleConfig().WithName(name).WithStartFunctions("_initialize"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v, err := mod.ExportedFunction(abi.ExportABIVersion).Call(ctx)
		if want := map[string]uint64{"logincount": 1, "pageviews": 2}[name]; err != nil || v[0] != want {
			t.Fatalf("%s: gs_abi_version %v %v, want %d", name, v, err, want)
		}
		if name == "logincount" {
			continue
		}
		call := exportCaller(t, ctx, mod)
		if st, msg, _, err := abi.ParseInitResultV2(call(abi.ExportInit, initBufV2(abi.TimeoutProcessingTime, "{}")[:10])); err == nil && st == abi.StatusOK {
			t.Fatalf("gs_init of a truncated buffer: %v %q", st, msg)
		}
		st, msg, decls, err := abi.ParseInitResultV2(call(abi.ExportInit, initBufV2(abi.TimeoutProcessingTime, "{}")))
		if err != nil || st != abi.StatusOK {
			t.Fatalf("gs_init: %v %q %v", st, msg, err)
		}
		wantDecls := []abi.VarDecl{{Name: "total", Kind: abi.VarValue}, {Name: "pages", Kind: abi.VarMap, TTLMs: 86400000},
			{Name: "recent", Kind: abi.VarList}}
		if !reflect.DeepEqual(decls, wantDecls) {
			t.Fatalf("declarations %+v, want %+v", decls, wantDecls)
		}
		th = &testHost{t: t, mode: abi.TimeoutProcessingTime, decls: decls, keys: map[string]*keyState{}, cur: -1}
		gsProcess := func(in []byte) []byte { return call(abi.ExportProcess, in) }
		res := th.processWith(gsProcess, newV2Buf(1000, 0, 2).
			data(`"a"`, `{"page":"x"}`, `{"page":"y"}`, `{"page":"x"}`).data(`7`, `{"page":"z"}`).b)
		requireOK(t, res)
		requireDump(t, th, `"a"`, `total=3 pages={x:2,y:1,} recent=["x" "y" "x"] timers=[1801000]`)
		requireDump(t, th, `7`, `total=1 pages={z:1,} recent=["z"] timers=[1801000]`)
		res = th.processWith(gsProcess, newV2Buf(2000, 0, 1).data(`"a"`, `{"page":"y"}`).b)
		requireOK(t, res)
		requireDump(t, th, `"a"`, `total=4 pages={x:2,y:2,} recent=["x" "y" "x" "y"] timers=[1802000]`)
		res = th.processWith(gsProcess, newV2Buf(1900000, 0, 2).timers(`"a"`, 1802000).timers(`7`, 1801000).b)
		requireOK(t, res)
		for i, want := range []string{`{"user":"a","total":4,"pages":{"x":2,"y":2}}`, `{"user":7,"total":1,"pages":{"z":1}}`} {
			if !reflect.DeepEqual(res[i].emits, []string{want}) {
				t.Errorf("timer call %d emits %v, want %s", i, res[i].emits, want)
			}
		}
		requireDump(t, th, `"a"`, ``)
		// A malformed process buffer is a whole-call error.
		out := gsProcess(newV2Buf(1, 0, 2).data(`"a"`, `{}`).timers(`"b"`, 1).b)
		if want := abi.AppendCallError(nil, "groupstate: process buffer: malformed: group 1: kind TIMERS after DATA groups (a process buffer holds one phase)"); !reflect.DeepEqual(out, want) {
			t.Errorf("mixed kinds: %q, want %q", out, want)
		}
	}
}
