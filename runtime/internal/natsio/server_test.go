package natsio

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestStartServerLoopbackJetStream(t *testing.T) {
	e := newEnv(t)
	u, err := url.Parse(e.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "nats" || u.Hostname() != "127.0.0.1" || u.Port() == "4222" || u.Port() == "" {
		t.Fatalf("client URL %s: want nats://127.0.0.1:<random>", u)
	}
	if !e.srv.JetStreamEnabled() {
		t.Fatal("JetStream not enabled")
	}
	if _, err := e.js.AccountInfo(e.ctx); err != nil {
		t.Fatalf("JetStream account info: %v", err)
	}
	if got := e.srv.JetStreamConfig().StoreDir; !strings.HasSuffix(got, "/jetstream") {
		t.Fatalf("store dir %q, want under DataDir/jetstream", got)
	}
}

func TestStartServerErrors(t *testing.T) {
	if _, err := StartServer(ServerOptions{Port: -1}); !errors.Is(err, ErrNoDataDir) {
		t.Fatalf("no data dir: %v", err)
	}
	e := newEnv(t)
	u, _ := url.Parse(e.srv.ClientURL())
	var port int
	for _, c := range u.Port() {
		port = port*10 + int(c-'0')
	}
	start := time.Now()
	s, err := StartServer(ServerOptions{DataDir: t.TempDir(), Port: port, Logger: quiet})
	if err == nil {
		s.Shutdown()
		t.Fatal("second server on the same port started")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("port conflict took %s to report", time.Since(start))
	}
	t.Logf("port conflict: %v", err)
}

func TestServerOptionsDefaults(t *testing.T) {
	o := ServerOptions{DataDir: "x"}.EnsureDefaults()
	if o.Host != "127.0.0.1" || o.Port != 4222 || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
}
