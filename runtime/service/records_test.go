package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/timeouts"
)

// TestForgedRecordSkipped: a record written straight into the registry under one key with
// another deployment's spec name (or one that does not decode) is skipped and logged, never
// run: the deployment it names keeps its consumer and goes on, and `list` shows the forged
// records as invalid next to the real one.
func TestForgedRecordSkipped(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	var logs syncBuffer
	svc, err := service.New(ctx, service.Options{CacheDir: testutil.CompileCacheDir(), DataDir: t.TempDir(), Conn: env.nc, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Clock: timeouts.NewManualClock(time.UnixMilli(1_000_000))})
	testutil.Require(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })

	wasm := logincountWasm(t)
	env.deploy(logincountSpec, wasm)
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 1})
	const inStream = "GS_LOGINCOUNT_IN"
	before := env.consumerInfo(inStream, "logincount")

	reg, err := registry.OpenRegistry(ctx, env.js, 0)
	testutil.Require(t, err)
	digest, err := reg.PutModule(ctx, wasm)
	testutil.Require(t, err)
	forged := specFromYAML(t, strings.Replace(logincountSpec, `subjects: ["logins.>"]`, `subjects: ["evil.in"]`, 1))
	specJSON, err := json.Marshal(forged)
	testutil.Require(t, err)
	rec, err := json.Marshal(registry.Record{Name: "evil", Spec: specJSON, ModuleDigest: digest, ModuleSize: int64(len(wasm)), DeployedAt: time.Now().UTC()})
	testutil.Require(t, err)
	kv, err := env.js.KeyValue(ctx, registry.DeploymentsBucket)
	testutil.Require(t, err)
	_, err = kv.Put(ctx, "evil", rec)
	testutil.Require(t, err)
	_, err = kv.Put(ctx, "junk", []byte("{not json"))
	testutil.Require(t, err)

	testutil.Eventually(t, "both forged records skipped and logged", func() bool {
		l := logs.String()
		return strings.Contains(l, "deployment record skipped") && strings.Contains(l, "key=evil") && strings.Contains(l, "key=junk")
	})
	if !strings.Contains(logs.String(), `its spec names \"logincount\", not \"evil\"`) {
		t.Errorf("the skip does not say why:\n%s", logs.String())
	}

	after := env.consumerInfo(inStream, "logincount")
	if after.Config.FilterSubject != before.Config.FilterSubject || fmt.Sprint(after.Config.FilterSubjects) != fmt.Sprint(before.Config.FilterSubjects) {
		t.Fatalf("the consumer's filter changed: %q %v, was %q %v", after.Config.FilterSubject, after.Config.FilterSubjects, before.Config.FilterSubject, before.Config.FilterSubjects)
	}
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 2})

	ds, err := env.client.List(ctx)
	testutil.Require(t, err)
	got := map[string]string{}
	for _, d := range ds {
		got[d.Name] = d.Invalid
	}
	if len(got) != 3 || got["logincount"] != "" || !strings.Contains(got["evil"], `its spec names "logincount"`) || !strings.Contains(got["junk"], "does not decode") {
		t.Fatalf("list: %v", got)
	}
	if _, err := env.client.Status(ctx, "evil"); err == nil {
		st, _ := env.client.Status(ctx, "evil")
		if st.State == client.StatusRunning {
			t.Fatalf("the forged record runs: %+v", st)
		}
	}
	testutil.Require(t, env.client.Undeploy(ctx, "evil"), "undeploying an invalid record")
}
