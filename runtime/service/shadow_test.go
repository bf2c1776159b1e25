package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/replay"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// loginsFrom publishes n logins of users u0..u9 asynchronously (in order) and waits for
// their acknowledgements.
func (e *natsEnv) loginsFrom(n int) {
	e.t.Helper()
	for i := range n {
		_, err := e.js.PublishAsync("logins.web", fmt.Appendf(nil, `{"user_id":"u%d"}`, i%10))
		testutil.Require(e.t, err)
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(testutil.PollDeadline):
		e.t.Fatal("publishing timed out")
	}
}

// outputsBy returns the payloads on stream published by deployment name, in stream order,
// failing on a message id seen twice.
func (e *natsEnv) outputsBy(stream, name string) []string {
	e.t.Helper()
	var out []string
	ids := map[string]bool{}
	for _, m := range e.streamMsgs(stream) {
		if m.Header.Get(service.HeaderDeployment) != name {
			continue
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		if ids[id] {
			e.t.Fatalf("message id %s twice on %s", id, stream)
		}
		ids[id] = true
		out = append(out, string(m.Data))
	}
	return out
}

// startLogincount starts NATS and a runtime over dir on a manual clock, with logincount
// deployed and running.
func startLogincount(t *testing.T) (env *natsEnv, dir string, clock *timeouts.ManualClock, rs *runningService) {
	env = startNATS(t)
	clock = timeouts.NewManualClock(time.UnixMilli(1_000_000))
	dir = t.TempDir()
	rs = env.startService(dir, clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	return env, dir, clock, rs
}

// caughtUp tells whether shadow ran every batch its primary recorded.
func (e *natsEnv) caughtUp(primary, shadow string) bool {
	s, err := e.js.Stream(context.Background(), topology.ManifestsStream(primary))
	if err != nil {
		return false
	}
	st, err := e.client.Status(context.Background(), shadow)
	return err == nil && st.Position == s.CachedInfo().State.LastSeq
}

// TestShadowAndPromote: a shadow of logincount (the same module, under another name) deployed
// while the primary runs and rows keep coming runs the primary's batches again: the same
// outputs, on logincount.out.shadow, while the primary's output stream holds exactly its own
// (count and unique ids), through a restart of the runtime. Promoted, the primary is gone and
// the shadow reads the input from the primary's position on with its state: the next logins
// count on from the totals before; the other shadow's status says its primary is gone.
func TestShadowAndPromote(t *testing.T) {
	env, dir, clock, rs := startLogincount(t)
	ctx := context.Background()
	env.loginsFrom(200)

	shadowSpec := specFromYAML(t, strings.Replace(logincountSpec, "name: logincount", "name: logincount-v2", 1))
	d, err := env.client.Deploy(ctx, shadowSpec, logincountWasm(t), client.AsShadowOf("logincount"))
	testutil.Require(t, err)
	if d.ShadowOf != "logincount" || d.RunSpec().Output.Subject != "logincount.out.shadow" || d.RunSpec().DeadLetter.Subject != "logincount.dlq.shadow" {
		t.Fatalf("shadow deployment %+v, run spec output %+v", d, d.RunSpec().Output)
	}
	// A second shadow whose sessions last an hour: it closes none of them.
	longer := specFromYAML(t, strings.Replace(strings.Replace(logincountSpec, "name: logincount", "name: logincount-1h", 1), "idle_timeout: 10s", "idle_timeout: 1h", 1))
	_, err = env.client.Deploy(ctx, longer, logincountWasm(t), client.AsShadowOf("logincount"))
	testutil.Require(t, err)
	env.loginsFrom(200) // while the shadows start and catch up
	env.waitRunning("logincount-v2")
	// A restart while the shadows run: they resume at the primary batch after their last.
	rs.stop()
	env.startService(dir, clock)
	env.waitRunning("logincount-v2")
	env.waitPosition("logincount", 400)
	clock.Advance(11 * time.Second) // every session closes (idle_timeout 10s)
	testutil.Eventually(t, "the sessions closed", func() bool {
		st, err := env.client.Status(ctx, "logincount")
		return err == nil && st.TimeoutsFired == 10
	})
	env.loginsFrom(50)

	// 450 logins, 10 users: totals up to 40, the closing of 10 sessions, then totals 1 to 5.
	testutil.EventuallyWithin(t, compileDeadline, "the primary's 450 rows run and the shadow caught up", func() bool {
		st, err := env.client.Status(ctx, "logincount")
		return err == nil && st.Position == 450 && env.caughtUp("logincount", "logincount-v2") && env.caughtUp("logincount", "logincount-1h")
	})
	primary := env.outputsBy("LOGINCOUNT_OUT", "logincount")
	if len(env.outputsBy("LOGINCOUNT_OUT", "logincount-v2")) != 0 {
		t.Fatal("the shadow published on the primary's output stream")
	}
	shadowStream, err := env.js.StreamNameBySubject(ctx, "logincount.out.shadow")
	testutil.Require(t, err)
	shadow := env.outputsBy(shadowStream, "logincount-v2")
	if fmt.Sprint(byUser(t, shadow)) != fmt.Sprint(byUser(t, primary)) {
		t.Fatalf("the shadow's outputs differ from the primary's:\nprimary %v\nshadow  %v", byUser(t, primary), byUser(t, shadow))
	}
	if closed := strings.Count(strings.Join(primary, ""), "session_closed"); closed != 10 {
		t.Fatalf("%d sessions closed, want 10: %v", closed, primary)
	}

	// groupstate diff: the same module, the same outputs; the 1h sessions, the 10 closings
	// only in the primary and the 10 totals of the batch after them changed (45, not 5).
	pd, err := env.client.Get(ctx, "logincount")
	testutil.Require(t, err)
	same, err := replay.Diff(ctx, replay.DiffOptions{JS: env.js, Primary: pd.Spec, Shadow: d.RunSpec()})
	testutil.Require(t, err)
	if !same.Same() || same.Equal != len(primary) || same.Rows != 450 {
		t.Errorf("diff of the shadow with the same module: %+v, want all %d outputs equal over 450 rows", same, len(primary))
	}
	ld, err := env.client.Get(ctx, "logincount-1h")
	testutil.Require(t, err)
	changed, err := replay.Diff(ctx, replay.DiffOptions{JS: env.js, Primary: pd.Spec, Shadow: ld.RunSpec()})
	testutil.Require(t, err)
	if changed.OnlyOld != 10 || changed.Changed != 10 || changed.OnlyNew != 0 || changed.Equal != len(primary)-20 {
		t.Errorf("diff of the 1h shadow: %d equal, %d changed, %d only old, %d only new; want the 10 closings only old and the 10 totals after them changed",
			changed.Equal, changed.Changed, changed.OnlyOld, changed.OnlyNew)
	}
	for _, diff := range changed.Differences {
		if len(diff.New) == 1 && !strings.Contains(string(diff.New[0]), `"total_logins":45`) {
			t.Errorf("the 1h shadow's total of %s after the closings: %s, want 45", diff.Key, diff.New[0])
		}
	}

	pctx, cancel := context.WithTimeout(ctx, compileDeadline)
	defer cancel()
	testutil.Require(t, env.client.Promote(pctx, "logincount-v2"))
	if _, err := env.client.Get(ctx, "logincount"); !errors.Is(err, client.ErrNotDeployed) {
		t.Fatalf("the old primary after promote: %v, want it undeployed", err)
	}
	d, err = env.client.Get(ctx, "logincount-v2")
	testutil.Require(t, err)
	if d.ShadowOf != "" || d.RunSpec().Output.Subject != "logincount.out" {
		t.Fatalf("promoted deployment %+v, output %+v", d, d.RunSpec().Output)
	}
	env.waitRunning("logincount-v2")
	env.loginsFrom(10)
	testutil.EventuallyWithin(t, compileDeadline, "the promoted deployment's outputs on logincount.out", func() bool {
		return len(env.outputsBy("LOGINCOUNT_OUT", "logincount-v2")) == 10
	})
	for _, o := range env.outputsBy("LOGINCOUNT_OUT", "logincount-v2") {
		if !strings.Contains(o, `"total_logins":6`) {
			t.Errorf("after promote: %s, want every user's total at 6 (5 before)", o)
		}
	}
	if n := len(env.outputsBy("LOGINCOUNT_OUT", "logincount")); n != len(primary) {
		t.Errorf("the old primary published %d outputs, then %d", len(primary), n)
	}
	// The other shadow's primary is gone: its status says so.
	testutil.Eventually(t, "the status of the shadow whose primary is gone", func() bool {
		st, err := env.client.Status(ctx, "logincount-1h")
		return err == nil && st.ShadowOf == "logincount" && strings.Contains(st.Error, "primary logincount is no longer deployed")
	})
}

// waitPosition waits until deployment name committed input position pos.
func (e *natsEnv) waitPosition(name string, pos uint64) {
	e.t.Helper()
	testutil.EventuallyWithin(e.t, compileDeadline, fmt.Sprintf("%s at position %d", name, pos), func() bool {
		st, err := e.client.Status(context.Background(), name)
		return err == nil && st.Position >= pos
	})
}

// byUser groups logincount outputs by user, in order.
func byUser(t *testing.T, outs []string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	for _, o := range outs {
		var v struct {
			UserID string `json:"user_id"`
		}
		testutil.Require(t, json.Unmarshal([]byte(o), &v), o)
		m[v.UserID] = append(m[v.UserID], o)
	}
	return m
}

// TestPromoteAfterACrash: a runtime that stopped between the two steps of a promotion (the
// shadow's new input position committed, its record not stored yet) finishes it when it
// starts again, without taking the position for one in the manifests: the next logins count
// on from the state the shadow built.
func TestPromoteAfterACrash(t *testing.T) {
	testutil.Long(t)
	env, dir, clock, rs := startLogincount(t)
	ctx := context.Background()
	env.loginsFrom(100) // every user's total at 10
	shadowSpec := specFromYAML(t, strings.Replace(logincountSpec, "name: logincount", "name: logincount-v2", 1))
	_, err := env.client.Deploy(ctx, shadowSpec, logincountWasm(t), client.AsShadowOf("logincount"))
	testutil.Require(t, err)
	env.waitPosition("logincount", 100)
	testutil.EventuallyWithin(t, compileDeadline, "the shadow caught up", func() bool { return env.caughtUp("logincount", "logincount-v2") })
	rs.stop()

	// What the promotion's first step commits: the input position of the primary's last
	// batch, with the input stream's creation time.
	in, err := env.js.Stream(ctx, "GS_LOGINCOUNT_IN")
	testutil.Require(t, err)
	st, err := state.Open(filepath.Join(dir, "state"), &state.Options{Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	ks := st.Deployment("logincount-v2")
	p, err := ks.Progress()
	testutil.Require(t, err)
	b := ks.NewBatch(p.BatchID + 1)
	b.SetInputCreated(in.CachedInfo().Created.UnixNano())
	b.SetProgress(p.WatermarkMs, 100)
	_, err = b.Commit()
	testutil.Require(t, err)
	testutil.Require(t, st.Close())
	// The promotion asked while no runtime runs: the primary goes, the record says promoting.
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := env.client.Promote(pctx, "logincount-v2"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("promote with no runtime: %v, want it waiting until its deadline", err)
	}

	env.startService(dir, clock)
	testutil.EventuallyWithin(t, compileDeadline, "the promotion finished", func() bool {
		d, err := env.client.Get(ctx, "logincount-v2")
		return err == nil && d.ShadowOf == ""
	})
	env.waitRunning("logincount-v2")
	env.loginsFrom(10)
	testutil.EventuallyWithin(t, compileDeadline, "the promoted deployment's outputs", func() bool {
		return len(env.outputsBy("LOGINCOUNT_OUT", "logincount-v2")) == 10
	})
	for _, o := range env.outputsBy("LOGINCOUNT_OUT", "logincount-v2") {
		if !strings.Contains(o, `"total_logins":11`) {
			t.Errorf("after the promotion: %s, want every user's total at 11", o)
		}
	}
}
