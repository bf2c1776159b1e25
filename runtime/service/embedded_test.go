package service_test

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
)

func TestStartEmbeddedLoopbackJetStream(t *testing.T) {
	env := startNATS(t)
	u, err := url.Parse(env.srv.ClientURL())
	testutil.Require(t, err)
	if u.Scheme != "nats" || u.Hostname() != "127.0.0.1" || u.Port() == "4222" || u.Port() == "" {
		t.Fatalf("client URL %s: want nats://127.0.0.1:<random>", u)
	}
	if !env.srv.JetStreamEnabled() {
		t.Fatal("JetStream not enabled")
	}
	if _, err := env.js.AccountInfo(context.Background()); err != nil {
		t.Fatalf("JetStream account info: %v", err)
	}
	if got := env.srv.JetStreamConfig().StoreDir; !strings.HasSuffix(got, "/jetstream") {
		t.Fatalf("store dir %q, want under DataDir/jetstream", got)
	}
}

func TestStartEmbeddedErrors(t *testing.T) {
	if _, err := service.StartEmbedded(service.EmbeddedOptions{Port: -1}); !errors.Is(err, service.ErrNoDataDir) {
		t.Fatalf("no data dir: %v", err)
	}
	env := startNATS(t)
	u, err := url.Parse(env.srv.ClientURL())
	testutil.Require(t, err)
	port, err := strconv.Atoi(u.Port())
	testutil.Require(t, err)
	start := time.Now()
	s, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: t.TempDir(), Port: port, Logger: testutil.DiscardLogger()})
	if err == nil {
		s.Shutdown()
		t.Fatal("second server on the same port started")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("port conflict took %s to report", time.Since(start))
	}
	if !strings.Contains(err.Error(), "service: embedded NATS server") {
		t.Fatalf("port conflict: %v", err)
	}
}
