package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/timeouts"
)

// TestConsumerDeletedHeals: after the input consumer is deleted while the deployment runs, the
// status shows the fault and rows published afterwards are processed.
func TestConsumerDeletedHeals(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	env.startService(t.TempDir(), clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 1})

	testutil.Require(t, env.js.DeleteConsumer(context.Background(), logincountIn, topology.Consumer("logincount")))
	env.publish("logins.web", `{"user_id":"ada"}`, `{"user_id":"bob"}`)
	env.waitTotals(map[string]int{"ada": 2, "bob": 1})
	env.waitStatus("logincount", "the fault in LastError", func(st *client.Status) bool {
		return st.LastError != "" && st.Error == ""
	})
}

// TestOutputStreamDeletedHeals: after the output stream is deleted, the runtime re-creates it
// and the outputs held in the outbox arrive; the status shows the error meanwhile.
func TestOutputStreamDeletedHeals(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	env.startService(t.TempDir(), clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 1})

	testutil.Require(t, env.js.DeleteStream(context.Background(), "LOGINCOUNT_OUT"))
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 2})
	env.waitStatus("logincount", "the fault in LastError", func(st *client.Status) bool {
		return st.LastError != "" && st.Error == ""
	})
}
