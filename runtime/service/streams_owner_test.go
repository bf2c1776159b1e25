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
)

// TestDeployRefusesForeignStreams: a spec that would change a stream groupstate did not
// create for it (another team's stream capturing its output subject, or a stream it names)
// is refused at deploy, naming the stream and what would have to change, and the stream is
// left as it was; a spec that uses such a stream as it is deploys.
func TestDeployRefusesForeignStreams(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	_, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, MaxAge: 24 * time.Hour, Duplicates: 20 * time.Minute})
	testutil.Require(t, err)
	wasm := logincountWasm(t)
	for _, c := range []struct {
		name, from, to, want string
	}{
		{"retention of a stream capturing the output", "output:\n  subject: logincount.out\n  stream: LOGINCOUNT_OUT",
			"output:\n  subject: orders.counts\n  max_age: 10m", "stream ORDERS (created by no groupstate deployment) would have to keep messages for 10m0s (max_age, now 24h0m0s)"},
		{"subjects of a named stream", "output:\n  subject: logincount.out\n  stream: LOGINCOUNT_OUT",
			"output:\n  subject: logincount.out\n  stream: ORDERS", "stream ORDERS (created by no groupstate deployment) would have to capture subject logincount.out"},
		{"retention of the input stream", "input:\n  subjects: [\"logins.>\"]",
			"input:\n  subjects: [\"orders.in.>\"]\n  max_age: 1h", "stream ORDERS (created by no groupstate deployment) would have to keep messages for 1h0m0s"},
	} {
		_, err := env.client.Deploy(ctx, specFromYAML(t, strings.Replace(logincountSpec, c.from, c.to, 1)), wasm)
		if !errors.Is(err, natsio.ErrForeignStream) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: deploy = %v, want ErrForeignStream saying %q", c.name, err, c.want)
		}
	}
	st, err := env.js.Stream(ctx, "ORDERS")
	testutil.Require(t, err)
	if cfg := st.CachedInfo().Config; cfg.MaxAge != 24*time.Hour || len(cfg.Subjects) != 1 {
		t.Fatalf("the foreign stream changed: %+v", cfg)
	}
	// Reading a foreign stream as it is.
	ok := strings.Replace(logincountSpec, "input:\n  subjects: [\"logins.>\"]", "input:\n  subjects: [\"orders.in.>\"]", 1)
	if _, err := env.client.Deploy(ctx, specFromYAML(t, ok), wasm); err != nil {
		t.Fatalf("a spec reading a foreign stream as it is: %v", err)
	}
}
