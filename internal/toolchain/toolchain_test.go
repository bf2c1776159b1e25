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

// TestNoSDK: a C project without a checkout is ErrNoSDK, naming --sdk.
func TestNoSDK(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "x.c")
	_, err := toolchain.Plan(toolchain.Project{Dir: dir, Lang: toolchain.C})
	if errors.Is(err, toolchain.ErrMissing) {
		t.Skipf("the C toolchain is missing: %v", err)
	}
	if !errors.Is(err, toolchain.ErrNoSDK) || !strings.Contains(err.Error(), "--sdk") {
		t.Errorf("Plan error %v, want ErrNoSDK naming --sdk", err)
	}
}
