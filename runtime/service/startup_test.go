package service_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
)

// TestRunWaitsForJetStream: a runtime whose NATS cluster cannot create its buckets yet (two
// of three nodes down: no quorum) keeps trying, not ready meanwhile, and starts once the
// cluster is whole again, instead of exiting with the first timeout.
func TestRunWaitsForJetStream(t *testing.T) {
	testutil.Long(t)
	c := testutil.StartCluster(t, 3)
	nc, err := service.Connect(service.ConnOptions{URL: c.Server(0).ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	var logs syncBuffer
	svc, err := service.New(context.Background(), service.Options{CacheDir: testutil.CompileCacheDir(), DataDir: t.TempDir(), Conn: nc, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	testutil.Require(t, err)

	c.Stop(1)
	c.Stop(2)
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	done := make(chan struct{})
	go func() { runErr = svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// A step fails (a JetStream request times out after 5 s) and is retried, not returned.
	testutil.EventuallyWithin(t, 30*time.Second, "a failed startup step retried", func() bool {
		select {
		case <-done:
			t.Fatalf("Run returned while the cluster had no quorum: %v", runErr)
		default:
		}
		return strings.Contains(logs.String(), "startup step failed; retrying")
	})
	if svc.Ready() {
		t.Fatal("ready without its buckets")
	}
	c.Start(t, 1)
	c.Start(t, 2)
	c.WaitReady(t)
	testutil.EventuallyWithin(t, 60*time.Second, "the runtime to start", func() bool {
		select {
		case <-done:
			t.Fatalf("Run returned: %v", runErr)
		default:
		}
		return svc.Ready()
	})
}

// syncBuffer is a bytes.Buffer safe for a logger writing while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
