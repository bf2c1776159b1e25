package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// totalsOf returns the logincount outputs on the output stream, in order, as user:total.
func (e *natsEnv) totalsOf() []string {
	e.t.Helper()
	var out []string
	for _, m := range e.streamMsgs("LOGINCOUNT_OUT") {
		var v struct {
			UserID string `json:"user_id"`
			Total  int    `json:"total_logins"`
		}
		testutil.Require(e.t, json.Unmarshal(m.Data, &v))
		out = append(out, v.UserID+":"+itoa(v.Total))
	}
	return out
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// waitOutputs waits until the output stream holds exactly want (user:total, in order).
func (e *natsEnv) waitOutputs(want ...string) {
	e.t.Helper()
	var got []string
	testutil.Eventually(e.t, "outputs "+strings.Join(want, " "), func() bool {
		got = e.totalsOf()
		return strings.Join(got, " ") == strings.Join(want, " ")
	})
}

// TestNewDiskReportsOrphaned: a runtime started on a new data directory, while the runtime
// that owns a deployment is gone, reports the deployment as orphaned, naming the gone owner
// and the two ways out; deploy --reset-state then starts it there from empty state at the
// current input position (rows the gone owner acknowledged are not processed again).
func TestNewDiskReportsOrphaned(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	first := env.startService(t.TempDir(), clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:2")
	st, err := env.client.Status(context.Background(), "logincount")
	testutil.Require(t, err)
	gone := st.Owner
	first.stop()

	env.startService(t.TempDir(), clock) // the first one's disk is lost
	env.waitStatus("logincount", "orphaned, naming the owner and the ways out", func(st *client.Status) bool {
		return st.State == client.StatusOrphaned && strings.Contains(st.Error, gone) &&
			strings.Contains(st.Error, "--reset-state") && strings.Contains(st.Error, "data directory")
	})

	_, err = env.client.Deploy(context.Background(), specFromYAML(t, logincountSpec), logincountWasm(t), client.ResetState())
	testutil.Require(t, err)
	env.waitStatus("logincount", "running on the new runtime", func(st *client.Status) bool {
		return st.State == client.StatusRunning && st.Owner != gone && st.Owner != ""
	})
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:2", "ada:1")
}

// TestResetStateOnItsOwner: deploy --reset-state on the runtime that runs the deployment
// empties its state and goes on at the current input position; the new outputs are not
// dropped as duplicates of the old ones (batch ids go on, so message ids do not repeat).
func TestResetStateOnItsOwner(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	env.startService(t.TempDir(), clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:2")
	before, err := env.client.Status(context.Background(), "logincount")
	testutil.Require(t, err)

	_, err = env.client.Deploy(context.Background(), specFromYAML(t, logincountSpec), logincountWasm(t), client.ResetState())
	testutil.Require(t, err)
	env.waitStatus("logincount", "restarted", func(st *client.Status) bool {
		return st.State == client.StatusRunning && st.StartedAt.After(before.StartedAt) && st.Owner == before.Owner
	})
	if _, found, err := env.client.State(context.Background(), "logincount", []byte(`"ada"`)); err != nil || found {
		t.Fatalf("ada's state after the reset: found %v, err %v", found, err)
	}
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:2", "ada:1")

	// The reset is done once: a restart of the runtime does not reset again.
	rec, err := env.client.Get(context.Background(), "logincount")
	testutil.Require(t, err)
	if rec.ResetState {
		t.Fatalf("the deployment record still asks for a reset after it was done")
	}
}
