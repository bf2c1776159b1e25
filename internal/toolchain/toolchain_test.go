package toolchain_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/internal/toolchain"
)

// write creates files (relative, slash-separated) under dir with content "x".
func write(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDetect: the language of a project from its files, in Detect's order.
func TestDetect(t *testing.T) {
	tests := []struct {
		files []string
		want  toolchain.Lang
		err   error
	}{
		{[]string{"go.mod", "main.go"}, toolchain.Go, nil},
		{[]string{"go.mod", "x.c"}, toolchain.Go, nil}, // cgo helpers do not make it C
		{[]string{"Cargo.toml", "src/lib.rs"}, toolchain.Rust, nil},
		{[]string{"src/lib.rs", "Makefile"}, toolchain.Rust, nil}, // a groupstate init project
		{[]string{"package.json", "index.ts"}, toolchain.AssemblyScript, nil},
		{[]string{"asconfig.json"}, toolchain.AssemblyScript, nil},
		{[]string{"logins.ts", "Makefile"}, toolchain.AssemblyScript, nil},
		{[]string{"types.d.ts", "logins.c"}, toolchain.C, nil}, // declarations are no source
		{[]string{"logins.c", "Makefile"}, toolchain.C, nil},
		{[]string{"README.md", "logins.yaml"}, "", toolchain.ErrNoProject},
		{nil, "", toolchain.ErrNoProject},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		write(t, dir, tc.files...)
		got, err := toolchain.Detect(dir)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%v: Detect = %q, %v; want %q, %v", tc.files, got, err, tc.want, tc.err)
		}
	}
}

// TestParseLang: the names --lang takes.
func TestParseLang(t *testing.T) {
	tests := []struct {
		in   string
		want toolchain.Lang
		err  error
	}{
		{"go", toolchain.Go, nil},
		{"Rust", toolchain.Rust, nil},
		{"c", toolchain.C, nil},
		{"assemblyscript", toolchain.AssemblyScript, nil},
		{"as", toolchain.AssemblyScript, nil},
		{"ts", toolchain.AssemblyScript, nil},
		{"java", "", toolchain.ErrUnknownLang},
		{"", "", toolchain.ErrUnknownLang},
	}
	for _, tc := range tests {
		got, err := toolchain.ParseLang(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ParseLang(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestDefaultOut: the spec's module: when there is one spec, else the directory's name.
func TestDefaultOut(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	write(t, dir, "main.go")
	if got, want := toolchain.DefaultOut(dir), filepath.Join(dir, "proj.wasm"); got != want {
		t.Errorf("no spec: %s, want %s", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "logins.yaml"), []byte("name: logins\nmodule: logins.wasm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := toolchain.DefaultOut(dir), filepath.Join(dir, "logins.wasm"); got != want {
		t.Errorf("one spec: %s, want %s", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.yml"), []byte("module: other.wasm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := toolchain.DefaultOut(dir), filepath.Join(dir, "proj.wasm"); got != want {
		t.Errorf("two specs: %s, want %s", got, want)
	}
}

// TestMissing: with nothing on PATH, every language's plan is one line naming what is missing
// and how to install it, a *MissingError wrapping ErrMissing.
func TestMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("RUSTC", "")
	sdk, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		lang  toolchain.Lang
		files []string
		want  []string
	}{
		{toolchain.Go, []string{"go.mod"}, []string{"go: go not found on PATH", "https://go.dev/dl"}},
		{toolchain.Rust, []string{"src/lib.rs"}, []string{"rust: rustc not found on PATH", "https://rustup.rs", "rustup target add wasm32-wasip1"}},
		{toolchain.C, []string{"x.c"}, []string{"c: clang not found on PATH", "apt-get install clang lld wasi-libc libclang-rt-dev-wasm32"}},
		{toolchain.AssemblyScript, []string{"x.ts"}, []string{"assemblyscript: node (Node.js) not found on PATH", "needs Node.js", "npm ci"}},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		write(t, dir, tc.files...)
		_, err := toolchain.Plan(toolchain.Project{Dir: dir, SDK: sdk})
		var m *toolchain.MissingError
		if !errors.Is(err, toolchain.ErrMissing) || !errors.As(err, &m) || m.Lang != tc.lang {
			t.Errorf("%s: Plan error %v, want a *MissingError of %s", tc.lang, err, tc.lang)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") {
			t.Errorf("%s: the message is more than one line: %q", tc.lang, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.lang, err, w)
			}
		}
	}
}

// TestNoSDK: a Rust, C or AssemblyScript project without a checkout, or with a directory
// that is none, is ErrNoSDK, naming --sdk or the directory.
func TestNoSDK(t *testing.T) {
	notCheckout := t.TempDir()
	for _, tc := range []struct {
		file, sdk, want string
	}{
		{"src/lib.rs", "", "rust needs a groupstate checkout's sdk/rust/src/lib.rs; pass --sdk"},
		{"x.c", "", "c needs a groupstate checkout's sdk/c/groupstate.h; pass --sdk"},
		{"x.ts", "", "assemblyscript needs a groupstate checkout's sdk/assemblyscript/package.json; pass --sdk"},
		{"x.c", notCheckout, notCheckout + " has no sdk/c/groupstate.h: is it a groupstate checkout?"},
	} {
		dir := t.TempDir()
		write(t, dir, tc.file)
		_, err := toolchain.Plan(toolchain.Project{Dir: dir, SDK: tc.sdk})
		if !errors.Is(err, toolchain.ErrNoSDK) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Plan error %v, want ErrNoSDK with %q", tc.file, err, tc.want)
		}
	}
}

// TestCOwnHeader: a C project with its own groupstate.h needs no checkout.
func TestCOwnHeader(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	write(t, dir, "handler.c", "groupstate.h")
	_, err := toolchain.Plan(toolchain.Project{Dir: dir})
	if !errors.Is(err, toolchain.ErrMissing) {
		t.Errorf("Plan error %v, want ErrMissing (clang), not ErrNoSDK", err)
	}
}

// fakeRustc writes, in a new directory, a rustc that prints sysroot for --print sysroot, and
// returns the directory.
func fakeRustc(t *testing.T, sysroot string) string {
	t.Helper()
	bin := t.TempDir()
	script := "#!/bin/sh\necho " + sysroot + "\n"
	if err := os.WriteFile(filepath.Join(bin, "rustc"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestRustIncomplete: a rustc without a WASI target, and one with the target but without its
// linker rust-lld, are each named as what is missing.
func TestRustIncomplete(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh for the stand-in rustc")
	}
	noTarget := t.TempDir()
	withTarget := t.TempDir()
	write(t, withTarget, "lib/rustlib/wasm32-wasip1/lib/libstd.rlib")
	tests := []struct {
		sysroot string
		want    []string
	}{
		{noTarget, []string{"rust: no rustc has the wasm32-wasip1 or wasm32-wasi target", "rustup target add wasm32-wasip1", "libstd-rust-dev-wasm32"}},
		{withTarget, []string{"has a wasm32 WASI target but not its linker rust-lld", "apt-get install rustc lld"}},
	}
	for _, tc := range tests {
		bin := fakeRustc(t, tc.sysroot)
		t.Setenv("PATH", bin)
		t.Setenv("RUSTC", "")
		dir := t.TempDir()
		write(t, dir, "src/lib.rs")
		_, err := toolchain.Plan(toolchain.Project{Dir: dir, SDK: filepath.Join("..", "..")})
		if !errors.Is(err, toolchain.ErrMissing) {
			t.Errorf("%s: Plan error %v, want ErrMissing", tc.sysroot, err)
			continue
		}
		for _, w := range append(tc.want, filepath.Join(bin, "rustc")) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q lacks %q", err, w)
			}
		}
	}
}

// TestRequired: GROUPSTATE_REQUIRE_TOOLCHAINS unset or empty is false, a boolean is itself, and
// anything else is an error.
func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		v        string
		want, ok bool
	}{
		{"", false, true}, {"0", false, true}, {"false", false, true}, {"1", true, true}, {"true", true, true},
		{"yes", false, false}, {"2", false, false},
	} {
		t.Setenv(toolchain.RequireEnv, tc.v)
		got, err := toolchain.Required()
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("%s=%q: Required() = %v, %v; want %v, ok %v", toolchain.RequireEnv, tc.v, got, err, tc.want, tc.ok)
		}
	}
}
