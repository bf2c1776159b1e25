package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
)

// TestRetriesNotDropped: many deployments whose first start fails (their output streams
// cannot be created: a stream kept in memory captures their subjects) wait for a retry
// each; NATS then goes down for longer than any of those waits, so every retry comes due
// while the service's loop waits on NATS, and comes back (without the blocking stream, lost
// with the server's memory). Every deployment starts: none of the retries was dropped.
func TestRetriesNotDropped(t *testing.T) {
	const n = 40
	began := time.Now()
	j := testutil.StartJetStream(t)
	ctx := context.Background()
	_, err := j.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "BLOCK", Subjects: []string{"retry.out.>"}, Storage: jetstream.MemoryStorage})
	testutil.Require(t, err)

	nc, err := service.Connect(service.ConnOptions{URL: j.Server.ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	var logs syncBuffer
	svc, err := service.New(ctx, service.Options{CacheDir: testutil.CompileCacheDir(), DataDir: t.TempDir(), Conn: nc, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	testutil.Require(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	c, err := client.New(ctx, j.Conn, client.WithCacheDir(testutil.CompileCacheDir()))
	testutil.Require(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	wasm := testutil.ReadFile(t, "../../samples/logincount/c/logincount.wasm") // small: quick to compile
	name := func(i int) string { return fmt.Sprintf("retry%d", i) }
	for i := range n {
		sp := specFromYAML(t, fmt.Sprintf(`
name: %[1]s
module: unused.wasm
input:
  subjects: ["retry.in.%[2]d"]
key:
  field: user_id
timeout: processing_time
output:
  subject: retry.out.%[2]d
  stream: RETRY_OUT_%[2]d
dead_letter:
  subject: retry.dlq.%[2]d
  stream: RETRY_DLQ_%[2]d
config:
  idle_timeout: 10s
`, name(i), i))
		_, err := c.Deploy(ctx, sp, wasm)
		testutil.Require(t, err)
	}
	status := func(i int) string {
		st, err := c.Status(ctx, name(i))
		if err != nil {
			return ""
		}
		return st.State
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "every first start failed", func() bool {
		for i := range n {
			if status(i) != client.StatusFailed {
				return false
			}
		}
		return true
	})

	// NATS stays down for longer than the longest retry wait logged so far, so that every
	// pending retry comes due while the loop waits on NATS (the outage's length is what the
	// test sets up, not a wait for something to happen).
	var longest time.Duration
	for _, m := range regexp.MustCompile(`deployment could not start; retrying" deployment=\S+ in=(\S+)`).FindAllStringSubmatch(logs.String(), -1) {
		d, err := time.ParseDuration(m[1])
		testutil.Require(t, err)
		longest = max(longest, d)
	}
	t.Logf("every first start failed after %v; NATS down for %v", time.Since(began).Round(time.Millisecond), longest+time.Second)
	j.Stop()
	<-time.After(longest + time.Second) // the outage
	j.Start(t)

	var waiting []string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("NATS was down %v; not running: %v", longest+time.Second, waiting)
		}
	})
	testutil.EventuallyWithin(t, time.Minute, "every deployment running", func() bool {
		waiting = waiting[:0]
		for i := range n {
			if status(i) != client.StatusRunning {
				waiting = append(waiting, name(i))
			}
		}
		return len(waiting) == 0
	})
}
