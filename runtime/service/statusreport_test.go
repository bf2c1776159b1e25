package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// TestStatusCountersSurviveRestart: the status counters (rows in and out, batches, dead
// letters) are committed with the batches, so a runtime started again on the same data
// directory (after a stop, a crash or a failover) goes on from them instead of 0.
func TestStatusCountersSurviveRestart(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	dir := t.TempDir()
	clock := timeouts.NewManualClock(time.UnixMilli(5000))
	rs := env.startService(dir, clock)
	env.deploy(probeSpec, probeWasm(t))
	env.waitRunning("probe")
	env.publish("probe.in", `{"k":"a","ops":[{"emit":1}]}`, `{"k":"b","ops":[{"emit":2}]}`, `not json`)
	var before *client.Status
	testutil.Eventually(t, "3 rows in", func() bool {
		st, err := env.client.Status(ctx, "probe")
		before = st
		return err == nil && st.RowsIn == 3 && st.Emitted == 2 && st.DeadLetters == 1
	})
	if before.Batches == 0 {
		t.Fatalf("status before the restart counts no batch: %+v", before)
	}
	rs.stop()

	env.startService(dir, clock)
	env.publish("probe.in", `{"k":"c","ops":[{"emit":3}]}`)
	testutil.Eventually(t, "4 rows in after the restart", func() bool {
		st, err := env.client.Status(ctx, "probe")
		return err == nil && st.State == client.StatusRunning && st.RowsIn == 4
	})
	st, err := env.client.Status(ctx, "probe")
	testutil.Require(t, err)
	if st.Emitted != 3 || st.DeadLetters != 1 || st.Batches <= before.Batches {
		t.Fatalf("counters after the restart: %s, want rows out 3, dead letters 1, batches above %d", counters(st), before.Batches)
	}
}

func counters(st *client.Status) string {
	return fmt.Sprintf("batches %d rows in %d rows out %d dead letters %d", st.Batches, st.RowsIn, st.Emitted, st.DeadLetters)
}

// TestBlockedOutputsShowInStatus: while a deployment's committed outputs cannot be published
// (here its output stream is full, with discard new), its status reads blocked with the error,
// not running; once the stream takes them again they are delivered and it reads running.
func TestBlockedOutputsShowInStatus(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(5000)))
	env.deploy(probeSpec, probeWasm(t))
	env.waitRunning("probe")
	env.publish("probe.in", `{"k":"a","ops":[{"emit":1}]}`)
	env.waitStream("GS_PROBE_OUT", 1)

	setLimit := func(maxMsgs int64) {
		t.Helper()
		s, err := env.js.Stream(ctx, "GS_PROBE_OUT")
		testutil.Require(t, err)
		cfg := s.CachedInfo().Config
		cfg.MaxMsgs, cfg.Discard = maxMsgs, jetstream.DiscardNew
		_, err = env.js.UpdateStream(ctx, cfg)
		testutil.Require(t, err)
	}
	setLimit(1)
	env.publish("probe.in", `{"k":"b","ops":[{"emit":2}]}`)
	env.waitStatus("probe", "blocked", func(st *client.Status) bool {
		return st.State == client.StatusBlocked && st.Error != ""
	})
	setLimit(-1)
	env.waitStream("GS_PROBE_OUT", 2)
	env.waitStatus("probe", "running again", func(st *client.Status) bool {
		return st.State == client.StatusRunning && st.Error == ""
	})
}
