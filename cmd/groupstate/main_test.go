package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// groupstateBin builds the real binary once per test run.
func groupstateBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "groupstate-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "groupstate")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(groupstateBin(t), args...)
	cmd.Dir = "../.."
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// TestScenarioCommand runs every sample's scenario, and the public scenarios, through the real
// binary, as users and outside tests do.
func TestScenarioCommand(t *testing.T) {
	cases := [][]string{
		{"--spec", "runtime/engine/testdata/public/logincount.yaml", "--scenario", "runtime/engine/testdata/public/logincount.public.jsonl", "--module", "samples/logincount/go/logincount.wasm"},
		{"--spec", "runtime/engine/testdata/public/sessions.yaml", "--scenario", "runtime/engine/testdata/public/sessions.public.jsonl", "--module", "samples/sessions/go/sessions.wasm"},
	}
	specs, _ := filepath.Glob("../../samples/*/*.yaml")
	for _, s := range specs {
		rel, _ := filepath.Rel("../..", s)
		cases = append(cases, []string{"--spec", rel, "--scenario", strings.TrimSuffix(rel, ".yaml") + ".jsonl"})
	}
	if len(cases) < 6 {
		t.Fatalf("only %d scenarios found", len(cases))
	}
	for _, c := range cases {
		t.Run(c[3], func(t *testing.T) {
			stdout, stderr, code := run(t, append([]string{"test"}, c...)...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}

// TestScenarioCommandOutput: stdout is every emitted row as compact JSON, one per line, in
// emission order.
func TestScenarioCommandOutput(t *testing.T) {
	stdout, _, code := run(t, "test", "--spec", "runtime/engine/testdata/public/logincount.yaml",
		"--scenario", "runtime/engine/testdata/public/logincount.public.jsonl", "--module", "samples/logincount/go/logincount.wasm")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	want := `{"user_id":"x","total_logins":2,"session_closed":true}`
	if len(lines) != 6 || lines[3] != want {
		t.Fatalf("stdout:\n%s\nwant 6 lines, the 4th %s", stdout, want)
	}
}

// TestScenarioCommandFailures: a failing expect exits non-zero with a readable diff; an
// invalid step or spec exits non-zero naming the problem.
func TestScenarioCommandFailures(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wrongExpect := write("wrong.jsonl", `{"at": 5000, "rows": [{"user_id": "x"}]}
{"expect": [{"user_id": "x", "total_logins": 3}]}
`)
	backwards := write("backwards.jsonl", `{"at": 5000, "rows": []}
{"at": 4000, "rows": []}
`)
	unknown := write("unknown.jsonl", `{"at": 5000, "rowz": []}
`)
	badSpec := write("bad.yaml", `name: Bad_Name
key: {field: user_id}
timeout: sometimes
`)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"wrong expect", []string{"--spec", "samples/logincount/logincount.yaml", "--scenario", wrongExpect},
			`- missing:    {"total_logins":3,"user_id":"x"}`},
		{"time goes backwards", []string{"--spec", "samples/logincount/logincount.yaml", "--scenario", backwards},
			`line 2: "at" 4000 is before the previous batch's 5000`},
		{"unknown field", []string{"--spec", "samples/logincount/logincount.yaml", "--scenario", unknown},
			`line 1: unknown field "rowz"`},
		{"bad spec", []string{"--spec", badSpec, "--scenario", unknown, "--module", "samples/logincount/go/logincount.wasm"},
			`name "Bad_Name" must be 1 to 63 characters of [a-z0-9-]`},
		{"not a module", []string{"--spec", "samples/logincount/logincount.yaml", "--scenario", wrongExpect, "--module", "README.md"},
			"not a WebAssembly binary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := run(t, append([]string{"test"}, tc.args...)...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant non-zero and %q", code, stderr, tc.want)
			}
		})
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)
