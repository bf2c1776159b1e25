package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/placement"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/timeouts"
)

// replicaOptions are what startReplica varies.
type replicaOptions struct {
	url     string // the NATS node to connect to
	dataDir string
	clock   timeouts.Clock
	ttl     time.Duration // MemberTTL
	metrics *service.Metrics
}

// startReplica is startRuntime with the node, the member TTL and the metrics chosen.
func startReplica(t *testing.T, o replicaOptions) *replicaRuntime {
	t.Helper()
	nc, err := service.Connect(service.ConnOptions{URL: o.url, Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	logger := testutil.DiscardLogger()
	if os.Getenv("GS_TEST_LOG") != "" { // to watch the runtimes of a failing test
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("runtime", filepath.Base(o.dataDir))
	}
	svc, err := service.New(context.Background(), service.Options{CacheDir: testutil.CompileCacheDir(), DataDir: o.dataDir, Conn: nc, Logger: logger,
		Clock: o.clock, MemberTTL: o.ttl, Metrics: o.metrics})
	testutil.Require(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningService{cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- svc.Run(ctx) }()
	t.Cleanup(rs.stop)
	return &replicaRuntime{id: svc.ID(), nc: nc, rs: rs}
}

// counterValue returns the value of the counter name (summed over its labels) in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, _ := metricValue(t, reg, name, "")
	return v
}

// zombieTTL is the member TTL of the zombie tests: long, so that the owner's periodic
// re-plan (once a TTL) does not notice the stolen lease before what the test checks.
const zombieTTL = 5 * time.Second

// thief is the test acting as a runtime that took the deployment over: a live member that
// acquired the lease, fenced the changelog with its epoch and wrote its status.
type thief struct {
	id      string
	members *cluster.Membership
}

// joinThief joins the thief as a member, before the deployment is deployed (so that owner
// sees it live by the time the lease is stolen), with an id that the plan ranks below owner
// for name (so that owner, not the thief, gets the deployment first).
func (e *natsEnv) joinThief(owner, name string) *thief {
	e.t.Helper()
	id := ""
	for i := 0; id == ""; i++ {
		c := fmt.Sprintf("thief%d", i)
		if placement.Plan(placement.Input{Deployment: name, Partitions: 1, Members: []string{owner, c}})[0].Owner == owner {
			id = c
		}
	}
	m, err := cluster.JoinMembers(context.Background(), e.js, cluster.MemberOptions{ID: id, TTL: zombieTTL})
	testutil.Require(e.t, err)
	e.t.Cleanup(func() { _ = m.Leave(context.Background()) })
	return &thief{id: id, members: m}
}

// steal takes the lease of name's partition 0 (the owner counted as dead), fences the
// changelog with the new epoch, and writes a running status naming the thief, as a new
// owner would.
func (e *natsEnv) steal(th *thief, name string) {
	e.t.Helper()
	ctx := context.Background()
	leases, err := cluster.OpenLeases(ctx, e.js, 0)
	testutil.Require(e.t, err)
	lease, err := leases.Acquire(ctx, name, 0, th.id, func(string) bool { return false })
	testutil.Require(e.t, err)
	cl, err := changelog.OpenChangelog(ctx, e.js, name, 0)
	testutil.Require(e.t, err)
	_, err = cl.Fence(ctx, 0, lease.Epoch)
	testutil.Require(e.t, err)
	reg, err := registry.OpenRegistry(ctx, e.js, 0)
	testutil.Require(e.t, err)
	doc, _ := json.Marshal(client.Status{Name: name, State: client.StatusRunning, Owner: th.id, UpdatedAt: time.Now()})
	testutil.Require(e.t, reg.PutStatus(ctx, name, doc))
}

// requireStatusStays fails when name's status stops naming owner within d (a negative
// check: it polls for the whole of d).
func (e *natsEnv) requireStatusStays(name, owner string, d time.Duration) {
	e.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		st, err := e.client.Status(context.Background(), name)
		testutil.Require(e.t, err)
		if st.Owner != owner || st.State != client.StatusRunning {
			e.t.Fatalf("status of %s overwritten: %s by %s (%s), want running by %s", name, st.State, st.Owner, st.Error, owner)
		}
	}
}

// waitBatchStatus waits until the status of logincount, by owner, counts the first batch
// (written after its outputs), so that it comes before the thief's.
func (e *natsEnv) waitBatchStatus(owner string) {
	e.t.Helper()
	e.waitStatus("logincount", "the first batch in the status", func(st *client.Status) bool {
		return st.Owner == owner && st.Position >= 1
	})
}

// TestChangelogZombieFenced: a runtime that lost its lease while it kept its connection
// (a zombie: another runtime took the deployment over while this one was paused) is fenced
// by its next changelog append: the batch commits nothing and publishes nothing, the
// zombie counts groupstate_fenced_total, stops the deployment without writing its status
// over the new owner's, and takes it again from the changelog once the plan gives it back
// (the new owner leaves): the row it was refused is then counted once.
func TestChangelogZombieFenced(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	reg := prometheus.NewRegistry()
	a := startReplica(t, replicaOptions{url: env.srv.ClientURL(), dataDir: t.TempDir(), clock: clock, ttl: zombieTTL, metrics: service.NewMetrics(reg)})
	th := env.joinThief(a.id, "logincount") // live: once it holds the lease, the plan keeps it there
	env.deploy(replicatedSpec, logincountWasm(t))
	env.waitOwner("logincount", a.id)
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1")
	env.waitBatchStatus(a.id)

	env.steal(th, "logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	testutil.Eventually(t, "the zombie fenced", func() bool {
		return counterValue(t, reg, "groupstate_fenced_total") == 1
	})
	env.requireStatusStays("logincount", th.id, 2*time.Second) // past the retry of a fenced runner
	if got := env.totalsOf(); len(got) != 1 {
		t.Fatalf("outputs after the fenced batch: %v", got)
	}

	testutil.Require(t, th.members.Leave(context.Background())) // the plan gives it back to a
	env.waitOwner("logincount", a.id)
	env.waitOutputs("ada:1", "ada:2")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1", "ada:2", "ada:3")
}

// TestChangelogZombieStopKeepsStatus: a zombie stopped (SIGTERM) before it noticed that its
// lease moved does not write its stopped status over the new owner's.
func TestChangelogZombieStopKeepsStatus(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	a := startReplica(t, replicaOptions{url: env.srv.ClientURL(), dataDir: t.TempDir(), clock: clock, ttl: zombieTTL})
	th := env.joinThief(a.id, "logincount")
	env.deploy(replicatedSpec, logincountWasm(t))
	env.waitOwner("logincount", a.id)
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitOutputs("ada:1")
	env.waitBatchStatus(a.id)

	env.steal(th, "logincount")
	a.rs.stop()
	env.requireStatusStays("logincount", th.id, 500*time.Millisecond)
}
