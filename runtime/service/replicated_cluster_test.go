package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/timeouts"
)

// clusterOutputs returns the logincount outputs (user:total, in order), or an error while
// the cluster cannot answer (a node stopping).
func (e *natsEnv) clusterOutputs() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, "LOGINCOUNT_OUT")
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return nil, err
		}
		var v struct {
			UserID string `json:"user_id"`
			Total  int    `json:"total_logins"`
		}
		if err := json.Unmarshal(m.Data, &v); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%s:%d", v.UserID, v.Total))
	}
	return out, nil
}

// outputsDeadline bounds the wait for outputs on the cluster: above the changelog replicator's append timeout (30 s), as
// a changelog append that gets no answer while the node leading the changelog is lost waits
// that long before the runner restores and goes on. The test logs every wait above 10 s.
const outputsDeadline = 70 * time.Second

// waitClusterOutputs waits until the outputs are exactly want; an output that is not a
// prefix of want (a duplicate, a gap, another order) fails at once.
func (e *natsEnv) waitClusterOutputs(want []string) {
	e.t.Helper()
	var got []string
	start := time.Now()
	defer func() {
		if d := time.Since(start); d > 10*time.Second {
			e.t.Logf("outputs %s took %s", strings.Join(want, " "), d.Round(time.Millisecond))
		}
	}()
	testutil.EventuallyWithin(e.t, outputsDeadline, "outputs "+strings.Join(want, " "), func() bool {
		out, err := e.clusterOutputs()
		if err != nil {
			return false
		}
		got = out
		if len(got) > len(want) || strings.Join(want[:len(got)], " ") != strings.Join(got, " ") {
			e.t.Fatalf("outputs %v, want %v", got, want)
		}
		return len(got) == len(want)
	})
}

// publishRow publishes one row with a message id, again until the stream acknowledges it
// (the id makes a retry of a publish that was stored a duplicate the stream drops).
func (e *natsEnv) publishRow(id, row string) {
	e.t.Helper()
	testutil.Eventually(e.t, "row "+id+" published", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := e.js.Publish(ctx, "logins.web", []byte(row), jetstream.WithMsgID(id))
		return err == nil
	})
}

// TestChangelogFailoverCluster: a replicated deployment on a 3-node JetStream cluster, its
// three runtimes each on a node of its own. The owner crashes: another runtime takes the
// deployment over from the changelog, every output once and in order. Then the node leading
// the changelog stream stops while rows flow: the deployment pauses and goes on, no runtime
// gives up, outputs still once and in order, also after the node comes back.
func TestChangelogFailoverCluster(t *testing.T) {
	testutil.Long(t)
	c := testutil.StartCluster(t, 3)
	nc, err := service.Connect(service.ConnOptions{URL: c.Server(0).ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	testutil.Require(t, err)
	cli, err := client.New(context.Background(), nc, client.WithCacheDir(testutil.CompileCacheDir()))
	testutil.Require(t, err)
	t.Cleanup(func() { cli.Close(context.Background()) })
	env := &natsEnv{t: t, srv: c.Server(0), nc: nc, js: js, client: cli}

	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	runtimes := map[string]*replicaRuntime{}
	nodeOf := map[string]int{}
	for i := range c.N() {
		r := startReplica(t, replicaOptions{url: c.Server(i).ClientURL(), dataDir: t.TempDir(), clock: clock, ttl: time.Second})
		runtimes[r.id], nodeOf[r.id] = r, i
	}
	env.deploy(replicatedSpec, logincountWasm(t))
	env.waitRunning("logincount")

	var want []string
	counts := map[string]int{}
	rows := 0
	// row publishes a row and waits for its output: logincount emits a key's total once a
	// batch, so two rows of one key in one batch would leave one total out.
	row := func(user string) {
		rows++
		env.publishRow(fmt.Sprintf("row-%d", rows), fmt.Sprintf(`{"user_id":%q}`, user))
		counts[user]++
		want = append(want, fmt.Sprintf("%s:%d", user, counts[user]))
		env.waitClusterOutputs(want)
	}
	row("ada")
	row("bob")
	row("ada")

	// The owner crashes.
	first := env.ownerOf("logincount")
	crashed := time.Now()
	runtimes[first].crash()
	delete(runtimes, first)
	testutil.EventuallyWithin(t, compileDeadline, "taken over", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && st.State == client.StatusRunning && runtimes[st.Owner] != nil
	})
	takeover := time.Since(crashed)
	second := env.ownerOf("logincount")
	t.Logf("takeover: %s from the crash of %s (node n%d) to %s (node n%d) running", takeover.Round(time.Millisecond), first, nodeOf[first], second, nodeOf[second])
	row("ada")
	row("cy")
	env.waitClusterOutputs(want)

	// The node that leads the changelog stream stops while rows flow: first made the owner's
	// node, so that the owner loses its node at the same time (the harder case).
	leader := env.moveStreamLeader(c, topology.ChangelogStream("logincount"), nodeOf[second])
	stopped := time.Now()
	c.Stop(leader)
	row("bob")
	env.waitClusterOutputs(want)
	pause := time.Since(stopped)
	for _, u := range []string{"ada", "cy", "bob", "ada"} {
		row(u)
	}
	testutil.Eventually(t, "running after the node stop", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && st.State == client.StatusRunning && runtimes[st.Owner] != nil
	})
	third := env.ownerOf("logincount")
	t.Logf("node stop: changelog leader n%d stopped, first output after it %s later; owner %s (node n%d)", leader, pause.Round(time.Millisecond), third, nodeOf[third])

	c.Start(t, leader)
	row("cy")
	row("ada")
	env.waitClusterOutputs(want)
	for id, r := range runtimes {
		if len(r.rs.done) != 0 {
			t.Fatalf("runtime %s (node n%d) gave up: its Run returned", id, nodeOf[id])
		}
	}
}

// moveStreamLeader makes node the leader of stream (a leader stepdown with node preferred),
// and returns the index of the node that leads it then, found from the stream's cluster
// info. When the stepdown cannot move it, the stream stays where it is.
func (e *natsEnv) moveStreamLeader(c *testutil.Cluster, stream string, node int) int {
	e.t.Helper()
	leader := func() int {
		st, err := e.js.Stream(context.Background(), stream)
		if err != nil {
			return -1
		}
		info, err := st.Info(context.Background())
		if err != nil || info.Cluster == nil {
			return -1
		}
		return c.Index(info.Cluster.Leader)
	}
	if leader() != node {
		body := fmt.Sprintf(`{"placement":{"preferred":"n%d"}}`, node)
		_, err := e.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(body), 5*time.Second)
		testutil.Require(e.t, err)
	}
	var at int
	testutil.Eventually(e.t, stream+" led by n"+fmt.Sprint(node), func() bool {
		at = leader()
		return at == node
	})
	return at
}
