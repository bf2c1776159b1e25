package changelog

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

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.EventuallyWithin(t, d, what, cond)
}
