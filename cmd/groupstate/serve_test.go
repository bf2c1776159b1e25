package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemo: `groupstate demo` runs to completion on a fresh machine and every click ends up in
// a closed session.
func TestDemo(t *testing.T) {
	stdout, stderr, code := run(t, "demo")
	if code != 0 || !strings.Contains(stdout, "covering 600 of 600 clicks") || !strings.Contains(stdout, "0 late rows dropped, 0 dead letters") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServeDeployFlow is the README's flow with the real binary: serve with the embedded NATS,
// deploy logincount, publish, read state and status, undeploy, and stop with SIGTERM (exit 0).
func TestServeDeployFlow(t *testing.T) {
	port, metricsPort := freePort(t), freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	metrics := fmt.Sprintf("http://127.0.0.1:%d", metricsPort)
	serve := exec.Command(groupstateBin(t), "serve", "--data", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--metrics", fmt.Sprintf("127.0.0.1:%d", metricsPort))
	var serveLog bytes.Buffer
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			serve.Process.Kill()
			serve.Wait()
		}
	}()
	cli := func(args ...string) (string, string, int) {
		return run(t, append(args, "--server", url)...)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, _, code := cli("list"); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not come up:\n%s", serveLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	if out, errOut, code := cli("deploy", "-f", "samples/logincount/logincount.yaml"); code != 0 || !strings.Contains(out, "deployed logincount") {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := cli("deploy", "-f", "samples/logincount/logincount.yaml", "--module", "README.md"); code == 0 || !strings.Contains(errOut, "not a WebAssembly binary") {
		t.Fatalf("deploying a bad module: exit %d\n%s", code, errOut)
	}
	// The input stream exists once the runtime started the deployment.
	waitCLI(t, func() bool {
		out, _, code := cli("status", "logincount", "--json")
		return code == 0 && strings.Contains(out, `"state": "running"`)
	})
	pub := exec.Command(groupstateBin(t), "pub", "logins.web", "--server", url, "--rate", "200")
	pub.Dir = "../.."
	pub.Stdin = strings.NewReader("{\"user_id\":\"ada\"}\n{\"user_id\":\"ada\"}\n\n{\"user_id\":\"bob\"}\n")
	if out, err := pub.CombinedOutput(); err != nil || !strings.Contains(string(out), "published 3 messages") {
		t.Fatalf("pub: %v\n%s", err, out)
	}
	waitCLI(t, func() bool {
		out, _, code := cli("state", "logincount", "ada")
		return code == 0 && strings.TrimSpace(out) == `{"login_count":2}`
	})
	if _, _, code := cli("state", "logincount", "nobody"); code != 1 {
		t.Fatalf("state of a key without state: exit %d, want 1", code)
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
	out, _, code = cli("status", "logincount", "--json")
	var st struct {
		RowsIn    int `json:"rows_in"`
		StateKeys int `json:"state_keys"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.RowsIn != 3 || st.StateKeys != 2 {
		waitCLI(t, func() bool {
			out, _, code = cli("status", "logincount", "--json")
			return code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.RowsIn == 3 && st.StateKeys == 2
		})
	}
	// Prometheus metrics, labelled by deployment, and the health endpoints.
	waitCLI(t, func() bool {
		body := httpGet(t, metrics+"/metrics")
		return strings.Contains(body, `groupstate_input_rows_total{deployment="logincount"} 3`) &&
			strings.Contains(body, `groupstate_state_keys{deployment="logincount"} 2`) &&
			strings.Contains(body, `groupstate_batch_duration_seconds_count{deployment="logincount"}`)
	})
	if body := httpGet(t, metrics+"/readyz"); body != "ready\n" {
		t.Fatalf("/readyz: %q", body)
	}
	if body := httpGet(t, metrics+"/healthz"); body != "ok\n" {
		t.Fatalf("/healthz: %q", body)
	}
	// status --watch keeps printing until interrupted.
	wctx, wcancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	watch := exec.CommandContext(wctx, groupstateBin(t), "status", "logincount", "--json", "--watch=500ms", "--server", url)
	wout, _ := watch.Output()
	wcancel()
	if n := strings.Count(string(wout), `"name":"logincount"`); n < 3 {
		t.Fatalf("status --watch printed %d documents in 2.5s:\n%s", n, wout)
	}
	if out, _, code := cli("list"); code != 0 || !strings.Contains(out, "logincount") || !strings.Contains(out, "running") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	if out, _, code := cli("undeploy", "logincount"); code != 0 || !strings.Contains(out, "undeployed logincount") {
		t.Fatalf("undeploy: exit %d\n%s", code, out)
	}

	serve.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	select {
	case err := <-done:
		stopped = true
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM\n%s", err, serveLog.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM\n%s", serveLog.String())
	}
}

func httpGet(t *testing.T, url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitCLI(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
