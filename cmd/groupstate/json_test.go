package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestJSONOutputs: every command that prints data prints, with --json, JSON only on standard
// output: one object, or one object a line for a stream of events (tail).
func TestJSONOutputs(t *testing.T) {
	url := startServe(t, t.TempDir())
	spec := writeLogincountSpec(t, "pj", "pj.in.>", "pj.out")
	shadow := writeLogincountSpec(t, "pj-v2", "pj.in.>", "pj.out")
	rowsFile := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(rowsFile, []byte("{\"user_id\":\"a\"}\n{\"user_id\":\"b\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// tail --json, receiving what is published while it runs.
	tailOut := make(chan string, 1)
	go func() {
		out, _, _ := runCLI(t, "tail", "pj.tail", "--count", "2", "--json", "--server", url)
		tailOut <- out
	}()
	var tailed string
	deadline := time.Now().Add(waitTimeout)
	for tailed == "" {
		if time.Now().After(deadline) {
			t.Fatal("tail --json printed nothing")
		}
		_ = nc.Publish("pj.tail", []byte(`{"n":1}`))
		_ = nc.Publish("pj.tail", []byte(`not json`))
		select {
		case tailed = <-tailOut:
		case <-time.After(50 * time.Millisecond):
		}
	}

	for _, c := range []struct {
		name   string
		args   []string
		output string // the stdout when not run here
		lines  int    // JSON objects expected (more than one: one a line)
		want   string // in the output
	}{
		{name: "version", args: []string{"version", "--json"}, lines: 1, want: `"abi_versions"`},
		{name: "test", args: []string{"test", "--spec", inRepo("runtime/engine/testdata/public/logincount.yaml"), "--scenario", inRepo("runtime/engine/testdata/public/logincount.public.jsonl"),
			"--module", inRepo("samples/logincount/go/logincount.wasm"), "--json"}, lines: 1, want: `"pass":true`},
		{name: "deploy", args: []string{"deploy", "-f", spec, "--json", "--server", url}, lines: 1, want: `"GS_PJ_IN"`},
		{name: "pub", args: []string{"pub", "pj.in.web", "--file", rowsFile, "--json", "--server", url}, lines: 1, want: `"acked":2`},
		{name: "tail", output: tailed, lines: 2, want: `"data":"not json"`},
		{name: "list", args: []string{"list", "--json", "--server", url}, lines: 1, want: `"pj"`},
		{name: "status", args: []string{"status", "pj", "--json", "--server", url}, lines: 1, want: `"name": "pj"`},
		{name: "shadow", args: []string{"deploy", "-f", shadow, "--shadow", "pj", "--json", "--server", url}, lines: 1, want: `"shadow_of":"pj"`},
		{name: "promote", args: []string{"promote", "pj-v2", "--json", "--server", url}, lines: 1, want: `"undeployed":"pj"`},
		{name: "undeploy", args: []string{"undeploy", "pj-v2", "--json", "--server", url}, lines: 1, want: `"name":"pj-v2"`},
		{name: "undeploy --purge", args: []string{"undeploy", "pj-v2", "--purge", "--yes", "--json", "--server", url}, lines: 1, want: `"deleted"`},
	} {
		out := c.output
		if c.args != nil {
			var errOut string
			var code int
			out, errOut, code = runCLI(t, c.args...)
			if code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", c.name, code, out, errOut)
			}
		}
		// As many JSON objects as expected, and nothing else; a stream of events has one a line.
		dec := json.NewDecoder(strings.NewReader(out))
		n := 0
		for ; dec.More(); n++ {
			var v map[string]any
			if err := dec.Decode(&v); err != nil {
				t.Errorf("%s --json: not JSON objects (%v):\n%s", c.name, err, out)
				break
			}
		}
		if n != c.lines || (c.lines > 1 && strings.Count(out, "\n") != c.lines) {
			t.Errorf("%s --json: %d objects, want %d, one a line:\n%s", c.name, n, c.lines, out)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s --json: no %s in\n%s", c.name, c.want, out)
		}
	}
}

// TestTestJSONFailure: test --json on a scenario whose expectation fails prints one object
// saying it did not pass, and why, and exits 1.
func TestTestJSONFailure(t *testing.T) {
	wrong := filepath.Join(t.TempDir(), "wrong.jsonl")
	if err := os.WriteFile(wrong, []byte(`{"at": 5000, "rows": [{"user_id": "x"}]}
{"expect": [{"user_id": "x", "total_logins": 3}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "test", "--spec", inRepo("samples/logincount/logincount.yaml"), "--scenario", wrong, "--json")
	var res testResult
	if code != 1 || json.Unmarshal([]byte(out), &res) != nil || res.Pass || res.Scenario != "wrong.jsonl" || res.Error == "" || res.Rows != 1 {
		t.Fatalf("test --json of a failing scenario: exit %d\n%s%s", code, out, errOut)
	}
}

// TestTestJSONCannotRun: test --json prints one object (pass false, why) and exits non-zero
// also when the scenario cannot run: a line that is not a step, rows for an input the spec
// does not have, a scenario file that does not exist.
func TestTestJSONCannotRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, scenario, want string
	}{
		{"not a step", write("bad.jsonl", "{\"at\": 5000, \"rows\": [\n"), "line 1"},
		{"an input the spec lacks", write("inputs.jsonl", `{"at": 5000, "inputs": [{"name": "nope", "rows": [{"user_id": "x"}]}]}`+"\n"), "has one input"},
		{"no file", filepath.Join(dir, "missing.jsonl"), "missing.jsonl"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, "test", "--spec", inRepo("samples/logincount/logincount.yaml"), "--scenario", tc.scenario, "--json")
			var res testResult
			if code == 0 || json.Unmarshal([]byte(out), &res) != nil || res.Pass || res.Scenario != filepath.Base(tc.scenario) || !strings.Contains(res.Error, tc.want) {
				t.Fatalf("exit %d, stdout %q (want one object, pass false, an error naming %q), stderr %s", code, out, tc.want, errOut)
			}
		})
	}
}
