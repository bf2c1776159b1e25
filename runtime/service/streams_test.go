package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/spec"
)

// TestFeedbackLoopsRefused: the spec that turned one bad row into thousands of dead letters a
// second (name orders, input orders.>, so the default dead-letter subject orders.dlq is input
// again) is refused at deploy with both subjects named; and an input stream that captures
// more than the input subjects (here the output subject) is never used for outputs: the
// deploy is refused saying so, and the stream is left as it was.
func TestFeedbackLoopsRefused(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	env.startService(t.TempDir(), nil)
	loop := specFromYAMLUnchecked(t, "name: orders\ninput: {subjects: [\"orders.>\"]}\nkey: {field: user_id}\noutput: {subject: orders-out}\n")
	_, err := env.client.Deploy(ctx, loop, logincountWasm(t))
	if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), `"orders.dlq" is matched by input subject "orders.>"`) {
		t.Fatalf("deploying a feedback loop: %v", err)
	}

	orders := jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}
	_, err = env.js.CreateStream(ctx, orders)
	testutil.Require(t, err)
	before, err := env.js.Stream(ctx, "ORDERS")
	testutil.Require(t, err)
	_, err = env.client.Deploy(ctx, specFromYAML(t, "name: ordercount\ninput: {subjects: [orders.new]}\nkey: {field: user_id}\noutput: {subject: orders.counts}\ndead_letter: {subject: ordercount.dlq}\n"), logincountWasm(t))
	if !errors.Is(err, natsio.ErrAvoidedStream) || !strings.Contains(err.Error(), "ORDERS") || !strings.Contains(err.Error(), "input stream") {
		t.Fatalf("deploying outputs into the input stream: %v", err)
	}
	after, err := env.js.Stream(ctx, "ORDERS")
	testutil.Require(t, err)
	if a, b := after.CachedInfo().Config, before.CachedInfo().Config; a.Duplicates != b.Duplicates || strings.Join(a.Subjects, ",") != strings.Join(b.Subjects, ",") {
		t.Fatalf("the input stream was changed for outputs: %+v -> %+v", b, a)
	}
}

// TestStreamRetention: the streams the service creates keep messages for
// spec.DefaultStreamMaxAge unless the spec says otherwise; JetStream no longer fills up with
// a deployment's history.
func TestStreamRetention(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	env.startService(t.TempDir(), nil)
	env.deploy(strings.Replace(logincountSpec, "  stream: LOGINCOUNT_OUT\n", "  stream: LOGINCOUNT_OUT\n  max_age: 1h\n", 1), logincountWasm(t))
	env.waitRunning("logincount")
	for stream, want := range map[string]time.Duration{"GS_LOGINCOUNT_IN": spec.DefaultStreamMaxAge, "LOGINCOUNT_OUT": time.Hour, "LOGINCOUNT_DLQ": spec.DefaultStreamMaxAge} {
		st, err := env.js.Stream(ctx, stream)
		testutil.Require(t, err)
		if got := st.CachedInfo().Config.MaxAge; got != want {
			t.Errorf("stream %s: max_age %s, want %s", stream, got, want)
		}
	}
}

// specFromYAMLUnchecked parses a spec without the service's checks, as a client that skips
// them would write it.
func specFromYAMLUnchecked(t *testing.T, y string) *spec.Spec {
	t.Helper()
	sp, err := spec.ParseSpec([]byte(y))
	testutil.Require(t, err)
	return sp
}
