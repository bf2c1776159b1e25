package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/internal/testcache"
	"github.com/groupstate/groupstate/runtime/client"
)

// TestDemo: `groupstate demo` runs to completion on a fresh machine and every click ends up in
// a closed session.
func TestDemo(t *testing.T) {
	stdout, stderr, code := runCLI(t, "demo")
	if code != 0 || !strings.Contains(stdout, "covering 600 of 600 clicks") || !strings.Contains(stdout, "0 late rows dropped, 0 dead letters") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServeDeployFlow is the README's flow, every command in-process through run: serve with
// the embedded NATS, deploy logincount, publish, read state and status, list, undeploy, and
// stop serve by cancelling its context (what SIGTERM does to the binary; TestServeSignals
// sends the signals): it exits 0, having logged to the standard error it was given.
func TestServeDeployFlow(t *testing.T) {
	port, metricsPort := freePort(t), freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	metrics := fmt.Sprintf("http://127.0.0.1:%d", metricsPort)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var serveOut, serveLog syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--data", sharedCache(t, t.TempDir()), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--metrics", fmt.Sprintf("127.0.0.1:%d", metricsPort)}, &serveOut, &serveLog)
	}()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-exited
		}
	}()
	cli := func(args ...string) (string, string, int) {
		return runCLI(t, append(args, "--server", url)...)
	}
	deadline := time.Now().Add(waitTimeout)
	for {
		if out, _, code := cli("list"); code == 0 && strings.Contains(out, "\nRUNTIME ") {
			break // up: the runtime is a member
		}
		select {
		case code := <-exited:
			stopped = true
			t.Fatalf("serve exited %d before it came up:\n%s", code, serveLog.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up:\n%s", serveLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, _, code := cli("list"); code != 0 || !strings.HasPrefix(out, "no deployments\n\nRUNTIME ") {
		t.Fatalf("list before deploying: exit %d\n%s", code, out)
	}

	logincount := inRepo("samples/logincount/logincount.yaml")
	if out, errOut, code := cli("deploy", "-f", logincount); code != 0 || !strings.Contains(out, "deployed logincount") {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli("deploy", "-f", logincount, "--module", inRepo("README.md")); code != 1 || !strings.Contains(errOut, "not a WebAssembly binary") {
		t.Fatalf("deploying a bad module: exit %d\n%s", code, errOut)
	}
	// The input stream exists once the runtime started the deployment.
	waitCLI(t, func() bool {
		out, _, code := cli("status", "logincount", "--json")
		return code == 0 && strings.Contains(out, `"state": "running"`)
	})
	lines := filepath.Join(t.TempDir(), "logins.jsonl")
	if err := os.WriteFile(lines, []byte("{\"user_id\":\"ada\"}\n{\"user_id\":\"ada\"}\n\n{\"user_id\":\"bob\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli("pub", "logins.web", "--file", lines, "--rate", "200"); code != 0 || !strings.Contains(errOut, "published 3 messages to logins.web") {
		t.Fatalf("pub: exit %d\n%s%s", code, out, errOut)
	}
	// Every row is in state (the rows are published 5 ms apart, so they may take more
	// than one batch: bob's comes last).
	waitCLI(t, func() bool {
		out, _, code := cli("state", "logincount", "ada")
		bob, _, bcode := cli("state", "logincount", "bob")
		return code == 0 && strings.TrimSpace(out) == `{"login_count":2}` && bcode == 0 && strings.TrimSpace(bob) == `{"login_count":1}`
	})
	if out, errOut, code := cli("state", "logincount", "nobody"); code != 1 || out != "" || errOut != "logincount has no state for key \"nobody\"\n" {
		t.Fatalf("state of a key without state: exit %d, stdout %q, stderr %q; want 1 and a line saying so on stderr", code, out, errOut)
	}
	out, _, code := cli("state", "logincount")
	if code != 0 || out != "\"ada\"\n\"bob\"\n" {
		t.Fatalf("listing keys: exit %d\n%q", code, out)
	}
	out, _, code = cli("state", "logincount", "--dump")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 ||
		!strings.Contains(lines[0], `"key":"ada"`) || !strings.Contains(lines[0], `"value":{"login_count":2}`) {
		t.Fatalf("dump: exit %d\n%s", code, out)
	}
	var st struct {
		RowsIn    int `json:"rows_in"`
		StateKeys int `json:"state_keys"`
	}
	waitCLI(t, func() bool {
		out, _, code = cli("status", "logincount", "--json")
		return code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.RowsIn == 3 && st.StateKeys == 2
	})
	if out, _, code := cli("status", "logincount"); code != 0 || !strings.Contains(out, "rows in:             3\n") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	// Prometheus metrics, labelled by deployment, and the health endpoints. The sessions time
	// out 10 s (idle_timeout) after the logins, by the wall clock, and then hold no state, so
	// the state's gauge is only looked for (the status above counted the keys).
	waitCLI(t, func() bool {
		body := httpGet(t, metrics+"/metrics")
		return strings.Contains(body, `groupstate_input_rows_total{deployment="logincount"} 3`) &&
			strings.Contains(body, `groupstate_state_keys{deployment="logincount"} `) &&
			strings.Contains(body, `groupstate_batch_duration_seconds_count{deployment="logincount"}`)
	})
	// replay: the running module on the recorded history emits what was published (exit 0),
	// and so does the same logic in Rust; another module does not (exit 1, with the first
	// difference of each key, all of them in --json); a module that cannot be read is exit 2.
	for _, lang := range []string{"go", "rust"} {
		if out, errOut, code := cli("replay", "logincount", "--module", inRepo("samples/logincount/"+lang+"/logincount.wasm")); code != 0 ||
			!strings.Contains(out, "batches (3 input rows) of logincount") || !strings.Contains(out, "same outputs") {
			t.Fatalf("replay with the %s logincount: exit %d\n%s%s", lang, code, out, errOut)
		}
	}
	dedup := inRepo("samples/dedup/go/dedup.wasm")
	if out, errOut, code := cli("replay", "logincount", "--module", dedup, "--key", "ada"); code != 1 ||
		!strings.Contains(out, `key "ada", batch`) || strings.Contains(out, `key "bob"`) {
		t.Fatalf("replay of ada with another module: exit %d\n%s%s", code, out, errOut)
	}
	var rep struct {
		Differences []struct {
			Key string `json:"key"`
		} `json:"differences"`
	}
	rout, _, rcode := cli("replay", "logincount", "--module", dedup, "--json")
	keys := map[string]bool{}
	if rcode != 1 || json.Unmarshal([]byte(rout), &rep) != nil {
		t.Fatalf("replay --json with another module: exit %d\n%s", rcode, rout)
	}
	for _, d := range rep.Differences {
		keys[d.Key] = true
	}
	if len(keys) != 2 { // ada's and bob's outputs differ, in however many batches they came
		t.Fatalf("replay --json with another module: the differences of %v, want ada's and bob's\n%s", keys, rout)
	}
	if _, errOut, code := cli("replay", "logincount", "--module", inRepo("no.wasm")); code != 2 || !strings.Contains(errOut, "no.wasm") {
		t.Fatalf("replay with a missing module: exit %d\n%s", code, errOut)
	}
	// replay --spec: the spec's module and config; a spec reading another input is refused.
	if out, errOut, code := cli("replay", "logincount", "--spec", logincount); code != 0 || !strings.Contains(out, "same outputs") {
		t.Fatalf("replay --spec: exit %d\n%s%s", code, out, errOut)
	}
	other := filepath.Join(t.TempDir(), "other.yaml")
	orig, err := os.ReadFile(logincount)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte(strings.Replace(string(orig), `["logins.>"]`, `["other.>"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := cli("replay", "logincount", "--spec", other, "--module", inRepo("samples/logincount/go/logincount.wasm")); code != 2 || !strings.Contains(errOut, "needs the same input") {
		t.Fatalf("replay --spec with another input: exit %d\n%s", code, errOut)
	}
	if body := httpGet(t, metrics+"/readyz"); body != "ready\n" {
		t.Fatalf("/readyz: %q", body)
	}
	if body := httpGet(t, metrics+"/healthz"); body != "ok\n" {
		t.Fatalf("/healthz: %q", body)
	}
	// status --watch keeps printing until interrupted.
	wctx, wcancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	wout, _, _ := runCLIContext(wctx, "status", "logincount", "--json", "--watch=500ms", "--server", url)
	wcancel()
	if n := strings.Count(wout, `"name":"logincount"`); n < 3 {
		t.Fatalf("status --watch printed %d documents in 2.5s:\n%s", n, wout)
	}
	if out, _, code := cli("list"); code != 0 || !strings.Contains(out, "logincount") || !strings.Contains(out, "running") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	// list --json has the deployments and, beside them, the live runtime owning the one.
	listOut, _, code := cli("list", "--json")
	var listed struct {
		Deployments []struct {
			Name string `json:"name"`
		} `json:"deployments"`
		Runtimes []client.Runtime `json:"runtimes"`
	}
	if err := json.Unmarshal([]byte(listOut), &listed); code != 0 || err != nil || len(listed.Deployments) != 1 || len(listed.Runtimes) != 1 ||
		listed.Runtimes[0].Partitions != 1 || listed.Runtimes[0].ID == "" || listed.Runtimes[0].StartedAt.IsZero() {
		t.Fatalf("list --json: exit %d, %v\n%s", code, err, listOut)
	}
	// A shadow of logincount with the same module: diff finds the same outputs; promoted, it
	// replaces logincount, which is undeployed.
	v2 := filepath.Join(t.TempDir(), "logincount-v2.yaml")
	base, err := os.ReadFile(logincount)
	if err != nil {
		t.Fatal(err)
	}
	v2Spec := strings.Replace(strings.Replace(string(base), "name: logincount", "name: logincount-v2", 1),
		"module: go/logincount.wasm", "module: "+inRepo("samples/logincount/go/logincount.wasm"), 1)
	if err := os.WriteFile(v2, []byte(v2Spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := cli("deploy", "-f", v2, "--shadow", "logincount"); code != 0 || !strings.Contains(out, "a shadow of logincount") || !strings.Contains(out, "logincount.out.shadow") {
		t.Fatalf("deploy --shadow: exit %d\n%s%s", code, out, errOut)
	}
	if out, _, code := cli("list"); code != 0 || !strings.Contains(out, "logincount-v2 (shadow of logincount)") {
		t.Fatalf("list with a shadow: exit %d\n%s", code, out)
	}
	if _, errOut, code := cli("deploy", "-f", v2); code != 1 || !strings.Contains(errOut, "is a shadow of logincount") {
		t.Fatalf("deploying a shadow's name without --shadow: exit %d\n%s", code, errOut)
	}
	waitCLI(t, func() bool {
		out, _, code := cli("diff", "logincount", "logincount-v2")
		return code == 0 && strings.Contains(out, "same outputs") && strings.Contains(out, "3 input rows")
	})
	if out, errOut, code := cli("promote", "logincount-v2"); code != 0 || !strings.Contains(out, "promoted logincount-v2") {
		t.Fatalf("promote: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli("diff", "logincount", "logincount-v2"); code != 2 || !strings.Contains(errOut, `no such deployment: "logincount"`) {
		t.Fatalf("diff after promote: exit %d\n%s", code, errOut)
	}
	if out, _, code := cli("undeploy", "logincount-v2"); code != 0 || !strings.Contains(out, "undeployed logincount-v2") {
		t.Fatalf("undeploy: exit %d\n%s", code, out)
	}
	waitCLI(t, func() bool {
		out, _, code := cli("list")
		return code == 0 && strings.HasPrefix(out, "no deployments\n")
	})
	// The status of an undeployed name stays, stopped, with its counts.
	waitCLI(t, func() bool {
		out, _, code := cli("status", "logincount")
		return code == 0 && strings.Contains(out, "state:               stopped\n") && strings.Contains(out, "rows in:             3\n")
	})

	cancel()
	select {
	case code := <-exited:
		stopped = true
		if code != 0 {
			t.Fatalf("serve exited %d when its context was cancelled\n%s", code, serveLog.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not return after its context was cancelled\n%s", serveLog.String())
	}
	if log := serveLog.String(); !strings.Contains(log, "embedded NATS listening") || !strings.Contains(log, "runtime stopped") {
		t.Errorf("serve's log, on the standard error given to run, lacks its start and its stop:\n%s", log)
	}
	if serveOut.String() != "" {
		t.Errorf("serve wrote to standard output: %q", serveOut.String())
	}
}

// httpGet returns the body at url, or "" when the request fails.
func httpGet(t *testing.T, url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitTimeout bounds every wait for the runtime. It is generous because waits poll and end as
// soon as their condition holds: under the race detector, starting a deployment (compiling
// its module twice) takes about 25 seconds on 2 cores.
const waitTimeout = 90 * time.Second

// waitCLI polls cond until it holds, failing t after waitTimeout.
func waitCLI(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after %v", waitTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestParseStateCache: --state-cache takes sizes with units, 0 for no cache, and refuses the rest.
func TestParseStateCache(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		bad  bool
	}{
		{"64MiB", 64 << 20, false},
		{"1GiB", 1 << 30, false},
		{"0", -1, false}, // off
		{"12qq", 0, true},
		{"-5", 0, true},
	}
	for _, tt := range tests {
		got, err := parseStateCache(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("parseStateCache(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// startServe runs `serve --data dir` (plus extra flags) in-process on a free port until the
// test ends, waits until its runtime is a member, and returns its URL.
func startServe(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	var serveOut, serveLog syncBuffer
	exited := make(chan int, 1)
	args := append([]string{"serve", "--data", sharedCache(t, dir), "--listen", fmt.Sprintf("127.0.0.1:%d", port)}, extra...)
	go func() { exited <- run(ctx, args, &serveOut, &serveLog) }()
	t.Cleanup(func() { cancel(); <-exited })
	waitCLI(t, func() bool {
		select {
		case code := <-exited:
			exited <- code
			t.Fatalf("serve exited %d:\n%s", code, serveLog.String())
		default:
		}
		out, _, code := runCLI(t, "list", "--server", url)
		return code == 0 && strings.Contains(out, "\nRUNTIME ")
	})
	return url
}

// sharedCache makes the runtime's compilation cache under serve's data directory dataDir
// (DATA/runtime/cache) a link to the tests' shared one (testcache.Dir), so that a module
// compiles once per test run rather than in every serve; it returns dataDir.
func sharedCache(t *testing.T, dataDir string) string {
	t.Helper()
	if err := os.MkdirAll(testcache.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "runtime"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testcache.Dir(), filepath.Join(dataDir, "runtime", "cache")); err != nil {
		t.Fatal(err)
	}
	return dataDir
}
