package testutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a JetStream cluster of real NATS servers embedded in the test process, on
// loopback. Node i is named "n<i>" (from n0) and keeps its ports and its storage directory
// for the whole test, so that a node stopped with [Cluster.Stop] rejoins with its streams
// when started again with [Cluster.Start]. Its methods are meant for the test's goroutine.
type Cluster struct {
	// Name is the cluster's name, "gs".
	Name string

	opts    []server.Options
	servers []*server.Server // nil while stopped
}

// clusterReady bounds the wait for the meta cluster to have a leader and every running node
// as a current peer (about 3 s on this machine).
const clusterReady = 15 * time.Second

// portAttempts is how many sets of free ports [StartCluster] tries: a port found free can be
// taken by another process before the node listens on it.
const portAttempts = 3

// StartCluster starts an n-node JetStream cluster, each node storing in its own temporary
// directory of t, and waits until its meta cluster has a leader and n current peers. Each
// node listens for clients on a port of its own choosing and for routes on a free port
// picked beforehand, since every node's routes must name all of them. The cluster is shut
// down when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("a cluster of %d nodes", n)
	}
	c := &Cluster{Name: "gs"}
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	t.Cleanup(c.stopAll)
	var err error
	for range portAttempts {
		if err = c.start(dirs); err == nil {
			break
		}
		c.stopAll()
	}
	if err != nil {
		t.Fatalf("starting a %d-node cluster: %v", n, err)
	}
	c.WaitReady(t)
	return c
}

// start picks route ports and starts every node.
func (c *Cluster) start(dirs []string) error {
	ports, err := freePorts(len(dirs))
	if err != nil {
		return err
	}
	routes := make([]string, len(ports))
	for i, p := range ports {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	c.opts = make([]server.Options, len(dirs))
	c.servers = make([]*server.Server, len(dirs))
	for i := range dirs {
		c.opts[i] = server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   dirs[i],
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: ports[i]},
			// A node's own URL among its routes is skipped by the server.
			Routes: server.RoutesFromStr(strings.Join(routes, ",")),
		}
		srv, err := c.startNode(i)
		if err != nil {
			return err
		}
		// The client port is kept, so that a restart comes back where connections look.
		c.opts[i].Port = srv.Addr().(*net.TCPAddr).Port
	}
	return nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close() // all held until every port is picked, so they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func (c *Cluster) startNode(i int) (*server.Server, error) {
	o := c.opts[i]
	srv, err := server.NewServer(&o)
	if err != nil {
		return nil, err
	}
	go srv.Start()
	if !srv.ReadyForConnections(serverReady) { // such as its route port taken meanwhile
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("node %s did not start listening", o.ServerName)
	}
	c.servers[i] = srv
	return srv, nil
}

// N returns the number of nodes, running or not.
func (c *Cluster) N() int { return len(c.opts) }

// Server returns node i's server, nil while it is stopped.
func (c *Cluster) Server(i int) *server.Server { return c.servers[i] }

// Index returns the index of the node named name (as a stream's cluster info names its
// leader), or -1.
func (c *Cluster) Index(name string) int {
	for i := range c.opts {
		if c.opts[i].ServerName == name {
			return i
		}
	}
	return -1
}

// URLs returns every node's client URL, running or not, joined by commas as nats.Connect
// and groupstate's --server take them.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.opts))
	for i := range c.opts {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port)
	}
	return strings.Join(urls, ",")
}

// Connect opens a connection to the cluster, closed when the test ends. It knows every
// node and reconnects forever, every 50ms, so it survives nodes stopping and starting.
func (c *Cluster) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.URLs(), nats.Name(t.Name()), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	Require(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns the JetStream context of a new connection ([Cluster.Connect]).
func (c *Cluster) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(c.Connect(t))
	Require(t, err)
	return js
}

// Stop shuts node i down and waits until it is down; its storage is kept. Stopping a
// stopped node does nothing. This is a clean shutdown, not a crash: the server first hands
// the Raft groups it leads to other nodes, so a stream whose leader stops pauses for a few
// hundred milliseconds, where a killed leader's stream waits for an election timeout
// (4 to 9 s by the server's defaults).
func (c *Cluster) Stop(i int) {
	if srv := c.servers[i]; srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		c.servers[i] = nil
	}
}

// Start starts node i again, stopped by [Cluster.Stop], on its ports and storage, and waits
// until it is back in the meta cluster ([Cluster.WaitReady]). Its streams then catch up
// from their leaders on their own.
func (c *Cluster) Start(t testing.TB, i int) {
	t.Helper()
	if c.servers[i] != nil {
		t.Fatalf("node %d is running", i)
	}
	if _, err := c.startNode(i); err != nil {
		t.Fatal(err)
	}
	c.WaitReady(t)
}

func (c *Cluster) stopAll() {
	for i := range c.servers {
		c.Stop(i)
	}
}

// WaitReady waits until the meta cluster has a leader that every running node agrees on
// and that sees every other running node as a current peer, and until a stream with a
// replica on every running node can be placed (the leader learns each peer's resources from
// its first statistics, after the peer joined: before, a create fails with "no suitable
// peers for placement, peer offline"), failing the test after 15 s.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(clusterReady)
	for {
		err := c.metaReady()
		if err == nil {
			err = c.placementReady()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the meta cluster is not ready after %s: %v", clusterReady, err)
		}
		time.Sleep(pollInterval)
	}
}

// placementReady creates, and deletes, a memory stream with a replica on every running node.
func (c *Cluster) placementReady() error {
	running := 0
	for _, srv := range c.servers {
		if srv != nil {
			running++
		}
	}
	nc, err := nats.Connect(c.URLs(), nats.Name("testutil-ready"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	const name = "TESTUTIL_READY"
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{"testutil.ready"}, Replicas: running, Storage: jetstream.MemoryStorage}); err != nil {
		return fmt.Errorf("%w: placing a stream on %d nodes: %v", errNotReady, running, err)
	}
	return js.DeleteStream(ctx, name)
}

// errNotReady is what [Cluster.metaReady] reports the first thing missing with.
var errNotReady = errors.New("testutil: meta cluster not ready")

// metaReady returns nil when the meta cluster is ready (see [Cluster.WaitReady]), otherwise
// what is missing.
func (c *Cluster) metaReady() error {
	leader := ""
	running := 0
	for _, srv := range c.servers {
		if srv == nil {
			continue
		}
		running++
		jsi, err := srv.Jsz(nil)
		if err != nil {
			return err
		}
		if jsi.Meta == nil || jsi.Meta.Leader == "" {
			return fmt.Errorf("%w: %s sees no leader", errNotReady, srv.Name())
		}
		if leader != "" && jsi.Meta.Leader != leader {
			return fmt.Errorf("%w: leader %s or %s", errNotReady, leader, jsi.Meta.Leader)
		}
		leader = jsi.Meta.Leader
	}
	i := c.Index(leader)
	if i < 0 || c.servers[i] == nil {
		return fmt.Errorf("%w: the leader %s is not running", errNotReady, leader)
	}
	jsi, err := c.servers[i].Jsz(nil)
	if err != nil {
		return err
	}
	if jsi.Meta == nil {
		return fmt.Errorf("%w: %s lost the meta group", errNotReady, leader)
	}
	current := 1 // the leader itself
	for _, p := range jsi.Meta.Replicas {
		if p.Current && !p.Offline {
			current++
		}
	}
	if current < running {
		return fmt.Errorf("%w: %d of %d running nodes current", errNotReady, current, running)
	}
	return nil
}
