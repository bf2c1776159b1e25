package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/timeouts"
)

// replicaRuntime is a runtime with its own NATS connection, so that a test can cut it off
// (a crash, as the others see it) without touching the others.
type replicaRuntime struct {
	id  string
	nc  *nats.Conn
	rs  *runningService
	reg *prometheus.Registry
}

// metric returns the value of metric name for deployment on r (a histogram's count), and
// whether it is exported.
func (r *replicaRuntime) metric(t *testing.T, name, deployment string) (float64, bool) {
	t.Helper()
	return metricValue(t, r.reg, name, deployment)
}

// metricValue returns the sum of the samples of metric name on reg whose deployment label is
// deployment (any, when empty), a histogram counting its observations, and whether any is
// exported.
func metricValue(t *testing.T, reg *prometheus.Registry, name, deployment string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	testutil.Require(t, err)
	var v float64
	found := false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labelled := deployment == ""
			for _, l := range m.GetLabel() {
				labelled = labelled || (l.GetName() == "deployment" && l.GetValue() == deployment)
			}
			if !labelled {
				continue
			}
			found = true
			switch {
			case m.Counter != nil:
				v += m.Counter.GetValue()
			case m.Gauge != nil:
				v += m.Gauge.GetValue()
			case m.Histogram != nil:
				v += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return v, found
}

func (e *natsEnv) startRuntime(dataDir string, clock timeouts.Clock) *replicaRuntime {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	r := startReplica(e.t, replicaOptions{url: e.srv.ClientURL(), dataDir: dataDir, clock: clock, ttl: time.Second, metrics: service.NewMetrics(reg)})
	r.reg = reg
	return r
}

// crash cuts the runtime off NATS at once: it can neither renew its membership nor release
// its lease nor append to the changelog, as after kill -9.
func (r *replicaRuntime) crash() {
	r.nc.Close()
	r.rs.stop()
}

const replicatedSpec = logincountSpec + "replication: changelog\n"

func (e *natsEnv) ownerOf(name string) string {
	e.t.Helper()
	st, err := e.client.Status(context.Background(), name)
	testutil.Require(e.t, err)
	return st.Owner
}

func (e *natsEnv) waitOwner(name, id string) {
	e.t.Helper()
	testutil.EventuallyWithin(e.t, compileDeadline, name+" running on "+id, func() bool {
		st, err := e.client.Status(context.Background(), name)
		return err == nil && st.State == client.StatusRunning && st.Owner == id
	})
}

// TestChangelogFailover: a deployment with replication: changelog survives losing the
// runtime that runs it. Another runtime takes it over when the first one's membership
// expires, restores its state from the changelog, and goes on: every output once, in order,
// counts continuing; then a graceful stop hands it to a third runtime at once.
func TestChangelogFailover(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	runtimes := map[string]*replicaRuntime{}
	for range 2 {
		r := env.startRuntime(t.TempDir(), clock)
		runtimes[r.id] = r
	}
	env.deploy(replicatedSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:2")

	first := env.ownerOf("logincount")
	runtimes[first].crash()
	delete(runtimes, first)
	var second string
	for id := range runtimes {
		second = id
	}
	env.waitOwner("logincount", second)
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:2", "ada:3")
	env.publish("logins.web", `{"user_id":"bob"}`)
	env.waitOutputs("ada:1", "ada:2", "ada:3", "bob:1")

	for _, m := range []struct {
		name string
		want float64
	}{{"groupstate_takeover_seconds", 1}, {"groupstate_partitions_owned", 1}, {"groupstate_fenced_total", 0}} {
		if v, ok := runtimes[second].metric(t, m.name, "logincount"); !ok || v != m.want {
			t.Errorf("%s on the new owner: %v (exported %v), want %v", m.name, v, ok, m.want)
		}
	}

	rts, err := env.client.Runtimes(context.Background())
	testutil.Require(t, err)
	for _, rt := range rts {
		if want := map[bool]int{true: 1, false: 0}[rt.ID == second]; rt.Partitions != want {
			t.Errorf("runtime %s owns %d partitions, want %d (the lease's owner is %s)", rt.ID, rt.Partitions, want, second)
		}
	}

	ks, found, err := env.client.State(context.Background(), "logincount", []byte(`"ada"`))
	if err != nil || !found {
		t.Fatalf("ada's state on the new owner: found %v, err %v", found, err)
	}
	var v struct {
		Count int `json:"login_count"`
	}
	if err := json.Unmarshal(ks.Value, &v); err != nil || v.Count != 3 {
		t.Fatalf("ada's restored state %s (%v), want a count of 3", ks.Value, err)
	}

	third := env.startRuntime(t.TempDir(), clock)
	runtimes[second].rs.stop() // SIGTERM: drains, releases the lease, leaves
	env.waitOwner("logincount", third.id)
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:2", "ada:3", "bob:1", "ada:4")
}

// TestReplicationFixedAtFirstDeploy: a redeploy may not switch a deployment's replication
// (its changelog holds the state from the first write on) unless it resets the state.
func TestReplicationFixedAtFirstDeploy(t *testing.T) {
	env := startNATS(t)
	env.deploy(logincountSpec, logincountWasm(t))
	_, err := env.client.Deploy(context.Background(), specFromYAML(t, replicatedSpec), logincountWasm(t))
	if !errors.Is(err, client.ErrFixedAtFirstDeploy) || !strings.Contains(err.Error(), "replication none, this spec changelog") {
		t.Fatalf("err = %v", err)
	}
	if _, err := env.client.Deploy(context.Background(), specFromYAML(t, replicatedSpec), logincountWasm(t), client.ResetState()); err != nil {
		t.Fatalf("with a reset: %v", err)
	}
}

// TestReplicationSwitchedOffWithReset: a redeploy with --reset-state that turns
// replication off detaches the deployment from its changelog: the state writes of the
// runner that follows no longer go to the changelog (with the old epoch, and unsynced
// locally), and the lease is released.
func TestReplicationSwitchedOffWithReset(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	env.startService(t.TempDir(), clock)
	env.deploy(replicatedSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1")
	before, err := env.client.Status(context.Background(), "logincount")
	testutil.Require(t, err)
	clMsgs := func() uint64 {
		st, err := env.js.Stream(context.Background(), topology.ChangelogStream("logincount"))
		testutil.Require(t, err)
		info, err := st.Info(context.Background())
		testutil.Require(t, err)
		return info.State.Msgs
	}

	_, err = env.client.Deploy(context.Background(), specFromYAML(t, logincountSpec), logincountWasm(t), client.ResetState())
	testutil.Require(t, err)
	env.waitStatus("logincount", "restarted without replication", func(st *client.Status) bool {
		return st.State == client.StatusRunning && st.StartedAt.After(before.StartedAt)
	})
	logged := clMsgs() // the replicated runner has stopped: nothing more of it comes
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:1")
	if n := clMsgs(); n != logged {
		t.Fatalf("the changelog went from %d to %d messages after replication was switched off", logged, n)
	}
	leases, err := cluster.OpenLeases(context.Background(), env.js, 0)
	testutil.Require(t, err)
	lease, err := leases.Get(context.Background(), "logincount", 0)
	testutil.Require(t, err)
	if lease.Owner != "" {
		t.Fatalf("lease still held by %s after replication was switched off", lease.Owner)
	}
}

// TestReplicatedFailStaysFailed: a replicated deployment that on_error: fail stopped stays
// failed through the placement checks that run every member TTL (they are not redeploys);
// a redeploy starts it again.
func TestReplicatedFailStaysFailed(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	r := env.startRuntime(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(5000)))
	sp := `
name: strict
module: unused.wasm
input: {subjects: ["strict.in"]}
key: {field: k}
timeout: processing_time
output: {subject: strict.out}
on_error: fail
replication: changelog
`
	env.deploy(sp, probeWasm(t))
	env.waitOwner("strict", r.id)
	env.publish("strict.in", `{"k":"b","ops":[{"fail":"bad b"}]}`)
	var st *client.Status
	testutil.Eventually(t, "failed status", func() bool {
		var err error
		st, err = env.client.Status(context.Background(), "strict")
		return err == nil && st.State == client.StatusFailed
	})
	// Three member TTLs of placement checks: it must stay failed, never restarted.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		now, err := env.client.Status(context.Background(), "strict")
		if err != nil || now.State != client.StatusFailed || !now.StartedAt.Equal(st.StartedAt) {
			t.Fatalf("during the placement checks: %+v, %v; want it failed, not restarted", now, err)
		}
	}
	env.deploy(sp, probeWasm(t))
	testutil.Eventually(t, "failed again after the redeploy", func() bool {
		s, err := env.client.Status(context.Background(), "strict")
		return err == nil && s.State == client.StatusFailed && s.StartedAt.After(st.StartedAt)
	})
}
