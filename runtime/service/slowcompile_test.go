package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/host/hostile"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// TestSlowCompileHoldsNoOneUp: a module that takes the compiler long (24,000 branches in one
// function: within the loading limits, about 11 s of compiling) is checked off the loop that
// applies deployments, so logincount, deployed right after it, runs while it still compiles;
// then it runs too. (The slow module's record is written directly, as a client with its own
// compiler would have; the client here would compile it first.)
func TestSlowCompileHoldsNoOneUp(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	env.startServiceCache(t.TempDir(), nil, "") // its own cache: the slow module must compile
	ctx := context.Background()
	reg, err := registry.OpenRegistry(ctx, env.js, 0)
	testutil.Require(t, err)
	slow := hostile.SlowCompile(24_000).Wasm()
	digest, err := reg.PutModule(ctx, slow)
	testutil.Require(t, err)
	sp := specFromYAML(t, strings.NewReplacer("name: hostile", "name: slow", "hostile.in", "slow.in", "hostile.out", "slow.out",
		"HOSTILE_OUT", "SLOW_OUT", "hostile.dlq", "slow.dlq", "HOSTILE_DLQ", "SLOW_DLQ").Replace(hostileSpec))
	body, err := json.Marshal(sp)
	testutil.Require(t, err)
	_, err = reg.Put(ctx, registry.Record{Name: "slow", Spec: body, ModuleDigest: digest, ModuleSize: int64(len(slow)), DeployedAt: time.Now().UTC(), Lineage: "slow-compile"})
	testutil.Require(t, err)
	start := time.Now()
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	st, err := env.client.Status(ctx, "slow")
	testutil.Require(t, err)
	if st.State == client.StatusRunning {
		t.Fatalf("the slow module was running before logincount (after %v): its compilation held the loop up, or was not slow", time.Since(start))
	}
	t.Logf("logincount running after %v, while the slow module compiles", time.Since(start))
	env.waitRunning("slow")
	env.publish("slow.in", `{"k":"a"}`)
	if out := env.waitStream("SLOW_OUT", 1); out[0] != `{"ok":true}` {
		t.Fatalf("slow emitted %v", out)
	}
	t.Logf("slow running after %v", time.Since(start))
}
