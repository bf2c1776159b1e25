package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
)

// writeLogincountSpec writes a spec of the logincount sample named name, reading in and
// publishing to out, with the extra lines of YAML, and returns its path.
func writeLogincountSpec(t *testing.T, name, in, out string, extra ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".yaml")
	text := fmt.Sprintf(`name: %s
module: %s
input:
  subjects: [%q]
key:
  field: user_id
timeout: processing_time
output:
  subject: %s
on_error: dead_letter
config:
  idle_timeout: 10s
`, name, inRepo("samples/logincount/go/logincount.wasm"), in, out) + strings.Join(extra, "")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUndeployPurge: undeploy --purge refuses without a terminal and without --yes; with
// --yes it deletes what the deployment created and keeps what is not its own: purging a
// deployment whose spec points at another's output stream and reads a stream the user made
// keeps both (and deletes its consumer on the user's stream), while the other deployment
// runs on; purging that other one then deletes its streams, its state and its records, and a
// new deploy of the name starts from empty state.
func TestUndeployPurge(t *testing.T) {
	url := startServe(t, t.TempDir())
	cli := func(args ...string) (string, string, int) { return runCLI(t, append(args, "--server", url)...) }
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "USER_PB", Subjects: []string{"pb.in.>"}}); err != nil {
		t.Fatal(err)
	}
	specA := writeLogincountSpec(t, "pa", "pa.in.>", "pa.out")
	specB := writeLogincountSpec(t, "pb", "pb.in.>", "pa.out") // hostile: pa's output stream
	for _, sp := range []string{specA, specB} {
		if out, errOut, code := cli("deploy", "-f", sp); code != 0 {
			t.Fatalf("deploy %s: exit %d\n%s%s", sp, code, out, errOut)
		}
	}
	publish := func(subject string, users ...string) {
		t.Helper()
		for _, u := range users {
			if _, err := js.Publish(ctx, subject, []byte(`{"user_id":"`+u+`"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys := func(name string) int {
		out, _, code := cli("state", name)
		if code != 0 {
			return -1
		}
		return strings.Count(out, "\n")
	}
	publish("pa.in.web", "u1", "u2", "u3", "u1")
	publish("pb.in.web", "v1", "v2")
	waitCLI(t, func() bool { return keys("pa") == 3 && keys("pb") == 2 })
	streamGone := func(name string) bool {
		_, err := js.Stream(ctx, name)
		return errors.Is(err, jetstream.ErrStreamNotFound)
	}

	// No terminal, no --yes: refused in one line, nothing undeployed.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.Close()
	stdin := os.Stdin
	os.Stdin = r
	_, errOut, code := cli("undeploy", "pa", "--purge")
	os.Stdin = stdin
	if code == 0 || errOut != "groupstate: undeploy --purge deletes pa's state and streams for good: confirm at a terminal, or add --yes\n" {
		t.Fatalf("undeploy --purge without --yes: exit %d\n%s", code, errOut)
	}
	if out, _, _ := cli("list"); !strings.Contains(out, "pa ") && !strings.Contains(out, "pa\t") {
		t.Fatalf("pa is gone after a refused purge:\n%s", out)
	}

	// A runtime refuses to delete the state of a deployment that is deployed.
	listOut, _, _ := cli("list", "--json")
	var listed struct {
		Runtimes []client.Runtime `json:"runtimes"`
	}
	if err := json.Unmarshal([]byte(listOut), &listed); err != nil || len(listed.Runtimes) != 1 {
		t.Fatalf("list --json: %v\n%s", err, listOut)
	}
	reply, err := nc.Request("groupstate.api.purge."+listed.Runtimes[0].ID, []byte(`{"deployment":"pa"}`), waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(reply.Data), "pa is deployed: undeploy it first") {
		t.Fatalf("a purge request for a deployed deployment: %s", reply.Data)
	}

	// The hostile deployment: pa's output stream and the user's stream stay.
	out, errOut, code := cli("undeploy", "pb", "--purge", "--yes", "--json")
	if code != 0 {
		t.Fatalf("undeploy pb --purge: exit %d\n%s%s", code, out, errOut)
	}
	var res struct {
		Name  string             `json:"name"`
		Purge client.PurgeReport `json:"purge"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("undeploy --purge --json: %v\n%s", err, out)
	}
	has := func(items []client.PurgeItem, kind, name, why string) bool {
		for _, it := range items {
			if it.Kind == kind && it.Name == name && strings.Contains(it.Why, why) {
				return true
			}
		}
		return false
	}
	for _, want := range []struct {
		kept            bool
		kind, name, why string
	}{
		{true, client.PurgeStream, "GS_PA_OUT", "deployment pa"},
		{true, client.PurgeStream, "USER_PB", "not created by groupstate"},
		{false, client.PurgeConsumer, "USER_PB/groupstate-pb", ""},
		{false, client.PurgeStream, "GS_PB_BATCHES", ""},
		{false, client.PurgeKV, "groupstate-status/pb", ""},
		{false, client.PurgeKV, "groupstate-deployments/pb", ""},
	} {
		items := res.Purge.Deleted
		if want.kept {
			items = res.Purge.Kept
		}
		if !has(items, want.kind, want.name, want.why) {
			t.Errorf("purge pb: want %+v in the report:\n%s", want, out)
		}
	}
	stateDeleted := false
	for _, it := range res.Purge.Deleted {
		stateDeleted = stateDeleted || (it.Kind == client.PurgeState && strings.HasSuffix(it.Name, "/pb"))
	}
	if !stateDeleted {
		t.Errorf("purge pb: its state is not reported deleted:\n%s", out)
	}
	if streamGone("GS_PA_OUT") || streamGone("USER_PB") {
		t.Fatal("purging pb deleted a stream that is not its own")
	}
	if info, err := js.Stream(ctx, "USER_PB"); err != nil || info.CachedInfo().State.Msgs != 2 {
		t.Fatalf("the user's stream lost its messages: %v", err)
	}
	publish("pa.in.web", "u4")
	waitCLI(t, func() bool { return keys("pa") == 4 }) // pa runs on

	// pa: everything goes.
	out, errOut, code = cli("undeploy", "pa", "--purge", "--yes")
	if code != 0 {
		t.Fatalf("undeploy pa --purge: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"undeployed pa\n", "deleted stream GS_PA_IN\n", "deleted stream GS_PA_OUT\n", "deleted stream GS_PA_BATCHES\n",
		"deleted kv groupstate-status/pa\n", "deleted kv groupstate-deployments/pa\n", "/pa\n", "purged pa: ", "; 0 kept\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("undeploy pa --purge: no %q in\n%s", want, out)
		}
	}
	for _, s := range []string{"GS_PA_IN", "GS_PA_OUT", "GS_PA_BATCHES"} {
		if !streamGone(s) {
			t.Errorf("stream %s is still there", s)
		}
	}
	if out, _, _ := cli("list", "--json"); strings.Contains(out, `"pa"`) || strings.Contains(out, `"pb"`) {
		t.Errorf("list shows a purged deployment:\n%s", out)
	}

	// Nothing is left to purge.
	if _, errOut, code := cli("undeploy", "pa", "--purge", "--yes"); code == 0 || !strings.Contains(errOut, "no such deployment") {
		t.Errorf("purging pa again: exit %d\n%s", code, errOut)
	}

	// A new deploy of the name starts from empty state.
	if out, errOut, code := cli("deploy", "-f", specA); code != 0 {
		t.Fatalf("deploy pa again: exit %d\n%s%s", code, out, errOut)
	}
	publish("pa.in.web", "u9")
	waitCLI(t, func() bool { return keys("pa") >= 1 })
	if n := keys("pa"); n != 1 {
		out, _, _ := cli("state", "pa")
		t.Fatalf("pa deployed again has %d keys, want 1 (empty state, then u9):\n%s", n, out)
	}

}

// TestUndeployPurgeShadow: a shadow reads its primary's input and manifests streams (input_of).
// Purging the primary while the shadow is deployed keeps them, saying the shadow uses them;
// purging the shadow then deletes them, as the last deployment that reads them.
func TestUndeployPurgeShadow(t *testing.T) {
	url := startServe(t, t.TempDir())
	cli := func(args ...string) (string, string, int) { return runCLI(t, append(args, "--server", url)...) }
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, errOut, code := cli("deploy", "-f", writeLogincountSpec(t, "ps", "ps.in.>", "ps.out")); code != 0 {
		t.Fatalf("deploy ps: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := js.Publish(ctx, "ps.in.web", []byte(`{"user_id":"u1"}`)); err != nil {
		t.Fatal(err)
	}
	waitCLI(t, func() bool { out, _, code := cli("state", "ps"); return code == 0 && strings.Contains(out, "u1") })
	if out, errOut, code := cli("deploy", "-f", writeLogincountSpec(t, "ps-v2", "ps.in.>", "ps.out"), "--shadow", "ps"); code != 0 {
		t.Fatalf("deploy --shadow: exit %d\n%s%s", code, out, errOut)
	}
	exists := func(name string) bool {
		_, err := js.Stream(ctx, name)
		return err == nil
	}

	out, errOut, code := cli("undeploy", "ps", "--purge", "--yes")
	if code != 0 {
		t.Fatalf("undeploy ps --purge: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"kept stream GS_PS_IN: used by deployment ps-v2\n", "kept stream GS_PS_BATCHES: used by deployment ps-v2\n", "deleted stream GS_PS_OUT\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("purge of a primary with a shadow: no %q in\n%s", want, out)
		}
	}
	if !exists("GS_PS_IN") || !exists("GS_PS_BATCHES") {
		t.Fatal("purging the primary deleted the streams its shadow reads")
	}

	out, errOut, code = cli("undeploy", "ps-v2", "--purge", "--yes")
	if code != 0 {
		t.Fatalf("undeploy ps-v2 --purge: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"deleted stream GS_PS_IN\n", "deleted stream GS_PS-V2_OUT\n", "; 0 kept\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("purge of the shadow: no %q in\n%s", want, out)
		}
	}
	if exists("GS_PS_IN") {
		t.Error("GS_PS_IN is still there")
	}
}

// TestUndeployPurgePartitioned: the purge of a deployment split into partitions, with
// replication: changelog, deletes each partition's state, status and lease, the partitioned
// and changelog streams; deployed again, it starts from empty state (nothing restored from a
// changelog).
func TestUndeployPurgePartitioned(t *testing.T) {
	url := startServe(t, t.TempDir())
	cli := func(args ...string) (string, string, int) { return runCLI(t, append(args, "--server", url)...) }
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sp := writeLogincountSpec(t, "pp", "pp.in.>", "pp.out", "partitions: 2\n", "replication: changelog\n")
	if out, errOut, code := cli("deploy", "-f", sp); code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", code, out, errOut)
	}
	keys := func() int {
		out, _, code := cli("state", "pp")
		if code != 0 {
			return -1
		}
		return strings.Count(out, "\n")
	}
	for _, u := range []string{"u1", "u2", "u3", "u4"} {
		if _, err := js.Publish(ctx, "pp.in.web", []byte(`{"user_id":"`+u+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	waitCLI(t, func() bool { return keys() == 4 })

	out, errOut, code := cli("undeploy", "pp", "--purge", "--yes")
	if code != 0 {
		t.Fatalf("undeploy --purge: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"/pp.0\n", "/pp.1\n", "deleted stream GS_PP_KG\n", "deleted stream GS_PP_CL\n", "deleted stream GS_PP_IN\n",
		"deleted kv groupstate-status/pp.0\n", "deleted kv groupstate-status/pp.1\n", "deleted kv groupstate-leases/pp.0\n", "; 0 kept\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("purge: no %q in\n%s", want, out)
		}
	}
	for _, s := range []string{"GS_PP_KG", "GS_PP_CL", "GS_PP_IN", "GS_PP_BATCHES"} {
		if _, err := js.Stream(ctx, s); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s: %v, want gone", s, err)
		}
	}

	if out, errOut, code := cli("deploy", "-f", sp); code != 0 {
		t.Fatalf("deploy again: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := js.Publish(ctx, "pp.in.web", []byte(`{"user_id":"u9"}`)); err != nil {
		t.Fatal(err)
	}
	waitCLI(t, func() bool { return keys() >= 1 })
	if n := keys(); n != 1 {
		out, _, _ := cli("state", "pp")
		t.Fatalf("deployed again: %d keys, want 1:\n%s", n, out)
	}
}
