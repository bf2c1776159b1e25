package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// TestDrain: undeploy --drain of a deployment split into partitions fires every key's
// timeout in every partition (logincount closes each user's session), though the clock is
// far from them; each partition reads drained; a second drain runs no batch (it reports the
// first one's); the undeploy then removes the deployment. (That a drained partition takes no
// more input is not checked here: only the absence of a batch over some time would show it.)
func TestDrain(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	env.startRuntime(t.TempDir(), clock)
	env.deploy(partitionedSpec, logincountWasm(t))
	testutil.EventuallyWithin(t, compileDeadline, "4 partitions running", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && st.State == client.StatusRunning && len(st.Partitions) == 4
	})
	users := loginUsers(6)
	env.loginRound(users)
	env.waitCounted(users, 1)

	ctx, cancel := context.WithTimeout(context.Background(), compileDeadline)
	defer cancel()
	rep, err := env.client.Drain(ctx, "logincount")
	testutil.Require(t, err)
	if rep.Partitions != 4 || rep.TimeoutCalls != len(users) || rep.Emitted != len(users) {
		t.Fatalf("drain report %+v, want 4 partitions, %d timeout calls and rows", rep, len(users))
	}
	testutil.Eventually(t, "every session closed", func() bool {
		closed := map[string]bool{} // counted afresh at each poll: a row seen before is not a second close
		for _, m := range env.streamMsgs("LOGINCOUNT_OUT") {
			var v struct {
				UserID string `json:"user_id"`
				Closed bool   `json:"session_closed"`
			}
			testutil.Require(t, json.Unmarshal(m.Data, &v))
			if v.Closed {
				if closed[v.UserID] {
					t.Fatalf("%s's session closed twice", v.UserID)
				}
				closed[v.UserID] = true
			}
		}
		return len(closed) == len(users)
	})
	testutil.Eventually(t, "every partition drained", func() bool {
		st, err := env.client.Status(ctx, "logincount")
		if err != nil || len(st.Partitions) != 4 {
			return false
		}
		for p := range 4 {
			ps, err := env.client.Status(ctx, "logincount."+string(rune('0'+p)))
			if err != nil || ps.State != client.StatusDrained {
				return false
			}
		}
		return true
	})
	again, err := env.client.Drain(ctx, "logincount")
	testutil.Require(t, err)
	if again != rep {
		t.Fatalf("a second drain reported %+v, want the first's %+v (no new batch)", again, rep)
	}
	testutil.Require(t, env.client.Undeploy(ctx, "logincount"))
}
