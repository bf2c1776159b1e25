package testutil

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// localState returns node i's own copy of stream name in the global account.
func localState(c *Cluster, i int, name string) (server.StreamState, bool) {
	srv := c.Server(i)
	if srv == nil {
		return server.StreamState{}, false
	}
	jsi, err := srv.Jsz(&server.JSzOptions{Streams: true})
	if err != nil {
		return server.StreamState{}, false
	}
	for _, acc := range jsi.AccountDetails {
		for _, s := range acc.Streams {
			if s.Name == name {
				return s.State, true
			}
		}
	}
	return server.StreamState{}, false
}

// publish publishes message i with a message id, retrying until the cluster acknowledges it
// (the id makes a retry of a publish that was stored but not acknowledged a duplicate, which
// the stream drops). It returns when the first attempt was made and how long it took.
func publish(ctx context.Context, t *testing.T, js jetstream.JetStream, i int) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := js.Publish(pctx, "orders.new", fmt.Appendf(nil, "%d", i), jetstream.WithMsgID(fmt.Sprint(i)))
		cancel()
		if err == nil {
			return time.Since(start)
		}
		if ctx.Err() != nil {
			t.Fatalf("publishing %d: %v", i, errors.Join(err, ctx.Err()))
		}
	}
}

// TestClusterFailover: an R3 stream keeps accepting publishes after its leader's node stops
// (once a new leader is elected), and the node, started again, catches up.
func TestClusterFailover(t *testing.T) {
	start := time.Now()
	c := StartCluster(t, 3)
	t.Logf("3 nodes ready in %s", time.Since(start).Round(time.Millisecond))
	js := c.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, Storage: jetstream.FileStorage})
	Require(t, err)
	const n = 100
	for i := range n {
		publish(ctx, t, js, i)
	}
	info, err := s.Info(ctx)
	Require(t, err)
	if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info %+v, want a leader and 2 replicas", info.Cluster)
	}
	old := c.Index(info.Cluster.Leader)
	if old < 0 {
		t.Fatalf("unknown leader %q", info.Cluster.Leader)
	}

	c.Stop(old)
	pause := publish(ctx, t, js, n)
	t.Logf("stopped the stream leader %s: the next publish was acknowledged %s later", info.Cluster.Leader, pause.Round(time.Millisecond))
	for i := n + 1; i < 2*n; i++ {
		publish(ctx, t, js, i)
	}
	info, err = s.Info(ctx)
	Require(t, err)
	if info.State.Msgs != 2*n || info.State.LastSeq != 2*n {
		t.Fatalf("after the failover: %d messages, last sequence %d, want %d", info.State.Msgs, info.State.LastSeq, 2*n)
	}
	if info.Cluster.Leader == c.opts[old].ServerName {
		t.Fatalf("the stopped node %s still leads", info.Cluster.Leader)
	}

	restart := time.Now()
	c.Start(t, old)
	Eventually(t, "the restarted node to catch up", func() bool {
		st, ok := localState(c, old, "ORDERS")
		return ok && st.Msgs == 2*n && st.LastSeq == 2*n
	})
	t.Logf("the restarted node rejoined and caught up in %s", time.Since(restart).Round(time.Millisecond))
	publish(ctx, t, js, 2*n)
	Eventually(t, "every node to hold the last message", func() bool {
		for i := range c.N() {
			if st, ok := localState(c, i, "ORDERS"); !ok || st.LastSeq != 2*n+1 {
				return false
			}
		}
		return true
	})
}

// TestFreePortsDiffer: the ports picked for one cluster are distinct.
func TestFreePortsDiffer(t *testing.T) {
	ports, err := freePorts(5)
	Require(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d picked twice: %v", p, ports)
		}
		seen[p] = true
	}
}
