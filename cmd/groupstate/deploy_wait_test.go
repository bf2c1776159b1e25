package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/service"
)

// TestDeployMeansReady: once deploy exits 0 (deploy -f SPEC or deploy SPEC, saying no
// revision number), rows published at once, with core NATS and with
// JetStream, are all kept and processed: with the default wait (until the deployment runs)
// and with --wait=false (until its input streams exist). Without a runtime, deploy gives up
// after --timeout saying what it waited for; a revision the runtime cannot start makes it fail
// with the runtime's reason. Shells complete deployment names.
func TestDeployMeansReady(t *testing.T) {
	url := startServe(t, t.TempDir())
	cli := func(args ...string) (string, string, int) { return runCLI(t, append(args, "--server", url)...) }
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	logincount := inRepo("samples/logincount/logincount.yaml")
	logincountWasm := inRepo("samples/logincount/go/logincount.wasm")
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"default", nil, "logincount is running"},
		{"--wait=false", []string{"--wait=false"}, "input streams exist"},
	} {
		if c.name == "--wait=false" {
			if _, errOut, code := cli("undeploy", "logincount"); code != 0 {
				t.Fatalf("undeploy: %s", errOut)
			}
		}
		deploy := []string{"deploy", "-f", logincount}
		if c.name == "--wait=false" {
			deploy = []string{"deploy", logincount} // the spec as an argument, without -f
		}
		out, errOut, code := cli(append(deploy, c.args...)...)
		if code != 0 || !strings.Contains(out, c.says) {
			t.Fatalf("%s: deploy exit %d\n%s%s", c.name, code, out, errOut)
		}
		if strings.Contains(out, "revision") {
			t.Errorf("%s: deploy names a revision (the bucket's, which a first deploy may see at 10):\n%s", c.name, out)
		}
		// At once: 10 rows with core NATS, 10 with JetStream, each a new user.
		for i := range 10 {
			if err := nc.Publish("logins.web", []byte(fmt.Sprintf(`{"user_id":"%s-core-%d"}`, strings.TrimPrefix(c.name, "--"), i))); err != nil {
				t.Fatal(err)
			}
			if _, err := js.Publish(context.Background(), "logins.web", []byte(fmt.Sprintf(`{"user_id":"%s-js-%d"}`, strings.TrimPrefix(c.name, "--"), i))); err != nil {
				t.Fatalf("%s: a JetStream publish right after deploy: %v", c.name, err)
			}
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		waitCLI(t, func() bool {
			out, _, code := cli("state", "logincount")
			return code == 0 && strings.Count(out, "\n") >= 20
		})
	}

	// Shells complete deployment names.
	if out, _, code := runCLI(t, "__complete", "status", "--server", url, ""); code != 0 || !strings.Contains(out, "logincount\n") {
		t.Errorf("completing a deployment name: exit %d\n%s", code, out)
	}

	// A NATS server without a runtime: deploy stores the deployment, then says what it waited
	// for and that no runtime took it.
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: t.TempDir(), Port: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	_, errOut, code := runCLI(t, "deploy", "-f", logincount, "--server", srv.ClientURL(), "--timeout", "2s")
	if code == 0 || !strings.Contains(errOut, "waiting for the runtime to create the input streams") || !strings.Contains(errOut, "not ready") ||
		!strings.Contains(errOut, "is groupstate serve running?") {
		t.Fatalf("deploy without a runtime: exit %d\n%s", code, errOut)
	}

	// A revision the runtime cannot start makes deploy fail with the runtime's reason: while
	// deploy waits for a runtime, a user makes the stream its spec names (input.stream), with
	// other subjects; the runtime that then starts refuses to change that stream.
	failing := filepath.Join(t.TempDir(), "failing.yaml")
	if err := os.WriteFile(failing, []byte(fmt.Sprintf(`name: failing
module: %s
input: {subjects: ["failing.in"], stream: TAKEN}
key: {field: user_id}
timeout: processing_time
output: {subject: failing.out}
config: {idle_timeout: 10s}
`, logincountWasm)), 0o600); err != nil {
		t.Fatal(err)
	}
	var deployErr syncBuffer
	deployed := make(chan int, 1)
	go func() {
		deployed <- run(context.Background(), []string{"deploy", "-f", failing, "--server", srv.ClientURL(), "--timeout", "2m"}, io.Discard, &deployErr)
	}()
	waitCLI(t, func() bool {
		return strings.Contains(deployErr.String(), "waiting for the runtime to create the input streams")
	})
	njs, err := jetstream.New(mustConnect(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := njs.CreateStream(context.Background(), jetstream.StreamConfig{Name: "TAKEN", Subjects: []string{"taken.>"}}); err != nil {
		t.Fatal(err)
	}
	serveCtx, stopServe := context.WithCancel(context.Background())
	served := make(chan int, 1)
	go func() {
		served <- run(serveCtx, []string{"serve", "--server", srv.ClientURL(), "--data", sharedCache(t, t.TempDir()), "--log-level", "error"}, io.Discard, io.Discard)
	}()
	defer func() { stopServe(); <-served }()
	select {
	case code := <-deployed:
		if code == 0 || !strings.Contains(deployErr.String(), "failed to start") || !strings.Contains(deployErr.String(), "TAKEN") {
			t.Errorf("deploying a revision the runtime cannot start: exit %d\n%s", code, deployErr.String())
		}
	case <-time.After(waitTimeout):
		t.Fatalf("deploy still waiting after %v for a revision the runtime refused:\n%s", waitTimeout, deployErr.String())
	}

	// pub to a subject no stream captures fails without claiming it published anything.
	rows := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(rows, []byte("{\"user_id\":\"ada\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCLI(t, "pub", "nowhere.at.all", "--file", rows, "--server", srv.ClientURL())
	if code == 0 || !strings.Contains(errOut, "no JetStream stream captures nowhere.at.all") || strings.Contains(errOut, "published") {
		t.Fatalf("pub to an uncaptured subject: exit %d\n%s", code, errOut)
	}
}

// mustConnect connects to the NATS server at url until the test ends.
func mustConnect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
