package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// cartsSpec is samples/carts/carts.yaml with an output stream to read.
const cartsSpec = `
name: carts
module: unused.wasm
input:
  subjects: ["carts.events.>"]
key:
  field: user_id
timeout: processing_time
output:
  subject: carts.out
  stream: CARTS_OUT
config:
  abandon_after: 10s
  remind_after: 5s
  history_ttl: 20s
`

// TestServiceTransformWithState: a transformWithState (ABI v2) module deployed to a runtime
// over NATS: its state variables are asked for by the state API, its timers fire as the
// runtime's clock passes them, and a checkout emits and clears the cart.
func TestServiceTransformWithState(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	env.startService(t.TempDir(), clock)
	env.deploy(cartsSpec, testutil.ReadFile(t, "../../samples/carts/go/carts.wasm"))
	env.waitRunning("carts")

	env.publish("carts.events.web",
		`{"user_id": "ada", "event": "add", "item": "apple", "qty": 2, "price": 1.5}`,
		`{"user_id": "bob", "event": "add", "item": "milk", "qty": 1, "price": 1}`)
	ctx := context.Background()
	var ks *client.KeyState
	testutil.Eventually(t, "ada's cart in the state API", func() bool {
		var found bool
		var err error
		ks, found, err = env.client.State(ctx, "carts", client.KeyFromArg("ada"))
		return err == nil && found
	})
	var cart struct {
		Items     map[string]struct{ Qty int } `json:"items"`
		History   []string                     `json:"history"`
		AbandonAt int64                        `json:"abandon_at"`
		RemindAt  int64                        `json:"remind_at"`
	}
	testutil.Eventually(t, "bob's cart in the state API", func() bool {
		_, found, err := env.client.State(ctx, "carts", client.KeyFromArg("bob"))
		return err == nil && found
	})
	testutil.Require(t, json.Unmarshal(ks.Value, &cart))
	if cart.Items["apple"].Qty != 2 || len(cart.History) != 1 || cart.AbandonAt == 0 || cart.RemindAt == 0 || len(ks.Timers) != 2 {
		t.Fatalf("ada's state %s, timers %v", ks.Value, ks.Timers)
	}

	// Past the reminders (5 s): both carts remind; then ada checks out.
	clock.Advance(6 * time.Second)
	env.waitStream("CARTS_OUT", 2)
	env.publish("carts.events.web", `{"user_id": "ada", "event": "checkout"}`)
	out := env.waitStream("CARTS_OUT", 3)
	var last map[string]any
	testutil.Require(t, json.Unmarshal([]byte(out[2]), &last))
	if fmt.Sprint(last) != fmt.Sprint(map[string]any{"user_id": "ada", "event": "checkout", "items": 1.0, "total": 3.0, "events": 2.0}) {
		t.Fatalf("the checkout: %s", out[2])
	}
	testutil.Eventually(t, "ada's cart cleared", func() bool {
		_, found, err := env.client.State(ctx, "carts", client.KeyFromArg("ada"))
		return err == nil && !found
	})
}

// TestTransformWithStateFailover: a transformWithState deployment with replication: changelog
// survives losing its runtime: the other one restores the variables and timers from the
// changelog, and the cart goes on (a checkout counts the history written before the crash).
func TestTransformWithStateFailover(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	runtimes := map[string]*replicaRuntime{}
	for range 2 {
		r := env.startRuntime(t.TempDir(), clock)
		runtimes[r.id] = r
	}
	env.deploy(cartsSpec+"replication: changelog\n", testutil.ReadFile(t, "../../samples/carts/go/carts.wasm"))
	env.waitRunning("carts")
	env.publish("carts.events.web",
		`{"user_id": "ada", "event": "add", "item": "apple", "qty": 2, "price": 1.5}`,
		`{"user_id": "ada", "event": "add", "item": "pear", "qty": 1, "price": 2}`)
	ctx := context.Background()
	testutil.Eventually(t, "ada's two adds in the state API", func() bool {
		ks, found, err := env.client.State(ctx, "carts", client.KeyFromArg("ada"))
		return err == nil && found && strings.Contains(string(ks.Value), "pear")
	})

	first := env.ownerOf("carts")
	runtimes[first].crash()
	delete(runtimes, first)
	for id := range runtimes {
		env.waitOwner("carts", id)
	}
	env.publish("carts.events.web", `{"user_id": "ada", "event": "checkout"}`)
	out := env.waitStream("CARTS_OUT", 1)
	var got map[string]any
	testutil.Require(t, json.Unmarshal([]byte(out[0]), &got))
	if fmt.Sprint(got) != fmt.Sprint(map[string]any{"user_id": "ada", "event": "checkout", "items": 2.0, "total": 5.0, "events": 3.0}) {
		t.Fatalf("the checkout after the failover: %s", out[0])
	}
}
