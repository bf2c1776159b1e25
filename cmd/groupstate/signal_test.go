package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowStopSpec deploys the probe handler with a call_timeout far longer than any test, so a
// looping row keeps a batch in flight, and a clean stop, which lets that batch finish, waits.
const slowStopSpec = `
name: probe
module: probe.wasm
input: {subjects: ["probe.in"]}
key: {field: k}
timeout: processing_time
output: {subject: probe.out}
limits: {call_timeout: 10m}
`

// loopingRow logs loopingMark through the host, then loops until the call_timeout.
const (
	loopingMark = "probe-about-to-loop"
	loopingRow  = `{"k":"a","ops":[{"log":"` + loopingMark + `"},{"loop":true}]}`
)

// stoppingMark is what main writes to the standard error on the first signal.
const stoppingMark = "stopping (a second signal exits at once)"

// Bounds of TestServeSecondSignal: a drain must still be waiting drainHolds after the first
// signal, and the second signal must end the process within secondSignalExit.
const (
	drainHolds       = 2 * time.Second
	secondSignalExit = 5 * time.Second
	stoppingSaid     = 10 * time.Second // main writes stoppingMark as soon as the signal arrives
)

// TestServeSecondSignal: while the first SIGTERM or SIGINT drains (a looping handler keeps
// its batch in flight, and a clean stop waits for it), serve does not exit; a second signal
// makes the real binary exit at once with code 130.
func TestServeSecondSignal(t *testing.T) {
	tests := []struct{ first, second syscall.Signal }{
		{syscall.SIGTERM, syscall.SIGTERM},
		{syscall.SIGINT, syscall.SIGINT},
	}
	bin := groupstateBin(t)
	dir := t.TempDir()
	specPath := filepath.Join(dir, "probe.yaml")
	rowsPath := filepath.Join(dir, "rows.jsonl")
	cache := filepath.Join(dir, "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{specPath: slowStopSpec, rowsPath: loopingRow + "\n"} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range tests {
		t.Run(tc.first.String()+"+"+tc.second.String(), func(t *testing.T) {
			port := freePort(t)
			url := fmt.Sprintf("nats://127.0.0.1:%d", port)
			data := t.TempDir()
			// The cases share the runtime's compilation cache: compiling the probe is most of
			// a case's time, and only the first needs to.
			if err := os.Mkdir(filepath.Join(data, "runtime"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(cache, filepath.Join(data, "runtime", "cache")); err != nil {
				t.Fatal(err)
			}
			serve := exec.Command(bin, "serve", "--data", data, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
			var log syncBuffer
			serve.Stdout, serve.Stderr = &log, &log
			began := time.Now()
			if err := serve.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- serve.Wait() }()
			defer func() {
				serve.Process.Kill()
				<-done
			}()
			// await polls cond until it holds, failing when serve exits first or after within.
			await := func(within time.Duration, what string, cond func() bool) {
				t.Helper()
				deadline := time.Now().Add(within)
				for !cond() {
					select {
					case err := <-done:
						done <- err // for the deferred wait
						t.Fatalf("serve exited (%v) while the test waited for %s:\n%s", err, what, log.String())
					default:
					}
					if time.Now().After(deadline) {
						t.Fatalf("still no %s after %v:\n%s", what, within, log.String())
					}
					time.Sleep(50 * time.Millisecond)
				}
				t.Logf("%s after %v", what, time.Since(began).Round(time.Millisecond))
			}
			cli := func(args ...string) (string, string, int) {
				return runCLI(t, append(args, "--server", url)...)
			}
			await(waitTimeout, "serve accepting commands", func() bool {
				_, _, code := cli("list")
				return code == 0
			})
			// Deploy through the binary: deploy compiles the module to check it, which takes
			// the race detector's test process ten times as long.
			if out, err := exec.Command(bin, "deploy", "-f", specPath, "--module", inRepo("runtime/engine/testdata/probe/probe.wasm"), "--server", url).CombinedOutput(); err != nil {
				t.Fatalf("deploy: %v\n%s", err, out)
			}
			await(waitTimeout, "the deployment running", func() bool {
				out, _, code := cli("status", "probe", "--json")
				return code == 0 && strings.Contains(out, `"state": "running"`)
			})
			if out, errOut, code := cli("pub", "probe.in", "--file", rowsPath); code != 0 {
				t.Fatalf("pub: exit %d\n%s%s", code, out, errOut)
			}
			// The handler logs just before it loops: from then on its batch is in flight.
			await(waitTimeout, "the looping batch in flight", func() bool { return strings.Contains(log.String(), loopingMark) })

			if err := serve.Process.Signal(tc.first); err != nil {
				t.Fatal(err)
			}
			await(stoppingSaid, "serve draining after the first signal", func() bool { return strings.Contains(log.String(), stoppingMark) })
			// The drain really waits for the batch: one signal alone does not end serve. (A
			// negative can only be watched for a while; the batch loops for 10 minutes.)
			select {
			case err := <-done:
				done <- err
				t.Fatalf("serve exited (%v) within %v of one %v while a batch was in flight:\n%s", err, drainHolds, tc.first, log.String())
			case <-time.After(drainHolds):
			}

			sent := time.Now()
			if err := serve.Process.Signal(tc.second); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-done:
				done <- err
			case <-time.After(secondSignalExit):
				t.Fatalf("serve still running %v after a second signal (%v):\n%s", secondSignalExit, tc.second, log.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 {
				t.Fatalf("serve ended with %v after the second signal, want exit code 130:\n%s", err, log.String())
			}
			if !strings.Contains(log.String(), "second signal") {
				t.Errorf("serve did not say why it exited:\n%s", log.String())
			}
			t.Logf("exited 130 %v after the second signal", time.Since(sent).Round(time.Millisecond))
		})
	}
}
