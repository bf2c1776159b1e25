package runner

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// startInput starts an embedded JetStream server with the stream IN on subjects in.>, the
// input of the runner tests' deployment d.
func startInput(t *testing.T) *testutil.JetStream {
	t.Helper()
	j := testutil.StartJetStream(t)
	_, err := j.JS.CreateStream(context.Background(), jetstream.StreamConfig{Name: "IN", Subjects: []string{"in.>"}})
	testutil.Require(t, err)
	return j
}
