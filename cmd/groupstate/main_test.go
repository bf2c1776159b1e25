package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the absolute path of the checkout. Commands run in-process, in this package's
// directory, so tests name the checkout's files by absolute path (inRepo).
var repoRoot = func() string {
	abs, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return abs
}()

// inRepo returns the absolute path of rel, a slash-separated path in the checkout.
func inRepo(rel string) string { return filepath.Join(repoRoot, filepath.FromSlash(rel)) }

// runCLI runs the command line args in-process through run, as the groupstate binary would,
// and returns what it wrote and its exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIContext(context.Background(), args...)
}

// runCLIContext is runCLI under ctx, which stands for the signals of the real binary.
func runCLIContext(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(ctx, args, &o, &e)
	return o.String(), e.String(), code
}

// syncBuffer is a bytes.Buffer that a command running on another goroutine may write while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestRunExitCodes: run's exit codes and what it writes to standard error are the binary's: a
// usage error prints "groupstate: ", the error and the command's usage line and exits 1; a
// failed command prints "groupstate: " and the error and exits 1; a failed
// expectation prints its diff as it is and exits 1; state exits 2 when it cannot ask; no
// arguments (nil or empty, never the process's own os.Args) print the help and exit 0.
func TestRunExitCodes(t *testing.T) {
	wrongExpect := filepath.Join(t.TempDir(), "wrong.jsonl")
	if err := os.WriteFile(wrongExpect, []byte(`{"at": 5000, "rows": [{"user_id": "x"}]}
{"expect": [{"user_id": "x", "total_logins": 3}]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		stderr     string // the whole of standard error, when exact
		stderrHas  string // a part of it otherwise
		stdoutHas  string
		stdoutNone bool
	}{
		{name: "bad flag", args: []string{"--bogus"}, code: 1, stderr: "groupstate: unknown flag: --bogus\nusage: groupstate [flags]\nrun 'groupstate --help' for its flags and examples\n", stdoutNone: true},
		{name: "bad flag of a command", args: []string{"deploy", "--bogus"}, code: 1, stderrHas: "groupstate: unknown flag: --bogus\nusage: groupstate deploy -f SPEC|SPEC [--module WASM]", stdoutNone: true},
		{name: "unknown command", args: []string{"frobnicate"}, code: 1, stderrHas: "groupstate: unknown command \"frobnicate\" for \"groupstate\"\nusage: groupstate", stdoutNone: true},
		{name: "missing required flags", args: []string{"test"}, code: 1, stderrHas: "groupstate: required flag(s) \"scenario\", \"spec\" not set\nusage: groupstate test", stdoutNone: true},
		{name: "state without a name", args: []string{"state"}, code: 1, stderr: "groupstate: accepts between 1 and 2 arg(s), received 0\nusage: groupstate state NAME [KEY] [flags]\nrun 'groupstate state --help' for its flags and examples\n", stdoutNone: true},
		{name: "version flag", args: []string{"--version"}, code: 0, stderr: "", stdoutHas: "groupstate "},
		{name: "failing expectation", args: []string{"test", "--spec", inRepo("samples/logincount/logincount.yaml"), "--scenario", wrongExpect},
			code: 1, stderrHas: `- missing:    {"total_logins":3,"user_id":"x"}`, stdoutHas: `{"user_id":"x","total_logins":1}`},
		{name: "state without a server", args: []string{"state", "logincount", "ada", "--server", "nats://127.0.0.1:1"},
			code: 2, stderrHas: "groupstate: cannot connect to NATS at nats://127.0.0.1:1 (is groupstate serve running?)", stdoutNone: true},
		{name: "reset without confirmation", args: []string{"deploy", "-f", inRepo("samples/logincount/logincount.yaml"), "--reset-state"},
			code: 1, stderr: "groupstate: --reset-state drops the deployment's state for good (every key, timeout and undelivered output); add --confirm to do it\n", stdoutNone: true},
		{name: "confirmation of nothing", args: []string{"deploy", "-f", inRepo("samples/logincount/logincount.yaml"), "--confirm"},
			code: 1, stderr: "groupstate: --confirm confirms --reset-state, which is not given\n", stdoutNone: true},
		{name: "no arguments", args: []string{}, code: 0, stderr: "", stdoutHas: "Usage:\n  groupstate [command]"},
		{name: "nil arguments", args: nil, code: 0, stderr: "", stdoutHas: "Usage:\n  groupstate [command]"},
		{name: "help of a command", args: []string{"state", "--help"}, code: 0, stderr: "", stdoutHas: "exits 1 when the\nkey has no state"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.args == nil {
				// What cobra would read in place of nil arguments: a command that fails.
				saved := os.Args
				os.Args = []string{saved[0], "frobnicate"}
				defer func() { os.Args = saved }()
			}
			stdout, stderr, code := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			if tc.stderrHas == "" && stderr != tc.stderr {
				t.Errorf("stderr %q, want %q", stderr, tc.stderr)
			}
			if tc.stderrHas != "" && !strings.Contains(stderr, tc.stderrHas) {
				t.Errorf("stderr lacks %q", tc.stderrHas)
			}
			if tc.name == "failing expectation" && strings.HasPrefix(stderr, "groupstate:") {
				t.Errorf("the diff of a failed expectation is printed as it is, without a prefix")
			}
			if tc.stdoutNone && stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if !strings.Contains(stdout, tc.stdoutHas) {
				t.Errorf("stdout lacks %q", tc.stdoutHas)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
		})
	}
}

// TestScenarioCommand runs every sample's scenario, and the public scenarios, through the
// command, as users and outside tests do.
func TestScenarioCommand(t *testing.T) {
	type scenarioCase struct{ spec, scenario, module string } // slash-separated, in the checkout
	cases := []scenarioCase{
		{"runtime/engine/testdata/public/logincount.yaml", "runtime/engine/testdata/public/logincount.public.jsonl", "samples/logincount/go/logincount.wasm"},
		{"runtime/engine/testdata/public/sessions.yaml", "runtime/engine/testdata/public/sessions.public.jsonl", "samples/sessions/go/sessions.wasm"},
	}
	specs, _ := filepath.Glob(inRepo("samples/*/*.yaml"))
	for _, s := range specs {
		rel, _ := filepath.Rel(repoRoot, s)
		rel = filepath.ToSlash(rel)
		cases = append(cases, scenarioCase{rel, strings.TrimSuffix(rel, ".yaml") + ".jsonl", ""})
	}
	if len(cases) < 6 {
		t.Fatalf("only %d scenarios found", len(cases))
	}
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			args := []string{"test", "--spec", inRepo(c.spec), "--scenario", inRepo(c.scenario)}
			if c.module != "" {
				args = append(args, "--module", inRepo(c.module))
			}
			if initial := strings.TrimSuffix(c.scenario, ".jsonl") + ".initial.jsonl"; fileIsThere(inRepo(initial)) {
				args = append(args, "--initial-state", inRepo(initial))
			}
			stdout, stderr, code := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}

// TestScenarioCommandOutput: stdout is every emitted row as compact JSON, one per line, in
// emission order; stderr ends with a pass summary.
func TestScenarioCommandOutput(t *testing.T) {
	stdout, stderr, code := runCLI(t, "test", "--spec", inRepo("runtime/engine/testdata/public/logincount.yaml"),
		"--scenario", inRepo("runtime/engine/testdata/public/logincount.public.jsonl"), "--module", inRepo("samples/logincount/go/logincount.wasm"))
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.HasPrefix(stderr, "PASS logincount.public.jsonl: ") || !strings.Contains(stderr, " expectations held\n") {
		t.Errorf("no pass summary on stderr: %q", stderr)
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
	logincount := inRepo("samples/logincount/logincount.yaml")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"wrong expect", []string{"--spec", logincount, "--scenario", wrongExpect},
			`- missing:    {"total_logins":3,"user_id":"x"}`},
		{"time goes backwards", []string{"--spec", logincount, "--scenario", backwards},
			`line 2: "at" 4000 is before the previous batch's 5000`},
		{"unknown field", []string{"--spec", logincount, "--scenario", unknown},
			`line 1: unknown field "rowz"`},
		{"bad spec", []string{"--spec", badSpec, "--scenario", unknown, "--module", inRepo("samples/logincount/go/logincount.wasm")},
			`name "Bad_Name" must be 1 to 63 characters of [a-z0-9-]`},
		{"not a module", []string{"--spec", logincount, "--scenario", wrongExpect, "--module", inRepo("README.md")},
			"not a WebAssembly binary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, append([]string{"test"}, tc.args...)...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant non-zero and %q", code, stderr, tc.want)
			}
		})
	}
}

// TestExamplesUseRealFlags: every groupstate command line in a command's examples names a
// command that exists and only flags it has.
func TestExamplesUseRealFlags(t *testing.T) {
	root := newRootCommand()
	n := 0
	for _, c := range root.Commands() {
		// Join continued lines, then take each "groupstate ..." up to a shell separator.
		example := strings.ReplaceAll(c.Example, "\\\n", " ")
		for _, line := range strings.Split(example, "\n") {
			for _, part := range strings.FieldsFunc(line, func(r rune) bool { return r == '|' || r == '&' || r == ';' || r == '>' }) {
				fields := strings.Fields(part)
				for len(fields) > 0 && fields[0] != "groupstate" {
					fields = fields[1:] // "go run ./cmd/groupstate demo" names the command too
					if len(fields) > 0 && strings.HasSuffix(fields[0], "/groupstate") {
						fields[0] = "groupstate"
					}
				}
				if len(fields) < 2 {
					continue
				}
				cmd, rest, err := root.Find(fields[1:])
				if err != nil || cmd == root {
					t.Errorf("%s: example %q: no such command", c.Name(), strings.TrimSpace(part))
					continue
				}
				n++
				for _, a := range rest {
					if !strings.HasPrefix(a, "-") {
						continue
					}
					name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
					var found bool
					if strings.HasPrefix(a, "--") {
						found = cmd.Flags().Lookup(name) != nil
					} else {
						found = cmd.Flags().ShorthandLookup(name) != nil
					}
					if !found {
						t.Errorf("%s: example %q: %s has no flag %s", c.Name(), strings.TrimSpace(part), cmd.Name(), a)
					}
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("only %d example command lines found", n)
	}
}

// fileIsThere reports whether a file exists at path.
func fileIsThere(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestUserMessage: errors reach users without Go package prefixes, at the start or inside a
// wrapped message, and without Go type names.
func TestUserMessage(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"service: cannot connect to NATS at x (is groupstate serve running?): nats: no servers", "cannot connect to NATS at x (is groupstate serve running?): nats: no servers"},
		{"client: input stream: natsio: refusing to change a stream", "input stream: refusing to change a stream"},
		{"spec: invalid deployment spec: yaml: cannot unmarshal !!seq into type spec.Spec", "invalid deployment spec: yaml: cannot unmarshal !!seq into a deployment spec"},
		{"the clientele: fine", "the clientele: fine"},
		{"permission denied: user ops may not deploy x", "permission denied: user ops may not deploy x"},
	} {
		if got := userMessage(errors.New(c.in)); got != c.want {
			t.Errorf("userMessage(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
