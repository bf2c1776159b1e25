package testutil

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream is a real NATS server with JetStream, embedded in the test process, and a
// connection to it.
type JetStream struct {
	// Server is the running server (a new one after [JetStream.Start]).
	Server *server.Server
	// Conn is a connection to it that reconnects forever (see [JetStream.Connect]).
	Conn *nats.Conn
	// JS is the JetStream context of Conn.
	JS jetstream.JetStream

	opts server.Options
}

// serverReady bounds the wait for the server to accept connections.
const serverReady = 10 * time.Second

// StartJetStream starts a NATS server with JetStream on a free loopback port, storing in a
// temporary directory of t, and connects to it. Both are shut down when the test ends.
func StartJetStream(t testing.TB) *JetStream {
	t.Helper()
	j := &JetStream{opts: server.Options{ServerName: "testutil", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}}
	j.Start(t)
	t.Cleanup(j.Stop)
	// The port is kept, so that a restart comes back where the connections look for it.
	j.opts.Port = j.Server.Addr().(*net.TCPAddr).Port
	j.Conn = j.Connect(t)
	js, err := jetstream.New(j.Conn)
	Require(t, err)
	j.JS = js
	return j
}

// Connect opens another connection to the server, closed when the test ends. Like the
// runtime's, it reconnects forever, here every 50ms, so it survives [JetStream.Stop] and
// [JetStream.Start].
func (j *JetStream) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(j.Server.ClientURL(), nats.Name(t.Name()), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	Require(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// Stop shuts the server down and waits until it is down. Calling it again does nothing.
func (j *JetStream) Stop() {
	j.Server.Shutdown()
	j.Server.WaitForShutdown()
}

// Start starts the server: at first, and after [JetStream.Stop] again on the same port with
// the same storage, so that connections reconnect and streams and consumers are kept.
func (j *JetStream) Start(t testing.TB) {
	t.Helper()
	o := j.opts
	srv, err := server.NewServer(&o)
	Require(t, err)
	go srv.Start()
	if !srv.ReadyForConnections(serverReady) {
		srv.Shutdown()
		t.Fatal("the embedded NATS server did not start")
	}
	j.Server = srv
}
