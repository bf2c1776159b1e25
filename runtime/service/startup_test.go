package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
)

// TestRunWaitsForJetStream: a runtime whose NATS cluster cannot create its buckets yet (two
// of three nodes down: no quorum) keeps trying, not ready meanwhile, and starts once the
// cluster is whole again, instead of exiting with the first timeout.
func TestRunWaitsForJetStream(t *testing.T) {
	c := testutil.StartCluster(t, 3)
	nc, err := service.Connect(service.ConnOptions{URL: c.Server(0).ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	svc, err := service.New(context.Background(), service.Options{DataDir: t.TempDir(), Conn: nc, Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)

	c.Stop(1)
	c.Stop(2)
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	done := make(chan struct{})
	go func() { runErr = svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	// Long enough for a step to fail: a JetStream request times out after 5 s.
	select {
	case <-done:
		t.Fatalf("Run returned while the cluster had no quorum: %v", runErr)
	case <-time.After(8 * time.Second):
	}
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
