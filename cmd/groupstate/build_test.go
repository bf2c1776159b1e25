package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildMissingToolchain: groupstate build of an init project with nothing on PATH exits
// non-zero with one line that names what is missing and how to install it; no toolchain is
// needed.
func TestBuildMissingToolchain(t *testing.T) {
	tests := []struct {
		lang string
		want []string
	}{
		{"go", []string{"groupstate: go: go not found on PATH; install Go from https://go.dev/dl"}},
		{"rust", []string{"groupstate: rust: rustc not found on PATH; install with https://rustup.rs then 'rustup target add wasm32-wasip1'"}},
		{"c", []string{"groupstate: c: clang not found on PATH;", "apt-get install clang lld wasi-libc libclang-rt-dev-wasm32"}},
		{"assemblyscript", []string{"groupstate: assemblyscript: node (Node.js) not found on PATH;", "needs Node.js", "npm ci"}},
	}
	dirs := map[string]string{}
	for _, tc := range tests {
		dirs[tc.lang] = filepath.Join(t.TempDir(), "proj")
		if stdout, stderr, code := runCLI(t, "init", "logins", "--lang", tc.lang, "--dir", dirs[tc.lang]); code != 0 {
			t.Fatalf("init: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	}
	t.Setenv("PATH", t.TempDir())
	t.Setenv("RUSTC", "")
	for _, tc := range tests {
		stdout, stderr, code := runCLI(t, "build", dirs[tc.lang])
		if code == 0 {
			t.Errorf("%s: exit 0 with nothing on PATH", tc.lang)
		}
		if stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: want one line on stderr and nothing on stdout\nstdout:\n%s\nstderr:\n%s", tc.lang, stdout, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.lang, w, stderr)
			}
		}
	}
}

// TestBuildRefuses: an unknown --lang and a directory with no project are clear errors.
func TestBuildRefuses(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", empty, "--lang", "java"}, `unknown language "java": use go, rust, c, assemblyscript or python`},
		{[]string{"build", empty}, "no handler project in " + empty},
		{[]string{"build", filepath.Join(empty, "nope")}, "no such file or directory"},
		{[]string{"build", empty, empty}, "accepts at most 1 arg"},
	} {
		stdout, stderr, code := runCLI(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want an error containing %q\nstdout:\n%s\nstderr:\n%s", c.args, code, c.want, stdout, stderr)
		}
	}
}

// TestBuildPython builds the Python logincount with nothing but this program (issue 31) and
// runs its scenario with groupstate test.
func TestBuildPython(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "logincount.py")
	b, err := os.ReadFile(inRepo("samples/logincount/python/logincount.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "build", src)
	if code != 0 || !strings.Contains(out, "built ") {
		t.Fatalf("build: code %d\n%s%s", code, out, errOut)
	}
	mod := filepath.Join(dir, "logincount.wasm")
	out, errOut, code = runCLI(t, "test", "--spec", inRepo("samples/logincount/logincount.yaml"),
		"--scenario", inRepo("samples/logincount/logincount.jsonl"), "--module", mod)
	if code != 0 || !strings.Contains(out+errOut, "PASS logincount.jsonl") {
		t.Fatalf("test: code %d\n%s%s", code, out, errOut)
	}
	// Two directory arguments, and --entry without Python, are refused.
	if _, errOut, code := runCLI(t, "build", dir, dir); code == 0 || !strings.Contains(errOut, "accepts at most 1 arg") {
		t.Errorf("build DIR DIR: code %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "build", "--lang", "python", src, "--entry", "nope", "-o", filepath.Join(dir, "x.wasm")); code != 0 {
		t.Errorf("build --entry nope: code %d: %s (the entry is checked when the module starts)", code, errOut)
	}
}

// TestBuildPythonProcessor builds the Python carts, a StatefulProcessor (ABI v2), with
// nothing but this program and runs its scenario and initial state with groupstate test;
// --entry naming the class works the same, and naming a function of the file builds a v1
// module that calls that function as handle(key, rows, state).
func TestBuildPythonProcessor(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "carts.py")
	b, err := os.ReadFile(inRepo("samples/carts/python/carts.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, entry := range []string{"", "Carts"} {
		args := []string{"build", src}
		if entry != "" {
			args = append(args, "--entry", entry)
		}
		out, errOut, code := runCLI(t, args...)
		if code != 0 || !strings.Contains(out, "built ") {
			t.Fatalf("build %v: code %d\n%s%s", args, code, out, errOut)
		}
		out, errOut, code = runCLI(t, "test", "--spec", inRepo("samples/carts/carts.yaml"),
			"--scenario", inRepo("samples/carts/carts.jsonl"), "--initial-state", inRepo("samples/carts/carts.initial.jsonl"),
			"--module", filepath.Join(dir, "carts.wasm"))
		if code != 0 || !strings.Contains(out+errOut, "PASS carts.jsonl") {
			t.Fatalf("test (entry %q): code %d\n%s%s", entry, code, out, errOut)
		}
	}
	mod := filepath.Join(dir, "v1.wasm")
	if _, errOut, code := runCLI(t, "build", src, "--entry", "positive_duration_ms", "-o", mod); code != 0 {
		t.Fatalf("build --entry positive_duration_ms: code %d: %s", code, errOut)
	}
	_, errOut, code := runCLI(t, "test", "--spec", inRepo("samples/carts/carts.yaml"),
		"--scenario", inRepo("samples/carts/carts.jsonl"), "--module", mod)
	if code == 0 || !strings.Contains(errOut, "positive_duration_ms() takes 1 positional argument but 3 were given") {
		t.Errorf("a v1 module with a function entry: code %d: %s", code, errOut)
	}
}

// TestBuildPythonDir: groupstate build DIR finds a Python project (its .py files, no other
// language's) and builds the module its spec names, with its helper modules.
func TestBuildPythonDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec, err := os.ReadFile(inRepo("samples/logincount/logincount.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write("logincount.yaml", strings.Replace(string(spec), "module: go/logincount.wasm", "module: logincount.wasm", 1))
	write("logincount.py", "from util.count import count\nimport groupstate\n\n"+
		"def handle(key, rows, state):\n    n = (state.getOption or {}).get('login_count', 0)\n"+
		"    if state.hasTimedOut:\n        state.remove()\n        yield {'user_id': key[0], 'total_logins': n, 'session_closed': True}\n        return\n"+
		"    n += count(rows)\n    state.update({'login_count': n})\n    state.setTimeoutDuration('10s')\n    yield {'user_id': key[0], 'total_logins': n}\n")
	write("util/__init__.py", "")
	write("util/count.py", "def count(rows):\n    return sum(len(c) for c in rows)\n")
	out, errOut, code := runCLI(t, "build", dir)
	if code != 0 || !strings.Contains(out, "built ") {
		t.Fatalf("build DIR: code %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "test", "--spec", filepath.Join(dir, "logincount.yaml"),
		"--scenario", inRepo("samples/logincount/logincount.jsonl"))
	if code != 0 || !strings.Contains(out+errOut, "PASS logincount.jsonl") {
		t.Fatalf("test: code %d\n%s%s", code, out, errOut)
	}
}
