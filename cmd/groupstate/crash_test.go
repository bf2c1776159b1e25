package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/replay"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/runtime/spec"
)

// groupstateBin builds the real binary once per test run, for the tests that need a process of
// its own: one to kill -9, or to send signals to. Every other test runs commands in-process
// through run.
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

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// TestServeSignals: the real binary's serve stops on SIGTERM and on SIGINT (Ctrl-C), the
// runtime stopped in order, and exits 0.
func TestServeSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			serve := exec.Command(groupstateBin(t), "serve", "--data", sharedCache(t, t.TempDir()),
				"--listen", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--metrics", metrics)
			var log syncBuffer
			serve.Stdout, serve.Stderr = &log, &log
			if err := serve.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- serve.Wait() }()
			defer func() {
				serve.Process.Kill()
				<-done
			}()
			waitCLI(t, func() bool { return httpGet(t, "http://"+metrics+"/readyz") == "ready\n" })
			if err := serve.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				done <- err // for the deferred Kill and wait
				if err != nil {
					t.Fatalf("serve exited with %v after %v\n%s", err, sig, log.String())
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("serve did not exit after %v\n%s", sig, log.String())
			}
			if !strings.Contains(log.String(), "runtime stopped") {
				t.Errorf("serve did not log that the runtime stopped:\n%s", log.String())
			}
		})
	}
}

const crashDedupSpec = `
name: dedup
module: %s/samples/dedup/go/dedup.wasm
input: {subjects: ["events.>"]}
key: {field: event_id}
timeout: processing_time
output: {subject: dedup.out, stream: DEDUP_OUT}
config: {ttl: 1h}
`

const crashCountSpec = `
name: counts
module: %s/samples/logincount/go/logincount.wasm
input: {subjects: ["logins.>"]}
key: {field: user_id}
timeout: processing_time
output: {subject: counts.out, stream: COUNTS_OUT}
`

// TestKill9 runs `groupstate serve` as a real process against an external NATS server and
// kills it with SIGKILL at random moments while rows arrive, several times. Afterwards every
// key's state and the output streams must be what a run without crashes gives: each unique
// event exactly once on the dedup output, each user's count equal to the rows published for
// them, and no output message twice.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: t.TempDir(), Port: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	url := srv.ClientURL()
	nc, err := service.Connect(service.ConnOptions{URL: url, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	gs, err := client.New(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close(ctx)
	js, _ := jetstream.New(nc)

	dataDir := sharedCache(t, t.TempDir())
	var (
		mu    sync.Mutex
		serve *exec.Cmd
	)
	start := func() {
		cmd := exec.Command(groupstateBin(t), "serve", "--server", url, "--data", dataDir, "--log-level", "warn")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		serve = cmd
		mu.Unlock()
	}
	start()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		serve.Process.Kill()
		serve.Wait()
	}()
	for _, tmpl := range []string{crashDedupSpec, crashCountSpec} {
		sp, err := spec.ParseSpec([]byte(fmt.Sprintf(tmpl, repoRoot)))
		if err != nil {
			t.Fatal(err)
		}
		wasm, err := os.ReadFile(sp.Module)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gs.Deploy(ctx, sp, wasm); err != nil {
			t.Fatal(err)
		}
	}
	waitCLI(t, func() bool {
		a, err1 := gs.Status(ctx, "dedup")
		b, err2 := gs.Status(ctx, "counts")
		return err1 == nil && err2 == nil && a.State == client.StatusRunning && b.State == client.StatusRunning
	})

	// Publish while a killer kills and restarts the runtime.
	const rows = 3000
	unique := map[string]bool{}
	perUser := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range rows {
			id := fmt.Sprintf("e%05d", i)
			if i%10 == 9 {
				id = fmt.Sprintf("e%05d", i-5) // a duplicate of an earlier event
			}
			unique[id] = true
			user := fmt.Sprintf("u%02d", i%37)
			perUser[user]++
			for subj, data := range map[string]string{
				"events.web": fmt.Sprintf(`{"event_id":%q,"n":%d}`, id, i),
				"logins.web": fmt.Sprintf(`{"user_id":%q}`, user),
			} {
				if _, err := js.Publish(ctx, subj, []byte(data)); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
			}
			if i%50 == 49 {
				time.Sleep(50 * time.Millisecond) // rows keep arriving across several kills
			}
		}
	}()
	rng := rand.New(rand.NewPCG(7, 9))
	kills := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-time.After(time.Duration(200+rng.IntN(700)) * time.Millisecond):
			mu.Lock()
			serve.Process.Signal(syscall.SIGKILL)
			serve.Wait()
			mu.Unlock()
			kills++
			start()
		}
	}
	if kills < 4 {
		t.Fatalf("only %d kills happened; the publisher was too fast to test anything", kills)
	}

	// Everything is processed exactly once.
	var outs []*jetstream.RawStreamMsg
	deadline := time.Now().Add(60 * time.Second)
	for {
		outs = streamMessages(t, js, "DEDUP_OUT")
		st, err := gs.Status(ctx, "counts")
		if len(outs) >= len(unique) && err == nil && st.InputLag == 0 && st.Position == rows {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d kills: %d of %d unique events out", kills, len(outs), len(unique))
		}
		time.Sleep(100 * time.Millisecond)
	}
	seen := map[string]bool{}
	for _, m := range outs {
		var v struct {
			ID string `json:"event_id"`
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			t.Fatal(err)
		}
		if seen[v.ID] {
			t.Fatalf("event %s output twice", v.ID)
		}
		seen[v.ID] = true
	}
	if len(seen) != len(unique) {
		t.Fatalf("%d unique events out, want %d", len(seen), len(unique))
	}
	for user, n := range perUser {
		ks, found, err := gs.State(ctx, "counts", client.KeyFromArg(user))
		if err != nil || !found || string(ks.Value) != fmt.Sprintf(`{"login_count":%d}`, n) {
			t.Fatalf("state of %s: %+v found=%v err=%v; want %d logins", user, ks, found, err, n)
		}
	}
	counted := map[string]bool{}
	for _, m := range streamMessages(t, js, "COUNTS_OUT") {
		if counted[string(m.Data)] {
			t.Fatalf("output %s twice", m.Data)
		}
		counted[string(m.Data)] = true
	}
	t.Logf("%d rows, %d kills, %d unique events out once each, %d count outputs, no losses, no duplicates", rows, kills, len(seen), len(counted))

	// The history the kills cut up replays, with each deployment's module, to the very
	// outputs it published.
	for _, name := range []string{"dedup", "counts"} {
		d, err := gs.Get(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		wasm, err := os.ReadFile(d.Spec.Module)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := replay.Run(ctx, replay.Options{JS: js, Spec: d.Spec, Module: wasm})
		if err != nil {
			t.Fatalf("replay of %s: %v", name, err)
		}
		if !rep.Same() || rep.Rows != rows || rep.Equal == 0 {
			t.Fatalf("replay of %s after %d kills: %+v, want all %d rows run and the same outputs", name, kills, rep, rows)
		}
		t.Logf("replay of %s: %d batches, %d rows, %d outputs equal", name, rep.Batches, rep.Rows, rep.Equal)
	}
}

// streamMessages returns every message in the stream name (none when it does not exist).
func streamMessages(t *testing.T, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	ctx := context.Background()
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		out = append(out, m)
	}
	return out
}
