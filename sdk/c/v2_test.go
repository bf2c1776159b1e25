// Package csdk_test tests the ABI v2 part of the C SDK (sdk/c/groupstate.h): it builds
// testdata/v2.c with clang as mk/c.mk builds the C samples and drives the module through
// wazero with a small in-memory host implementing groupstate.state (abi/README.md section 9).
package csdk_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/internal/toolchain"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// needClang returns the clang of groupstate build and wasi-libc's sysroot (toolchain.Clang,
// which checks wasm-ld and the wasm32 builtins too), or skips (fails under
// GROUPSTATE_REQUIRE_TOOLCHAINS=1, as the toolchain tests of cmd/groupstate do) when a part is
// missing.
func needClang(t *testing.T) (clang, sysroot string) {
	t.Helper()
	clang, sysroot, err := toolchain.Clang()
	if err == nil {
		return clang, sysroot
	}
	if req, rerr := toolchain.Required(); req || rerr != nil {
		t.Fatalf("%v; 'bash .ci/install-toolchains' installs it (%s=%s)", err, toolchain.RequireEnv, os.Getenv(toolchain.RequireEnv))
	}
	t.Skipf("%v; 'bash .ci/install-toolchains' installs it", err)
	return "", ""
}

// buildC builds src (a file under testdata) into a module, with mk/c.mk's flags.
func buildC(t *testing.T, src string) []byte {
	t.Helper()
	clang, sysroot := needClang(t)
	out := filepath.Join(t.TempDir(), "m.wasm")
	cmd := exec.Command(clang, "--target=wasm32-wasi", "--sysroot="+sysroot, "-mexec-model=reactor", "-O2",
		"-mbulk-memory", "-g0", "-Wall", "-Werror", "-Wl,--stack-first", "-Wl,--strip-all", "-I.",
		"-o", out, src)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("clang %s: %v\n%s", src, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func imports(t *testing.T, wasm []byte) []string {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		names = append(names, mod+"."+name)
	}
	return names
}

// ---- the test host ----

// keyState is a key's state: per variable a value, a list or a map (no TTL: expiry is the
// host's business), and its timers.
type keyState struct {
	vals   map[uint32][]byte
	lists  map[uint32][][]byte
	maps   map[uint32]map[string][]byte
	timers map[int64]bool
}

func newKeyState() *keyState {
	return &keyState{map[uint32][]byte{}, map[uint32][][]byte{}, map[uint32]map[string][]byte{}, map[int64]bool{}}
}

func (k *keyState) clone() *keyState {
	c := newKeyState()
	for i, v := range k.vals {
		c.vals[i] = v
	}
	for i, l := range k.lists {
		c.lists[i] = slices.Clone(l)
	}
	for i, m := range k.maps {
		c.maps[i] = map[string][]byte{}
		for mk, v := range m {
			c.maps[i][mk] = v
		}
	}
	for ts := range k.timers {
		c.timers[ts] = true
	}
	return c
}

type host struct {
	t      *testing.T
	mode   abi.TimeoutMode
	decls  []abi.VarDecl
	keys   map[string]*keyState // committed
	groups []string             // the current buffer's keys
	firing [][]int64
	work   []*keyState // each group's pending state
	cur    int
	refuse abi.Op   // refuse requests holding this op (0: none)
	reqs   [][]byte // every request
	mod    api.Module
}

func (h *host) groupBegin(_ context.Context, i uint32) {
	h.cur = int(i)
	ks := h.keys[h.groups[i]]
	if ks == nil {
		ks = newKeyState()
	}
	h.work[i] = ks.clone()
	for _, ts := range h.firing[i] { // a timer is deleted when it fires
		delete(h.work[i].timers, ts)
	}
}

func (h *host) state(_ context.Context, m api.Module, reqPtr, reqLen, respPtr, respCap uint32) int32 {
	req, ok := m.Memory().Read(reqPtr, reqLen)
	if !ok || h.cur < 0 {
		return abi.StateRefused
	}
	h.reqs = append(h.reqs, slices.Clone(req))
	ans, ok := h.apply(h.work[h.cur], req, true)
	if !ok {
		return abi.StateRefused
	}
	if uint32(len(ans)) <= respCap {
		m.Memory().Write(respPtr, ans)
	}
	return int32(len(ans))
}

// apply applies an op list to ks and returns the answers of its reads; false when refused.
func (h *host) apply(ks *keyState, ops []byte, readsOK bool) ([]byte, bool) {
	var ans []byte
	var o abi.DecodedOp
	r := abi.NewOpReader(ops)
	for {
		ok, err := r.Next(&o)
		if err != nil {
			h.t.Errorf("host: malformed op list: %v", err)
			return nil, false
		}
		if !ok {
			return ans, true
		}
		if o.Op == h.refuse || (o.Op.IsRead() && !readsOK) {
			return nil, false
		}
		if k := o.Op.VarKind(); k == 0 && h.mode == abi.TimeoutNone {
			return nil, false
		} else if k != 0 && (int(o.Var) >= len(h.decls) || h.decls[o.Var].Kind != k) {
			return nil, false
		}
		v := o.Var
		switch o.Op {
		case abi.OpValueGet:
			b, ok := ks.vals[v]
			ans = abi.AppendValueAnswer(ans, ok, b)
		case abi.OpValueSet:
			ks.vals[v] = slices.Clone(o.Value)
		case abi.OpValueClear:
			delete(ks.vals, v)
		case abi.OpListRead:
			l := ks.lists[v]
			var page [][]byte
			size, next := 0, uint64(0)
			for i := int(o.Cursor); i < len(l); i++ {
				if len(page) > 0 && size+4+len(l[i]) > int(o.MaxBytes) {
					next = uint64(i)
					break
				}
				page, size = append(page, l[i]), size+4+len(l[i])
			}
			ans = abi.AppendListReadAnswer(ans, page, next)
		case abi.OpListAppend, abi.OpListPut:
			if o.Op == abi.OpListPut {
				ks.lists[v] = nil
			}
			for el := range o.Elements() {
				ks.lists[v] = append(ks.lists[v], slices.Clone(el))
			}
		case abi.OpListClear:
			delete(ks.lists, v)
		case abi.OpListExists:
			ans = abi.AppendBoolAnswer(ans, len(ks.lists[v]) > 0)
		case abi.OpMapGet:
			b, ok := ks.maps[v][string(o.MapKey)]
			ans = abi.AppendValueAnswer(ans, ok, b)
		case abi.OpMapContains:
			_, ok := ks.maps[v][string(o.MapKey)]
			ans = abi.AppendBoolAnswer(ans, ok)
		case abi.OpMapSet:
			if ks.maps[v] == nil {
				ks.maps[v] = map[string][]byte{}
			}
			ks.maps[v][string(o.MapKey)] = slices.Clone(o.Value)
		case abi.OpMapRemove:
			delete(ks.maps[v], string(o.MapKey))
		case abi.OpMapRead:
			keys := sortedKeys(ks.maps[v])
			i := sort.SearchStrings(keys, string(o.MapCursor))
			var page []abi.MapEntry
			size, more := 0, false
			var next []byte
			for ; i < len(keys); i++ {
				k, b := keys[i], ks.maps[v][keys[i]]
				if len(page) > 0 && size+8+len(k)+len(b) > int(o.MaxBytes) {
					more, next = true, []byte(k)
					break
				}
				page, size = append(page, abi.MapEntry{Key: []byte(k), Value: b}), size+8+len(k)+len(b)
			}
			ans = abi.AppendMapReadAnswer(ans, page, more, next)
		case abi.OpMapClear:
			delete(ks.maps, v)
		case abi.OpMapExists:
			ans = abi.AppendBoolAnswer(ans, len(ks.maps[v]) > 0)
		case abi.OpTimerRegister:
			ks.timers[o.Ts] = true
		case abi.OpTimerDelete:
			delete(ks.timers, o.Ts)
		case abi.OpTimerList:
			ans = abi.AppendTimerListAnswer(ans, sortedTimers(ks.timers))
		}
	}
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedTimers(m map[int64]bool) []int64 {
	ts := make([]int64, 0, len(m))
	for t := range m {
		ts = append(ts, t)
	}
	slices.Sort(ts)
	return ts
}

// dump is a key's committed state as text.
func (h *host) dump(key string) string {
	ks := h.keys[key]
	if ks == nil {
		return ""
	}
	var parts []string
	for i, d := range h.decls {
		v := uint32(i)
		switch d.Kind {
		case abi.VarValue:
			if b, ok := ks.vals[v]; ok {
				parts = append(parts, fmt.Sprintf("%s=%s", d.Name, b))
			}
		case abi.VarList:
			if l := ks.lists[v]; len(l) > 0 {
				parts = append(parts, fmt.Sprintf("%s=%s", d.Name, l))
			}
		case abi.VarMap:
			if m := ks.maps[v]; len(m) > 0 {
				s := d.Name + "={"
				for _, k := range sortedKeys(m) {
					s += fmt.Sprintf("%s:%s,", k, m[k])
				}
				parts = append(parts, s+"}")
			}
		}
	}
	if len(ks.timers) > 0 {
		parts = append(parts, fmt.Sprintf("timers=%v", sortedTimers(ks.timers)))
	}
	return strings.Join(parts, " ")
}

// cache keeps the compiled modules across the tests' runtimes.
var cache = wazero.NewCompilationCache()

// start instantiates the module with the host's imports.
func start(t *testing.T, wasm []byte, mode abi.TimeoutMode) *host {
	t.Helper()
	ctx := context.Background()
	h := &host{t: t, mode: mode, keys: map[string]*keyState{}, cur: -1}
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	t.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	_, err := r.NewHostModuleBuilder("groupstate").
		NewFunctionBuilder().WithFunc(h.groupBegin).Export("group_begin").
		NewFunctionBuilder().WithFunc(func(context.Context, int32, uint32, uint32) {}).Export("log").
		NewFunctionBuilder().WithFunc(h.state).Export("state").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.mod, err = r.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithStartFunctions("_initialize").WithStderr(os.Stderr))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *host) call(fn string, in []byte) []byte {
	h.t.Helper()
	ctx := context.Background()
	res, err := h.mod.ExportedFunction("gs_alloc").Call(ctx, uint64(len(in)))
	if err != nil || res[0] == 0 {
		h.t.Fatalf("gs_alloc: %v %v", res, err)
	}
	p := uint32(res[0])
	h.mod.Memory().Write(p, in)
	res, err = h.mod.ExportedFunction(fn).Call(ctx, uint64(p), uint64(len(in)))
	if err != nil {
		h.t.Fatalf("%s: %v", fn, err)
	}
	ptr, n := abi.UnpackResult(res[0])
	out, ok := h.mod.Memory().Read(ptr, n)
	if !ok {
		h.t.Fatalf("%s: result out of memory", fn)
	}
	return slices.Clone(out)
}

func (h *host) abiVersion() uint64 {
	res, err := h.mod.ExportedFunction("gs_abi_version").Call(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return res[0]
}

func (h *host) init(version uint32, config string) (abi.Status, string) {
	h.t.Helper()
	out := h.call("gs_init", abi.AppendInit(nil, abi.Init{ABIVersion: version, Mode: h.mode, Flags: abi.InitHasWatermark,
		Name: []byte("test"), Config: []byte(config)}))
	st, msg, decls, err := abi.ParseInitResultV2(out)
	if err != nil {
		h.t.Fatalf("init result: %v", err)
	}
	h.decls = decls
	return st, string(msg)
}

type result struct {
	err   string // "" when the group succeeded
	emits []string
	ops   []byte
}

// process runs a v2 process buffer (built by the callback) and commits the groups that
// succeeded, as the host will.
func (h *host) process(in []byte) []result {
	h.t.Helper()
	ir, err := abi.NewInputReaderV2(in)
	if err != nil {
		h.t.Fatal(err)
	}
	h.groups, h.firing, h.cur = nil, nil, -1
	var g abi.GroupV2
	for {
		ok, err := ir.Next(&g)
		if err != nil {
			h.t.Fatal(err)
		}
		if !ok {
			break
		}
		h.groups = append(h.groups, string(g.Key))
		h.firing = append(h.firing, slices.Collect(g.Timers()))
	}
	h.work = make([]*keyState, len(h.groups))
	rr, err := abi.NewResultReaderV2(h.call("gs_process", in))
	if err != nil {
		h.t.Fatalf("result: %v", err)
	}
	var res []result
	var gr abi.GroupResultV2
	for i := 0; ; i++ {
		ok, err := rr.Next(&gr)
		if err != nil {
			h.t.Fatalf("result: %v", err)
		}
		if !ok {
			break
		}
		r := result{ops: slices.Clone(gr.Ops)}
		if gr.Status != abi.StatusOK {
			r.err = string(gr.Error)
		}
		for e := range gr.Emits() {
			r.emits = append(r.emits, string(e))
		}
		res = append(res, r)
		if gr.Status == abi.StatusOK {
			if _, ok := h.apply(h.work[i], gr.Ops, false); !ok {
				h.t.Fatalf("group %d: result ops refused", i)
			}
			h.keys[h.groups[i]] = h.work[i]
		}
	}
	if len(res) != len(h.groups) {
		h.t.Fatalf("%d results for %d groups", len(res), len(h.groups))
	}
	return res
}

func header(T, W int64, n int) []byte {
	return abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: uint32(n), ProcessingTimeMs: T, WatermarkMs: W})
}

// rows runs one DATA group of key "k" with the given rows (JSON objects) at T=1000.
func (h *host) rows(rows ...string) result {
	h.t.Helper()
	rs := make([][]byte, len(rows))
	for i, r := range rows {
		if !json.Valid([]byte(r)) {
			h.t.Fatalf("row %q is not JSON", r)
		}
		rs[i] = []byte(r)
	}
	return h.process(abi.AppendDataGroup(header(1000, 500, 1), []byte(`"k"`), rs))[0]
}

func emitsOf(r result) string { return strings.Join(r.emits, " ") }

// ---- tests ----

func TestV2ModuleShape(t *testing.T) {
	wasm := buildC(t, "testdata/v2.c")
	if got := imports(t, wasm); !slices.Contains(got, "groupstate.state") {
		t.Errorf("v2 module imports %v, want groupstate.state among them", got)
	}
	h := start(t, wasm, abi.TimeoutProcessingTime)
	if v := h.abiVersion(); v != 2 {
		t.Errorf("gs_abi_version = %d, want 2", v)
	}
	st, msg := h.init(abi.Version2, "{}")
	if st != abi.StatusOK {
		t.Fatalf("init: %d %q", st, msg)
	}
	want := []abi.VarDecl{{Name: "count", Kind: abi.VarValue}, {Name: "events", Kind: abi.VarList, TTLMs: 60000},
		{Name: "seen", Kind: abi.VarMap}}
	if !slices.Equal(h.decls, want) {
		t.Errorf("declarations %+v, want %+v", h.decls, want)
	}

	h = start(t, wasm, abi.TimeoutProcessingTime)
	if st, msg := h.init(abi.Version, "{}"); st == abi.StatusOK || !strings.Contains(msg, "module implements version 2") {
		t.Errorf("init with host version 1: %d %q", st, msg)
	}
	h = start(t, wasm, abi.TimeoutProcessingTime)
	if st, msg := h.init(abi.Version2, `{"bad_decl": true}`); st == abi.StatusOK || msg != `groupstate: gs_value_state("Bad-Name"): a name starts with a letter a-z` {
		t.Errorf("init with a bad declaration: %d %q", st, msg)
	}
}

// TestV1ModulesHaveNoStateImport: a module built without GS_ABI_V2 (the committed C samples,
// and a v1 handler built here with the current header) imports no groupstate.state and
// reports version 1.
func TestV1ModulesHaveNoStateImport(t *testing.T) {
	for _, f := range []string{"../../samples/logincount/c/logincount.wasm", "../../samples/sessions/c/sessions.wasm"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := imports(t, b); slices.Contains(got, "groupstate.state") {
			t.Errorf("%s imports %v", f, got)
		}
	}
	wasm := buildC(t, "testdata/v1.c")
	if got := imports(t, wasm); slices.Contains(got, "groupstate.state") {
		t.Errorf("v1 module imports %v", got)
	}
	h := start(t, wasm, abi.TimeoutNone)
	if v := h.abiVersion(); v != 1 {
		t.Errorf("gs_abi_version = %d, want 1", v)
	}
}

func newV2(t *testing.T, mode abi.TimeoutMode, config string) *host {
	t.Helper()
	h := start(t, buildOnce(t), mode)
	if st, msg := h.init(abi.Version2, config); st != abi.StatusOK {
		t.Fatalf("init: %d %q", st, msg)
	}
	return h
}

var v2wasm []byte

func buildOnce(t *testing.T) []byte {
	if v2wasm == nil {
		v2wasm = buildC(t, "testdata/v2.c")
	}
	return v2wasm
}

func TestV2Values(t *testing.T) {
	h := newV2(t, abi.TimeoutProcessingTime, "{}")
	r := h.rows(`{"op":"value_get"}`, `{"op":"value_exists"}`, `{"op":"value_set","a":"41"}`,
		`{"op":"value_set","a":"42"}`, `{"op":"value_get"}`, `{"op":"times"}`)
	if r.err != "" || emitsOf(r) != `{"tag":"absent","v":""} {"tag":"exists","v":0} {"tag":"value","v":"42"} {"tag":"T","v":1000} {"tag":"W","v":500}` {
		t.Fatalf("first call: %+v", r)
	}
	if len(r.ops) != 0 {
		t.Errorf("the writes were sent with the read; the result's ops are %x", r.ops)
	}
	// The second VALUE_SET went with the VALUE_GET in one request, after the first.
	if n := len(h.reqs); n != 3 || h.reqs[2][0] != byte(abi.OpValueSet) || h.reqs[2][len(h.reqs[2])-5] != byte(abi.OpValueGet) {
		t.Errorf("requests %x", h.reqs)
	}
	if got := h.dump(`"k"`); got != "count=42" {
		t.Errorf("state %q", got)
	}
	r = h.rows(`{"op":"value_clear"}`, `{"op":"value_set","a":"7"}`)
	if r.err != "" || string(r.ops) != string(opList(func(w *abi.OpWriter) { w.ValueClear(0); w.ValueSet(0, []byte("7")) })) {
		t.Errorf("writes only: %+v", r)
	}
	if got := h.dump(`"k"`); got != "count=7" {
		t.Errorf("state %q", got)
	}
}

func opList(f func(w *abi.OpWriter)) []byte {
	var w abi.OpWriter
	f(&w)
	return w.Bytes()
}

// TestV2BigAnswer: an answer bigger than the buffer is asked for again, reads only (the
// writes were applied with the first request).
func TestV2BigAnswer(t *testing.T) {
	h := newV2(t, abi.TimeoutProcessingTime, "{}")
	r := h.rows(`{"op":"list_append","a":"e1"}`, `{"op":"value_big","n":200000}`, `{"op":"value_len"}`)
	if r.err != "" || emitsOf(r) != `{"tag":"len","v":200000}` {
		t.Fatalf("%+v", r)
	}
	if len(h.reqs) != 2 || h.reqs[0][0] != byte(abi.OpListAppend) || !slices.Equal(h.reqs[1], opList(func(w *abi.OpWriter) { w.ValueGet(0) })) {
		t.Errorf("requests: %d, first op %x, second %x", len(h.reqs), h.reqs[0][0], h.reqs[len(h.reqs)-1])
	}
	if got := h.dump(`"k"`); got != "count="+strings.Repeat("x", 200000)+" events=[e1]" {
		t.Errorf("state %.80q", got)
	}
}

func TestV2Lists(t *testing.T) {
	h := newV2(t, abi.TimeoutProcessingTime, `{"page_bytes": 16}`)
	r := h.rows(`{"op":"list_exists"}`, `{"op":"list_append","a":"one"}`, `{"op":"list_append2","a":"two","b":"three"}`,
		`{"op":"list_exists"}`, `{"op":"list_all"}`)
	if r.err != "" || emitsOf(r) != `{"tag":"exists","v":0} {"tag":"exists","v":1} {"tag":"elem","v":"one"} {"tag":"elem","v":"two"} {"tag":"elem","v":"three"}` {
		t.Fatalf("%+v", r)
	}
	if reads := countOps(h.reqs, abi.OpListRead); reads != 2 { // 16 bytes a page: one+two (7+7), then three
		t.Errorf("%d LIST_READ requests, want 2", reads)
	}
	h.reqs = nil
	r = h.rows(`{"op":"list_first"}`)
	if r.err != "" || emitsOf(r) != `{"tag":"elem","v":"one"}` || len(h.reqs) != 1 {
		t.Errorf("stopping early: %+v, %d requests", r, len(h.reqs))
	}
	r = h.rows(`{"op":"list_put","a":"x","b":"y","n":2}`, `{"op":"list_all"}`, `{"op":"list_clear"}`, `{"op":"list_append","a":"z"}`)
	if r.err != "" || emitsOf(r) != `{"tag":"elem","v":"x"} {"tag":"elem","v":"y"}` {
		t.Errorf("%+v", r)
	}
	if got := h.dump(`"k"`); got != "events=[z]" {
		t.Errorf("state %q", got)
	}
	r = h.rows(`{"op":"list_put","n":0}`, `{"op":"list_exists"}`)
	if r.err != "" || emitsOf(r) != `{"tag":"exists","v":0}` {
		t.Errorf("put of nothing: %+v", r)
	}
}

func TestV2Maps(t *testing.T) {
	h := newV2(t, abi.TimeoutProcessingTime, `{"page_bytes": 20}`)
	r := h.rows(`{"op":"map_exists"}`, `{"op":"map_set","a":"b","b":"2"}`, `{"op":"map_set","a":"a","b":"1"}`,
		`{"op":"map_set","a":"c","b":"3"}`, `{"op":"map_get","a":"a"}`, `{"op":"map_get","a":"zz"}`,
		`{"op":"map_contains","a":"c"}`, `{"op":"map_remove","a":"c"}`, `{"op":"map_contains","a":"c"}`,
		`{"op":"map_set","a":"d","b":"4"}`, `{"op":"map_exists"}`, `{"op":"map_all"}`)
	want := `{"tag":"exists","v":0} {"tag":"value","v":"1"} {"tag":"absent","v":"zz"} {"tag":"contains","v":1} ` +
		`{"tag":"contains","v":0} {"tag":"exists","v":1} {"k":"a","v":"1"} {"k":"b","v":"2"} {"k":"d","v":"4"}`
	if r.err != "" || emitsOf(r) != want {
		t.Fatalf("%+v", r)
	}
	if got := h.dump(`"k"`); got != "seen={a:1,b:2,d:4,}" {
		t.Errorf("state %q", got)
	}
	r = h.rows(`{"op":"map_clear"}`, `{"op":"map_all"}`)
	if r.err != "" || len(r.emits) != 0 || h.dump(`"k"`) != "" {
		t.Errorf("clear: %+v %q", r, h.dump(`"k"`))
	}
}

func TestV2Timers(t *testing.T) {
	h := newV2(t, abi.TimeoutProcessingTime, "{}")
	r := h.rows(`{"op":"timer_register","n":1001}`, `{"op":"timer_register","n":1002}`, `{"op":"timer_register","n":1003}`,
		`{"op":"timer_register","n":1003}`, `{"op":"timer_register","n":5000}`, `{"op":"timer_delete","n":5000}`,
		`{"op":"value_set","a":"9"}`, `{"op":"timers"}`)
	if r.err != "" || emitsOf(r) != `{"tag":"timer","v":1001} {"tag":"timer","v":1002} {"tag":"timer","v":1003}` {
		t.Fatalf("%+v", r)
	}
	// 1001 deletes 1002 (skipped in this group) and registers it again (a new timer).
	res := h.process(abi.AppendTimersGroup(header(2000, 0, 1), []byte(`"k"`), []int64{1001, 1002, 1003}))
	if res[0].err != "" || emitsOf(res[0]) != `{"tag":"fired","v":1001} {"tag":"fired","v":1003} {"tag":"count","v":"9"}` {
		t.Errorf("timers group: %+v", res[0])
	}
	if got := h.dump(`"k"`); got != "count=9 timers=[1002]" {
		t.Errorf("state %q", got)
	}
	// A failing timer call fails the group: nothing of it is kept, later timers do not run.
	h.rows(`{"op":"timer_register","n":2007}`, `{"op":"timer_register","n":2008}`)
	res = h.process(abi.AppendTimersGroup(header(3000, 0, 1), []byte(`"k"`), []int64{1002, 2007, 2008}))
	if res[0].err != "timer 7 fails" || len(res[0].emits) != 0 {
		t.Errorf("failing timer: %+v", res[0])
	}
	if got := h.dump(`"k"`); got != "count=9 timers=[1002 2007 2008]" {
		t.Errorf("state after a failed group %q", got)
	}

	h = newV2(t, abi.TimeoutNone, "{}")
	r = h.rows(`{"op":"timers"}`, `{"op":"timer_register","n":5}`)
	if r.err != "groupstate: timers need timeout processing_time or event_time in the deployment spec" {
		t.Errorf("timers under timeout none: %+v", r)
	}
}

func TestV2Failures(t *testing.T) {
	h := newV2(t, abi.TimeoutProcessingTime, "{}")
	// A refused request fails the call whatever the callback returns (map_contains ignores it).
	h.refuse = abi.OpMapContains
	r := h.rows(`{"op":"value_set","a":"1"}`, `{"op":"map_contains","a":"x"}`, `{"op":"value_get"}`)
	if r.err != "groupstate: the host refused a state request (see the host's log)" || len(r.emits) != 0 || len(r.ops) != 0 {
		t.Errorf("refused: %+v", r)
	}
	if got := h.dump(`"k"`); got != "" {
		t.Errorf("state %q", got)
	}
	h.refuse = 0
	r = h.rows(`{"op":"value_set","a":"1"}`, `{"op":"fail"}`)
	if r.err != "asked to fail" || len(r.ops) != 0 || h.dump(`"k"`) != "" {
		t.Errorf("failed call: %+v", r)
	}
	r = h.rows(`{"op":"v1_update"}`)
	if !strings.Contains(r.err, "gs_state_update is the ABI v1 state handle") {
		t.Errorf("v1 update: %+v", r)
	}
	// A buffer mixing kinds is a whole-call error.
	in := abi.AppendTimersGroup(abi.AppendDataGroup(header(1, 0, 2), []byte(`"a"`), [][]byte{[]byte(`{}`)}), []byte(`"b"`), []int64{1})
	if _, err := abi.NewResultReaderV2(h.call("gs_process", in)); err == nil || !strings.Contains(err.Error(), "different kinds") {
		t.Errorf("mixed kinds: %v", err)
	}
	in = abi.AppendTimersGroup(header(1, 0, 1), []byte(`"b"`), []int64{2, 1})
	if _, err := abi.NewResultReaderV2(h.call("gs_process", in)); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Errorf("timers out of order: %v", err)
	}
}

func TestV2InitialState(t *testing.T) {
	h := newV2(t, abi.TimeoutProcessingTime, "{}")
	in := header(1000, 0, 3)
	in = abi.AppendInitialGroup(in, []byte(`"a"`), []byte(`{"count": {"n": 5}, "events": [1, {"e": "x y"}], "seen": {"k\u0031": 1, "k2": [2]}}`))
	in = abi.AppendInitialGroup(in, []byte(`"b"`), []byte(`{"count": null, "nope": 1, "other": 2}`))
	in = abi.AppendInitialGroup(in, []byte(`"c"`), []byte(`{"events": [1, null]}`))
	res := h.process(in)
	if res[0].err != "" {
		t.Errorf("a: %+v", res[0])
	}
	if got := h.dump(`"a"`); got != `count={"n":5} events=[1 {"e":"x y"}] seen={k1:1,k2:[2],}` {
		t.Errorf("a: %q", got)
	}
	if want := `groupstate: initial state names undeclared state variables ["nope" "other"] (declared: count, events, seen)`; res[1].err != want {
		t.Errorf("b: %q, want %q", res[1].err, want)
	}
	if !strings.Contains(res[2].err, "initial state of events: an element is null") {
		t.Errorf("c: %q", res[2].err)
	}
}

// countOps counts the ops op in the requests.
func countOps(reqs [][]byte, op abi.Op) int {
	n := 0
	var o abi.DecodedOp
	for _, q := range reqs {
		r := abi.NewOpReader(q)
		for ok, err := r.Next(&o); ok && err == nil; ok, err = r.Next(&o) {
			if o.Op == op {
				n++
			}
		}
	}
	return n
}

// ---- several named inputs (init flag HAS_INPUTS) ----

// initBuf is an init buffer v2 (abi/README.md 4.1) under timeout event_time with flags and,
// when flags has abi.InitHasInputs, the input names after the config. It is written by hand so
// that it can also be malformed.
func initBuf(flags uint32, names ...string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, abi.Version2)
	b = binary.LittleEndian.AppendUint32(b, uint32(abi.TimeoutEventTime))
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = appendBytes(b, "test")
	b = appendBytes(b, "{}")
	if flags&abi.InitHasInputs != 0 {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(names)))
		for _, n := range names {
			b = appendBytes(b, n)
		}
	}
	return b
}

func appendBytes(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint32(b, uint32(len(s))), s...)
}

// inputRow is a row of a DATA group with inputs: the index of its input, then the row.
type inputRow struct {
	input uint32
	row   string
}

// appendInputsGroup appends a DATA group whose rows carry the index of their input (abi/README.md
// 9.3 with HAS_INPUTS).
func appendInputsGroup(b []byte, key string, rows ...inputRow) []byte {
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = appendBytes(b, key)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rows)))
	for _, r := range rows {
		b = binary.LittleEndian.AppendUint32(b, r.input)
		b = appendBytes(b, r.row)
	}
	return b
}

// initRaw runs gs_init with buf and returns its status and message.
func (h *host) initRaw(buf []byte) (abi.Status, string) {
	h.t.Helper()
	st, msg, _, err := abi.ParseInitResultV2(h.call("gs_init", buf))
	if err != nil {
		h.t.Fatalf("init result: %v", err)
	}
	return st, string(msg)
}

// processRaw runs a process buffer of groups for keys (a processor that reads no state), and
// returns each group's emits or error; a whole-call error is returned as err.
func (h *host) processRaw(in []byte, keys ...string) ([]result, error) {
	h.t.Helper()
	h.groups, h.firing, h.cur = keys, make([][]int64, len(keys)), -1
	h.work = make([]*keyState, len(keys))
	rr, err := abi.NewResultReaderV2(h.call("gs_process", in))
	if err != nil {
		return nil, err
	}
	var res []result
	var gr abi.GroupResultV2
	for {
		ok, err := rr.Next(&gr)
		if err != nil {
			h.t.Fatalf("result: %v", err)
		}
		if !ok {
			return res, nil
		}
		r := result{ops: slices.Clone(gr.Ops)}
		if gr.Status != abi.StatusOK {
			r.err = string(gr.Error)
		}
		for e := range gr.Emits() {
			r.emits = append(r.emits, string(e))
		}
		res = append(res, r)
	}
}

var inputsWasm []byte

func newInputs(t *testing.T) *host {
	t.Helper()
	if inputsWasm == nil {
		inputsWasm = buildC(t, "testdata/inputs.c")
	}
	return start(t, inputsWasm, abi.TimeoutEventTime)
}

// TestV2InputsAtInit: the processor's init sees the input names in the spec's order, none
// without HAS_INPUTS, and may refuse them.
func TestV2InputsAtInit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		init    []byte
		wantErr string
		want    string // the first emit of a DATA call: the names at init
	}{
		{"two inputs", initBuf(abi.InitHasWatermark|abi.InitHasInputs, "impressions", "clicks"), "", `{"inputs":"impressions,clicks"}`},
		{"one input", initBuf(abi.InitHasInputs, "a"), "", `{"inputs":"a"}`},
		{"no inputs", initBuf(abi.InitHasWatermark), "", `{"inputs":""}`},
		{"refused by the processor", initBuf(abi.InitHasInputs, "a", "refused"), "inputs must not be named refused", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newInputs(t)
			st, msg := h.initRaw(tc.init)
			if tc.wantErr != "" {
				if st == abi.StatusOK || msg != tc.wantErr {
					t.Fatalf("init: %d %q, want the error %q", st, msg, tc.wantErr)
				}
				return
			}
			if st != abi.StatusOK {
				t.Fatalf("init: %d %q", st, msg)
			}
			in := abi.AppendDataGroup(header(1000, 0, 1), []byte(`"k"`), [][]byte{[]byte(`{}`)})
			if binary.LittleEndian.Uint32(tc.init[8:])&abi.InitHasInputs != 0 {
				in = appendInputsGroup(header(1000, 0, 1), `"k"`, inputRow{0, `{}`})
			}
			res, err := h.processRaw(in, `"k"`)
			if err != nil || len(res) != 1 || res[0].err != "" || len(res[0].emits) == 0 || res[0].emits[0] != tc.want {
				t.Errorf("process: %+v %v, want the first emit %s", res, err, tc.want)
			}
		})
	}
}

// TestV2InputsInitRefused: an init flag the SDK does not implement, and malformed input names,
// fail the init.
func TestV2InputsInitRefused(t *testing.T) {
	truncated := initBuf(abi.InitHasInputs, "a")
	truncated = truncated[:len(truncated)-1]
	for _, tc := range []struct {
		name string
		init []byte
		want string
	}{
		{"unknown flag", initBuf(abi.InitHasWatermark | 4), "groupstate: host sets init flags 0x4 this SDK does not implement (rebuild with a newer SDK)"},
		{"unknown flags with inputs", initBuf(abi.InitHasInputs|0x30, "a"), "groupstate: host sets init flags 0x30 this SDK does not implement (rebuild with a newer SDK)"},
		{"high flag", initBuf(1 << 31), "groupstate: host sets init flags 0x80000000 this SDK does not implement (rebuild with a newer SDK)"},
		{"no names", initBuf(abi.InitHasInputs), "groupstate: init buffer malformed: input_count 0 (want 1 to 16)"},
		{"17 inputs", initBuf(abi.InitHasInputs, strings.Split("abcdefghijklmnopq", "")...), "groupstate: init buffer malformed: input_count 17 (want 1 to 16)"},
		{"an empty name", initBuf(abi.InitHasInputs, "a", ""), "groupstate: init buffer malformed: input 1: name is empty"},
		{"a long name", initBuf(abi.InitHasInputs, strings.Repeat("a", 33)), "groupstate: init buffer malformed: input 0: name is longer than 32 bytes"},
		{"a name with a capital", initBuf(abi.InitHasInputs, "Clicks"), "groupstate: init buffer malformed: input 0: name does not start with a letter a-z"},
		{"a name with a dot", initBuf(abi.InitHasInputs, "a_b-c.d"), "groupstate: init buffer malformed: input 0: name has a byte other than a-z, 0-9, _ and - at offset 5"},
		{"a name not UTF-8", initBuf(abi.InitHasInputs, "a\xff"), "groupstate: init buffer malformed: input 0: name has a byte other than a-z, 0-9, _ and - at offset 1"},
		{"a name twice", initBuf(abi.InitHasInputs, "a", "b", "a"), `groupstate: init buffer malformed: input 2: name "a" already used by input 0`},
		{"a name truncated", truncated, "groupstate: init buffer malformed"},
		{"trailing bytes", append(initBuf(abi.InitHasInputs, "a"), 0), "groupstate: init buffer malformed"},
		{"names without the flag", appendBytes(binary.LittleEndian.AppendUint32(initBuf(0), 1), "a"), "groupstate: init buffer malformed"},
		{"a count larger than the buffer", binary.LittleEndian.AppendUint32(initBuf(0)[:12], 0), "groupstate: init buffer malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newInputs(t)
			if st, msg := h.initRaw(tc.init); st == abi.StatusOK || msg != tc.want {
				t.Errorf("init: %d %q, want %q", st, msg, tc.want)
			}
		})
	}
	h := newInputs(t)
	b := binary.LittleEndian.AppendUint32(initBuf(abi.InitHasInputs)[:0], 0)
	b = append(b, initBuf(abi.InitHasInputs)[4:]...) // version 0 is reported before the flags
	if st, msg := h.initRaw(b); st == abi.StatusOK || !strings.Contains(msg, "module implements version 2") {
		t.Errorf("init of version 0: %d %q", st, msg)
	}
}

// TestV2InputsPerRow: each row's input name, in the buffer's order; "" without HAS_INPUTS.
func TestV2InputsPerRow(t *testing.T) {
	h := newInputs(t)
	if st, msg := h.initRaw(initBuf(abi.InitHasWatermark|abi.InitHasInputs, "impressions", "clicks")); st != abi.StatusOK {
		t.Fatalf("init: %d %q", st, msg)
	}
	in := appendInputsGroup(header(1000, 0, 2), `"ad1"`, inputRow{1, `{"c":1}`}, inputRow{0, `{"i":1}`}, inputRow{1, `{"c":2}`})
	in = appendInputsGroup(in, `7`, inputRow{0, `{"i":2}`})
	res, err := h.processRaw(in, `"ad1"`, `7`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"inputs":"impressions,clicks"} {"input":"clicks","row":{"c":1}} {"input":"impressions","row":{"i":1}} {"input":"clicks","row":{"c":2}}`,
		`{"inputs":"impressions,clicks"} {"input":"impressions","row":{"i":2}}`,
	}
	for i, w := range want {
		if res[i].err != "" || emitsOf(res[i]) != w {
			t.Errorf("group %d: %+v, want %s", i, res[i], w)
		}
	}
	// TIMERS groups are unchanged.
	if res, err := h.processRaw(abi.AppendTimersGroup(header(1000, 5, 1), []byte(`"ad1"`), []int64{3}), `"ad1"`); err != nil || res[0].err != "" {
		t.Errorf("timers: %+v %v", res, err)
	}

	h = newInputs(t)
	if st, msg := h.initRaw(initBuf(abi.InitHasWatermark)); st != abi.StatusOK {
		t.Fatalf("init: %d %q", st, msg)
	}
	res, err = h.processRaw(abi.AppendDataGroup(header(1000, 0, 1), []byte(`"a"`), [][]byte{[]byte(`{"c":1}`)}), `"a"`)
	if err != nil || res[0].err != "" || emitsOf(res[0]) != `{"inputs":""} {"input":"","row":{"c":1}}` {
		t.Errorf("without inputs: %+v %v", res, err)
	}
}

// TestV2InputsBadIndex: a row whose input index is not below the number of inputs makes the
// buffer malformed: a whole-call error.
func TestV2InputsBadIndex(t *testing.T) {
	h := newInputs(t)
	if st, msg := h.initRaw(initBuf(abi.InitHasInputs, "impressions", "clicks")); st != abi.StatusOK {
		t.Fatalf("init: %d %q", st, msg)
	}
	noIndex := abi.AppendDataGroup(header(1, 0, 1), []byte(`"a"`), [][]byte{[]byte(`x`)}) // index 1, then a short length
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"index out of range", appendInputsGroup(appendInputsGroup(header(1, 0, 2), `"a"`, inputRow{0, `{}`}), `"b"`, inputRow{1, `{}`}, inputRow{2, `{}`}),
			"groupstate: process buffer malformed at group 1: row 1: input index 2 out of range (the deployment has 2 inputs)"},
		{"huge index", appendInputsGroup(header(1, 0, 1), `"a"`, inputRow{math.MaxUint32, `{}`}),
			"groupstate: process buffer malformed at group 0: row 0: input index 4294967295 out of range (the deployment has 2 inputs)"},
		{"a row without its index", noIndex, "groupstate: process buffer malformed at group 0: short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.processRaw(tc.in, `"a"`, `"b"`)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want the whole-call error %q", err, tc.want)
			}
		})
	}
}
