package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/internal/pybuild"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// TestPythonSharedCompilation: two different Python handlers (an ABI v1 function and an ABI
// v2 processor) compile once between them: the host compiles the Python runtime module, the
// same for both, and writes each handler's sources into its instances' memory, where their
// init finds them (the v2 handler's declaration arrives).
func TestPythonSharedCompilation(t *testing.T) {
	v1, err := pybuild.Build(map[string][]byte{"a.py": []byte("def handle(key, rows, state):\n    yield {'n': 1}\n")}, "a")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := pybuild.Build(map[string][]byte{"b.py": []byte(`
from groupstate import StatefulProcessor

class B(StatefulProcessor):
    def init(self, handle):
        self.n = handle.getValueState("n")
`)}, "b")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cache, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close(context.Background())
	cached := func() int {
		n := 0
		if err := walkFiles(dir, func() { n++ }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var after []int
	for _, c := range []struct {
		wasm    []byte
		version uint32
		decls   int
	}{{v1, abi.Version, 0}, {v2, abi.Version2, 1}} {
		cfg := testConfig(c.wasm)
		cfg.Cache = cache
		h, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if h.version != c.version || len(h.decls) != c.decls {
			t.Errorf("ABI version %d with %d declarations, want %d with %d", h.version, len(h.decls), c.version, c.decls)
		}
		h.Close(context.Background())
		after = append(after, cached())
	}
	if after[0] == 0 || after[1] != after[0] {
		t.Errorf("compiled modules in the cache after each handler: %v, want one compilation for both", after)
	}
}

// walkFiles calls f once per regular file under dir.
func walkFiles(dir string, f func()) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := walkFiles(dir+"/"+e.Name(), f); err != nil {
				return err
			}
		} else {
			f()
		}
	}
	return nil
}

// BenchmarkPythonNewHandler: starting a host (compile, validate, first instance and its
// gs_init) for a Python handler that no host has run yet, with a compilation cache that has
// seen another Python handler. With the sources written at instantiation, that is a cache
// hit; before, every handler compiled CPython in full.
func BenchmarkPythonNewHandler(b *testing.B) {
	cache := wazero.NewCompilationCache()
	defer cache.Close(context.Background())
	build := func(i int) []byte {
		src := fmt.Sprintf("N = %d\n\ndef handle(key, rows, state):\n    yield {'n': N}\n", i)
		wasm, err := pybuild.Build(map[string][]byte{"h.py": []byte(src)}, "h")
		if err != nil {
			b.Fatal(err)
		}
		return wasm
	}
	start := func(wasm []byte) {
		cfg := testConfig(wasm)
		cfg.Cache = cache
		h, err := New(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		h.Close(context.Background())
	}
	start(build(-1))
	i := 0
	for b.Loop() {
		b.StopTimer()
		wasm := build(i)
		i++
		b.StartTimer()
		start(wasm)
	}
}

// TestPythonCloseNotCalled: a StatefulProcessor's close() is not called when its instance is
// released or its host closed (the ABI has no shutdown export, abi/README.md 3.1), while its
// init is: both log, and only init's line reaches the host's log.
func TestPythonCloseNotCalled(t *testing.T) {
	wasm, err := pybuild.Build(map[string][]byte{"c.py": []byte(`
import groupstate
from groupstate import StatefulProcessor

class C(StatefulProcessor):
    def init(self, handle):
        groupstate.log("init ran")

    def close(self):
        groupstate.log("close ran")
`)}, "c")
	if err != nil {
		t.Fatal(err)
	}
	var log safeBuffer
	cfg := testConfig(wasm)
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.Release(context.Background()); n != 1 {
		t.Fatalf("Release closed %d instances, want the first", n)
	}
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := log.String(); !strings.Contains(got, "init ran") || strings.Contains(got, "close ran") {
		t.Fatalf("host log:\n%s\nwant init's line and not close's", got)
	}
}

// safeBuffer is a bytes.Buffer safe for concurrent writes.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPythonFrozenStart: once an ABI v1 handler's instance started, the objects of its start
// (the SDK, the handler's module) are frozen out of the garbage collector's sight (gc.freeze),
// so that collections during calls walk only the calls' objects.
func TestPythonFrozenStart(t *testing.T) {
	wasm, err := pybuild.Build(map[string][]byte{"f.py": []byte("import gc\n\ndef handle(key, rows, state):\n    yield {'frozen': gc.get_freeze_count()}\n")}, "f")
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), testConfig(wasm))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	res := make([]handler.Result, 1)
	c := &handler.Call{ProcessingTimeMs: 1000, Groups: []handler.Group{{Key: []byte(`"a"`), Rows: [][]byte{[]byte(`{}`)}}}}
	if err := h.Process(context.Background(), c, res); err != nil || res[0].Err != nil || len(res[0].Emits) != 1 {
		t.Fatalf("call: %v, %+v", err, res[0])
	}
	if got := string(res[0].Emits[0]); got == `{"frozen":0}` || !strings.HasPrefix(got, `{"frozen":`) {
		t.Errorf("the handler saw %s, want a frozen count above 0", got)
	}
}

// TestPythonStartImportsLittle: an instance of a Python handler starts without importing json,
// re or enum (tens of milliseconds of every instance's start: the SDK decodes with json's C
// scanner), whether it is an ABI v1 function or an ABI v2 processor; each handler fails its
// start if they are there.
func TestPythonStartImportsLittle(t *testing.T) {
	const check = `
import sys
_loaded = sorted(m for m in ("json", "re", "enum") if m in sys.modules)
if _loaded:
    raise RuntimeError("imported at start: " + ", ".join(_loaded))
`
	for name, src := range map[string]string{
		"v1": check + "\ndef handle(key, rows, state):\n    yield {'n': 1}\n",
		"v2": `
from groupstate import StatefulProcessor
` + check + `
class P(StatefulProcessor):
    def init(self, handle):
` + strings.ReplaceAll(check, "\n", "\n        ") + `
        self.n = handle.getValueState("n")
`,
	} {
		t.Run(name, func(t *testing.T) { startPython(t, src) })
	}
}

// startPython starts a host of the Python handler src (h.py) and closes it, failing t if the
// handler's start fails.
func startPython(t *testing.T, src string) {
	t.Helper()
	wasm, err := pybuild.Build(map[string][]byte{"h.py": []byte(src)}, "h")
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), testConfig(wasm))
	if err != nil {
		t.Fatal(err)
	}
	h.Close(context.Background())
}

// TestPythonLoads: the SDK's JSON decoding (rows, keys and state values of a StatefulProcessor)
// reads what json.loads reads, whitespace around the document included, and refuses what it
// refuses with json's own error; the handler's start fails if not.
func TestPythonLoads(t *testing.T) {
	const src = `
from groupstate import _loads
for text, want in ((b'{"a":1}', {"a": 1}), (b' {"a": [1, 2.5]}\n', {"a": [1, 2.5]}), (b'7', 7),
                   (b'"x" ', "x"), (b'\t\r\nnull', None), (b'NaN', float("nan")), ("[]", [])):
    got = _loads(text)
    if repr(got) != repr(want):
        raise AssertionError(f"_loads({text!r}) = {got!r}, want {want!r}")
for text in (b"", b" ", b"{", b'{"a":1} x', b"1 2"):
    try:
        _loads(text)
    except ValueError as e:
        if type(e).__name__ != "JSONDecodeError":
            raise AssertionError(f"_loads({text!r}) raised {e!r}, want json's JSONDecodeError")
    else:
        raise AssertionError(f"_loads({text!r}) did not fail")

def handle(key, rows, state):
    yield {}
`
	startPython(t, src)
}
