package natsio

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

type env struct {
	nats *testutil.JetStream
	js   jetstream.JetStream
	ctx  context.Context
}

// newEnv starts an embedded server on a random port and connects to it.
func newEnv(t *testing.T) *env {
	t.Helper()
	j := testutil.StartJetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return &env{nats: j, js: j.JS, ctx: ctx}
}
