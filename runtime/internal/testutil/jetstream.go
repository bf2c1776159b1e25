package testutil

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream is a real NATS server with JetStream, embedded in the test process, and a
// connection to it.
type JetStream struct {
	Server *server.Server
	Conn   *nats.Conn
	JS     jetstream.JetStream
}

// StartJetStream starts a NATS server with JetStream on a free loopback port, storing in a
// temporary directory of t, and connects to it. Both are shut down when the test ends.
func StartJetStream(t testing.TB) *JetStream {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true})
	Require(t, err)
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the embedded NATS server did not start")
	}
	nc, err := nats.Connect(srv.ClientURL())
	Require(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	Require(t, err)
	return &JetStream{Server: srv, Conn: nc, JS: js}
}
