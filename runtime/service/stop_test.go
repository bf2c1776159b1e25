package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

const probeSpec = `
name: probe
module: unused.wasm
input: {subjects: ["probe.in"]}
key: {field: k}
timeout: processing_time
output: {subject: probe.out}
limits: {call_timeout: 5m}
`

// TestCleanStopWritesStopped: a clean stop of the runtime (Run's context cancelled) leaves
// every deployment's status at stopped, not running.
func TestCleanStopWritesStopped(t *testing.T) {
	env := startNATS(t)
	rs := env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(5000)))
	env.deploy(probeSpec, probeWasm(t))
	env.waitRunning("probe")
	rs.stop()
	st, err := env.client.Status(context.Background(), "probe")
	testutil.Require(t, err)
	if st.State != client.StatusStopped {
		t.Fatalf("status after a clean stop: %q, want %q", st.State, client.StatusStopped)
	}
}

// TestLoopingHandlerStopsPromptly: a handler that loops (far below its call_timeout) does
// not hold up an undeploy or a redeploy: the running batch is cancelled, nothing of it is
// committed, and its input is redelivered to the next revision.
func TestLoopingHandlerStopsPromptly(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(5000)))
	env.deploy(probeSpec, probeWasm(t))
	env.waitRunning("probe")
	env.publish("probe.in", `{"k":"a","ops":[{"emit":"ok"}]}`)
	env.waitStream("GS_PROBE_OUT", 1)
	env.publish("probe.in", `{"k":"b","ops":[{"emit":"never"},{"loop":true}]}`)
	testutil.Eventually(t, "the looping batch in flight", func() bool {
		c := env.consumerInfo("GS_PROBE_IN", "probe")
		return c.NumPending == 0 && c.NumAckPending > 0
	})
	// A redeploy (a new config) replaces the looping revision within seconds.
	before, err := env.client.Status(ctx, "probe")
	testutil.Require(t, err)
	start := time.Now()
	env.deploy(probeSpec+"config: {revision: 1}\n", probeWasm(t))
	testutil.EventuallyWithin(t, 20*time.Second, "the new revision running", func() bool {
		st, err := env.client.Status(ctx, "probe")
		return err == nil && st.State == client.StatusRunning && st.StartedAt.After(before.StartedAt)
	})
	t.Logf("redeploy took %s", time.Since(start))
	// The new revision got the row again (it loops again); an undeploy stops it promptly too.
	start = time.Now()
	err = env.client.Undeploy(ctx, "probe")
	testutil.Require(t, err)
	testutil.EventuallyWithin(t, 20*time.Second, "stopped", func() bool {
		st, err := env.client.Status(ctx, "probe")
		return err == nil && st.State == client.StatusStopped
	})
	t.Logf("undeploy took %s", time.Since(start))
	if n := len(env.streamMsgs("GS_PROBE_OUT")); n != 1 {
		t.Fatalf("outputs %d: something of a cancelled batch was committed", n)
	}
}

// TestShutdownDrains: a clean stop (SIGTERM) lets the batch in flight finish and commit, as
// the serve command promises; only undeploy and redeploy cancel it. The batch here runs a
// looping key until its call_timeout, which dead-letters the key: the dead letter is there
// after the stop only if the batch committed.
func TestShutdownDrains(t *testing.T) {
	env := startNATS(t)
	rs := env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(5000)))
	env.deploy(strings.Replace(probeSpec, "call_timeout: 5m", "call_timeout: 1s", 1), probeWasm(t))
	env.waitRunning("probe")
	env.publish("probe.in", `{"k":"b","ops":[{"loop":true}]}`)
	testutil.Eventually(t, "the looping batch in flight", func() bool {
		c := env.consumerInfo("GS_PROBE_IN", "probe")
		return c.NumPending == 0 && c.NumAckPending > 0
	})
	rs.stop()
	if dlq := env.streamMsgs("GS_PROBE_DLQ"); len(dlq) != 1 {
		t.Fatalf("the batch in flight at the stop was not committed: %d dead letters, want 1", len(dlq))
	}
}
