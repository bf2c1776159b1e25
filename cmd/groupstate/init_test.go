package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/internal/toolchain"
)

// requireInitToolchain ends t, with toolchainMissing, when what `groupstate build` needs for
// the project in dir is missing (package toolchain checks it, as the command does). Go's
// toolchain is the one running the tests: its absence is a failure.
func requireInitToolchain(t *testing.T, dir string) {
	t.Helper()
	_, err := toolchain.Plan(toolchain.Project{Dir: dir, SDK: repoRoot})
	var m *toolchain.MissingError
	switch {
	case errors.As(err, &m) && m.Lang != toolchain.Go:
		toolchainMissing(t, "%v", err)
	case err != nil:
		t.Fatalf("groupstate build cannot build %s: %v", dir, err)
	}
}

// TestInit generates a project in every language (and Python's StatefulProcessor, with
// --processor), builds it with groupstate build (no make), and runs its scenario with
// groupstate test, as a user following the printed next steps would. The languages run in
// parallel, each command in-process.
func TestInit(t *testing.T) {
	wantFiles := map[string][]string{
		"go":             {"main.go", "go.mod"},
		"rust":           {"src/lib.rs"},
		"c":              {"NAME.c"},
		"assemblyscript": {"NAME.ts"},
		"python":         {"NAME.py"},
	}
	for _, variant := range []string{"go", "rust", "c", "assemblyscript", "python", "python-processor"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			lang, processor := strings.CutSuffix(variant, "-processor")
			name := "login-" + variant
			dir := filepath.Join(t.TempDir(), "proj")

			args := []string{"init", name, "--lang", lang, "--dir", dir}
			if processor {
				args = append(args, "--processor")
			}
			stdout, stderr, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("init: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, want := range []string{
				"groupstate build ",
				"groupstate test --spec " + name + ".yaml --scenario " + name + ".jsonl",
				"groupstate deploy -f " + name + ".yaml",
				map[bool]string{false: "SDK: the groupstate checkout", true: "SDK: the groupstate package and the Python runtime come with the groupstate binary"}[lang == "python"],
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("init output lacks %q:\n%s", want, stdout)
				}
			}
			files := append([]string{"Makefile", "README.md", ".gitignore", "NAME.yaml", "NAME.jsonl"}, wantFiles[lang]...)
			for _, f := range files {
				f = strings.ReplaceAll(f, "NAME", name)
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("not generated: %s", f)
				}
			}
			sp, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"name: " + name + "\n", "module: " + name + ".wasm", `["` + name + `.in"]`,
				"field: user_id", "timeout: processing_time", "subject: " + name + ".out", "idle_timeout: 10s"} {
				if !bytes.Contains(sp, []byte(want)) {
					t.Errorf("spec lacks %q:\n%s", want, sp)
				}
			}
			readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"groupstate build", "groupstate test --spec " + name + ".yaml --scenario " + name + ".jsonl",
				"groupstate serve", "groupstate deploy -f " + name + ".yaml"} {
				if !bytes.Contains(readme, []byte(want)) {
					t.Errorf("README lacks %q", want)
				}
			}

			if processor {
				py, err := os.ReadFile(filepath.Join(dir, name+".py"))
				if err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{"class LoginPythonProcessor(StatefulProcessor):", "def handleExpiredTimer(", "registerTimer("} {
					if !bytes.Contains(py, []byte(want)) {
						t.Errorf("the processor's %s.py lacks %q:\n%s", name, want, py)
					}
				}
				if !bytes.Contains(readme, []byte("--processor")) || !bytes.Contains(readme, []byte("StatefulProcessor")) {
					t.Errorf("the processor's README does not say it is one:\n%s", readme)
				}
			}
			if lang != "python" { // Python needs no toolchain
				requireInitToolchain(t, dir) // init warns of a missing toolchain; with one, it must not
			}
			if strings.Contains(stderr, "warning") {
				t.Errorf("init warned:\n%s", stderr)
			}
			if (lang == "go" || lang == "python") && !processor {
				return // TestInitReadme builds and tests these projects by their README's lines
			}
			stdout, stderr, code = runCLI(t, "build", dir)
			if code != 0 {
				t.Fatalf("groupstate build: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if !regexp.MustCompile(`(?m)^built \S*` + regexp.QuoteMeta(name+".wasm") + ` \(\d+ KB\) in \d+\.\ds$`).MatchString(stdout) {
				t.Errorf("groupstate build's output lacks its closing line:\n%s", stdout)
			}
			stdout, stderr, code = runCLI(t, "test", "--spec", filepath.Join(dir, name+".yaml"), "--scenario", filepath.Join(dir, name+".jsonl"))
			if code != 0 {
				t.Fatalf("groupstate test: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if !strings.Contains(stdout, `"session_closed":true`) {
				t.Errorf("the scenario emitted no session_closed row:\n%s", stdout)
			}
		})
	}
}

// TestInitRefuses: a bad name, an unknown language, a non-empty directory and an --sdk that
// is no checkout are refused with a clear error, and nothing is written.
func TestInitRefuses(t *testing.T) {
	tmp := t.TempDir()
	full := filepath.Join(tmp, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"init", "Logins", "--dir", filepath.Join(tmp, "a")}, `invalid name "Logins"`},
		{[]string{"init", "log_ins", "--dir", filepath.Join(tmp, "a")}, `invalid name "log_ins"`},
		{[]string{"init", "../x", "--dir", filepath.Join(tmp, "a")}, `invalid name "../x"`},
		{[]string{"init", strings.Repeat("a", 64), "--dir", filepath.Join(tmp, "a")}, "1 to 63 characters"},
		{[]string{"init", "logins", "--lang", "java", "--dir", filepath.Join(tmp, "a")}, `unknown --lang "java"`},
		{[]string{"init", "logins", "--lang", "go", "--processor", "--dir", filepath.Join(tmp, "a")}, "--processor is for --lang python"},
		{[]string{"init", "logins", "--dir", full}, "already exists and is not empty"},
		{[]string{"init", "logins", "--dir", filepath.Join(full, "keep.txt")}, "is not a directory"},
		{[]string{"init", "logins", "--sdk", tmp, "--dir", filepath.Join(tmp, "a")}, "is not a groupstate checkout"},
		{[]string{"init"}, "one argument"},
	}
	for _, c := range cases {
		stdout, stderr, code := runCLI(t, c.args...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want an error containing %q\nstdout:\n%s\nstderr:\n%s", c.args, code, c.want, stdout, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "a")); err == nil {
		t.Errorf("a refused init created %s", filepath.Join(tmp, "a"))
	}
	if b, _ := os.ReadFile(filepath.Join(full, "keep.txt")); string(b) != "mine" {
		t.Errorf("keep.txt was changed")
	}
	entries, _ := os.ReadDir(full)
	if len(entries) != 1 {
		t.Errorf("init wrote into a non-empty directory: %d entries", len(entries))
	}
}

// TestInitWithoutCheckout: run outside any checkout, init still creates the project and says,
// in its output and the README, that the SDK must be pointed at.
func TestInitWithoutCheckout(t *testing.T) {
	// The test binary is in the build's temporary directory, outside the checkout, as an
	// installed groupstate is: only the current directory could lead init to the checkout.
	cwd := t.TempDir()
	t.Chdir(cwd)
	stdout, stderr, code := runCLI(t, "init", "logins")
	if code != 0 {
		t.Fatalf("init: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "no groupstate checkout found") || !strings.Contains(stdout, "see README.md") {
		t.Errorf("no clear message about the missing checkout:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	readme, err := os.ReadFile(filepath.Join(cwd, "logins", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, []byte("No groupstate checkout was found")) || !bytes.Contains(readme, []byte("go mod edit -replace=")) {
		t.Errorf("README does not say how to point at the SDK:\n%s", readme)
	}
	gomod, err := os.ReadFile(filepath.Join(cwd, "logins", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(gomod, []byte("require github.com/groupstate/groupstate")) || bytes.Contains(gomod, []byte("\nreplace")) {
		t.Errorf("go.mod:\n%s", gomod)
	}
}

// TestProcessorClass: init's Python processor class names are identifiers, without a doubled
// "Processor".
func TestProcessorClass(t *testing.T) {
	for name, want := range map[string]string{
		"logins": "LoginsProcessor", "login-count": "LoginCountProcessor", "my-processor": "MyProcessor",
		"1st": "P1stProcessor", "a--b": "ABProcessor", "-": "PProcessor",
	} {
		if got := processorClass(name); got != want {
			t.Errorf("processorClass(%q) = %q, want %q", name, got, want)
		}
	}
}
