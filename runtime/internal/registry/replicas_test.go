package registry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// TestReplicasDefault: what groupstate creates on a clustered server has 3 replicas, on a
// single server 1; asking a single server for 3 fails saying what to do.
func TestReplicasDefault(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	replicasOf := func(js jetstream.JetStream, stream string) int {
		t.Helper()
		s, err := js.Stream(ctx, stream)
		testutil.Require(t, err)
		return s.CachedInfo().Config.Replicas
	}

	c := testutil.StartCluster(t, 3)
	cjs := c.JetStream(t)
	if _, err := OpenRegistry(ctx, cjs, 0); err != nil {
		t.Fatal(err)
	}
	name, err := natsio.EnsureStream(ctx, cjs, natsio.StreamOptions{Name: "IN", Subjects: []string{"in.>"}})
	testutil.Require(t, err)
	for _, s := range []string{name, "KV_" + DeploymentsBucket, "KV_" + StatusBucket, "KV_" + OwnersBucket, "OBJ_" + ModulesBucket} {
		if n := replicasOf(cjs, s); n != 3 {
			t.Errorf("%s on a cluster has %d replicas, want 3", s, n)
		}
	}

	e := newEnv(t)
	name, err = natsio.EnsureStream(e.ctx, e.js, natsio.StreamOptions{Name: "ONE", Subjects: []string{"one.>"}})
	testutil.Require(t, err)
	if n := replicasOf(e.js, name); n != 1 {
		t.Errorf("a stream on a single server has %d replicas, want 1", n)
	}
	_, err = natsio.EnsureStream(e.ctx, e.js, natsio.StreamOptions{Name: "THREE", Subjects: []string{"three.>"}, Replicas: 3})
	if err == nil || !strings.Contains(err.Error(), "set serve --replicas") {
		t.Fatalf("3 replicas on a single server: %v", err)
	}
}
