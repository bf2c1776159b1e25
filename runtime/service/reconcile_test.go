package service_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

const logincountIn = "GS_LOGINCOUNT_IN"

// waitStatus waits until the deployment's status satisfies cond and returns it.
func (e *natsEnv) waitStatus(name, what string, cond func(st *client.Status) bool) *client.Status {
	e.t.Helper()
	var st *client.Status
	testutil.EventuallyWithin(e.t, compileDeadline, what, func() bool {
		s, err := e.client.Status(context.Background(), name)
		if err != nil {
			return false
		}
		st = s
		return cond(s)
	})
	return st
}

// TestInputStreamRecreated: after the input stream is deleted and re-created while the
// runtime is stopped (its sequences start again at 1, below the committed position), every
// row of the new stream is processed, and the status says what happened.
func TestInputStreamRecreated(t *testing.T) {
	env := startNATS(t)
	dataDir := t.TempDir()
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	svc := env.startService(dataDir, clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`, `{"user_id":"ada"}`, `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 3})
	svc.stop()

	ctx := context.Background()
	st, err := env.js.Stream(ctx, logincountIn)
	testutil.Require(t, err)
	cfg := st.CachedInfo().Config
	testutil.Require(t, env.js.DeleteStream(ctx, logincountIn))
	_, err = env.js.CreateStream(ctx, cfg)
	testutil.Require(t, err)
	env.publish("logins.web", `{"user_id":"bob"}`, `{"user_id":"bob"}`, `{"user_id":"bob"}`, `{"user_id":"bob"}`)

	env.startService(dataDir, clock)
	env.waitStatus("logincount", "4 rows in, the re-created stream reported", func(st *client.Status) bool {

		return st.RowsIn == 3+4 && strings.Contains(st.LastError, "re-created") // the counters go on from the 3 rows before
	})
	env.waitTotals(map[string]int{"ada": 3, "bob": 4})
}

// outputsOf returns the logincount outputs (user and total) in stream order.
func (e *natsEnv) outputsOf() []string {
	var out []string
	for _, m := range e.streamMsgs("LOGINCOUNT_OUT") {
		var v struct {
			UserID string `json:"user_id"`
			Total  int    `json:"total_logins"`
		}
		testutil.Require(e.t, json.Unmarshal(m.Data, &v))
		out = append(out, v.UserID+":"+string(rune('0'+v.Total)))
	}
	return out
}

// TestRestoredBackup: a data directory restored from a backup is behind the consumer's ack
// floor. Every row acknowledged after the backup is processed again, and its outputs reach
// the output stream (the batch ids repeat, but the message ids do not).
func TestRestoredBackup(t *testing.T) {
	env := startNATS(t)
	dataDir := t.TempDir()
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	svc := env.startService(dataDir, clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`, `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 2})
	svc.stop()
	backup := t.TempDir() + "/backup"
	testutil.Require(t, os.CopyFS(backup, os.DirFS(dataDir)))
	before := len(env.outputsOf())

	svc = env.startService(dataDir, clock)
	env.waitRunning("logincount")
	for i := 0; i < 3; i++ { // one batch each: three outputs
		env.publish("logins.web", `{"user_id":"bob"}`)
		env.waitTotals(map[string]int{"ada": 2, "bob": i + 1})
	}
	svc.stop()
	after := env.outputsOf()

	testutil.Require(t, os.RemoveAll(dataDir))
	testutil.Require(t, os.CopyFS(dataDir, os.DirFS(backup)))
	env.startService(dataDir, clock)
	env.waitStatus("logincount", "the 3 rows after the backup processed again, reported", func(st *client.Status) bool {
		return st.RowsIn == 2+3 && strings.Contains(st.LastError, "backup") // the backup's 2, then the 3 after it again
	})
	testutil.Eventually(t, "outputs of the rows after the backup published again", func() bool {
		outs := env.outputsOf()
		return len(outs) > len(after) && outs[len(outs)-1] == "bob:3"
	})
	if len(after)-before != 3 {
		t.Fatalf("outputs after the backup: %v (from %d)", after, before)
	}
	c := env.consumerInfo(logincountIn, "logincount")
	if c.AckFloor.Stream != 5 {
		t.Fatalf("ack floor %d, want 5", c.AckFloor.Stream)
	}
}
