package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/replay"
	"github.com/groupstate/groupstate/timeouts"
)

// partitionsCaughtUp tells whether each of the parts partitions of shadow ran every batch
// its primary recorded for it.
func (e *natsEnv) partitionsCaughtUp(primary, shadow string, parts int) bool {
	ctx := context.Background()
	s, err := e.js.Stream(ctx, topology.ManifestsStream(primary))
	if err != nil {
		return false
	}
	st, err := e.client.Status(ctx, shadow)
	if err != nil || len(st.Partitions) != parts {
		return false
	}
	for _, p := range st.Partitions {
		last, err := s.GetLastMsgForSubject(ctx, topology.ManifestSubject(primary, p.Partition))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil || p.Position != last.Sequence {
			return false
		}
	}
	return true
}

// TestPartitionedShadowAndPromote: a shadow of a deployment split into 4 partitions over two
// runtimes runs each partition's batches again, through the loss of a runtime (its
// partitions, the shadow's among them, move to the other), to the same outputs per user.
// Promoted, it takes over the primary's partitioned stream and router: the next round counts
// on from the totals before, every user's totals on the output stream exactly 1..5.
func TestPartitionedShadowAndPromote(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	ctx := context.Background()
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	runtimes := map[string]*replicaRuntime{}
	for range 2 {
		r := env.startRuntime(t.TempDir(), clock)
		runtimes[r.id] = r
	}
	env.deploy(partitionedSpec, logincountWasm(t))
	env.waitOwners("logincount", func(o []string) bool { return len(o) == 4 && !slices.Contains(o, "") })
	users := loginUsers(12)
	round := func() { env.loginRound(users) }
	round()
	env.waitCounted(users, 1)

	shadowSpec := specFromYAML(t, strings.Replace(partitionedSpec, "name: logincount", "name: logincount-v2", 1))
	d, err := env.client.Deploy(ctx, shadowSpec, logincountWasm(t), client.AsShadowOf("logincount"))
	testutil.Require(t, err)
	if d.InputOf != "logincount" || d.RunSpec().Output.Subject != "logincount.out.shadow" {
		t.Fatalf("shadow deployment %+v, run spec output %+v", d, d.RunSpec().Output)
	}
	round()
	env.waitCounted(users, 2)
	owners := env.waitOwners("logincount-v2", func(o []string) bool { return len(o) == 4 && !slices.Contains(o, "") })

	// Lose the runtime that runs the shadow's partition 0.
	victim := owners[0]
	runtimes[victim].crash()
	delete(runtimes, victim)
	round()
	env.waitCounted(users, 3)
	env.waitOwners("logincount-v2", func(o []string) bool {
		return len(o) == 4 && !slices.Contains(o, "") && !slices.Contains(o, victim)
	})
	testutil.EventuallyWithin(t, compileDeadline, "the shadow's partitions caught up", func() bool {
		return env.partitionsCaughtUp("logincount", "logincount-v2", 4)
	})
	primary := env.outputsBy("LOGINCOUNT_OUT", "logincount")
	shadowStream, err := env.js.StreamNameBySubject(ctx, "logincount.out.shadow")
	testutil.Require(t, err)
	shadow := env.outputsBy(shadowStream, "logincount-v2")
	if fmt.Sprint(byUser(t, shadow)) != fmt.Sprint(byUser(t, primary)) {
		t.Fatalf("the shadow's outputs differ from the primary's:\nprimary %v\nshadow  %v", byUser(t, primary), byUser(t, shadow))
	}
	pd, err := env.client.Get(ctx, "logincount")
	testutil.Require(t, err)
	same, err := replay.Diff(ctx, replay.DiffOptions{JS: env.js, Primary: pd.Spec, Shadow: d.RunSpec()})
	testutil.Require(t, err)
	if !same.Same() || same.Equal != len(primary) || same.Rows != 3*len(users) {
		t.Errorf("diff of the shadow: %+v, want all %d outputs equal over %d rows", same, len(primary), 3*len(users))
	}

	pctx, cancel := context.WithTimeout(ctx, compileDeadline)
	defer cancel()
	testutil.Require(t, env.client.Promote(pctx, "logincount-v2"))
	if _, err := env.client.Get(ctx, "logincount"); !errors.Is(err, client.ErrNotDeployed) {
		t.Fatalf("the old primary after promote: %v, want it undeployed", err)
	}
	d, err = env.client.Get(ctx, "logincount-v2")
	testutil.Require(t, err)
	if d.ShadowOf != "" || d.InputOf != "logincount" || d.RunSpec().Output.Subject != "logincount.out" {
		t.Fatalf("promoted deployment %+v, output %+v", d, d.RunSpec().Output)
	}
	// A new logincount would share the streams and the router the promoted deployment reads.
	if _, err := env.client.Deploy(ctx, specFromYAML(t, partitionedSpec), logincountWasm(t)); !errors.Is(err, client.ErrShadow) {
		t.Fatalf("deploying logincount again after the promote: %v, want ErrShadow", err)
	}
	env.waitOwners("logincount-v2", func(o []string) bool { return len(o) == 4 && !slices.Contains(o, "") })

	// At once, before logincount-v2 runs a batch of its own: a shadow of it, promoted. Its
	// partitions take the position logincount-v2 took over (logincount-v2's manifests so far
	// count in logincount's manifests stream, not in the partitioned stream).
	v3 := specFromYAML(t, strings.Replace(partitionedSpec, "name: logincount", "name: logincount-v3", 1))
	d3, err := env.client.Deploy(ctx, v3, logincountWasm(t), client.AsShadowOf("logincount-v2"))
	testutil.Require(t, err)
	if d3.InputOf != "logincount" {
		t.Fatalf("the shadow of the promoted deployment reads the input of %q, want logincount's", d3.InputOf)
	}
	testutil.EventuallyWithin(t, compileDeadline, "logincount-v3's partitions caught up", func() bool {
		return env.partitionsCaughtUp("logincount-v2", "logincount-v3", 4)
	})
	testutil.Require(t, env.client.Promote(pctx, "logincount-v3"))
	env.waitOwners("logincount-v3", func(o []string) bool { return len(o) == 4 && !slices.Contains(o, "") })
	round()
	env.waitCounted(users, 4) // logincount's totals 1..3, then logincount-v3's 4
	round()
	env.waitCounted(users, 5)
	if n := len(env.outputsBy("LOGINCOUNT_OUT", "logincount-v3")); n != 2*len(users) {
		t.Errorf("the promoted deployment published %d outputs on logincount.out, want %d", n, 2*len(users))
	}
	env.wantCounts("logincount-v3", users, 5)
}

// TestInputsShadowAndPromote: a shadow of a deployment with several inputs (adjoin) reads
// its primary's inputs stream: the same joined pairs, the same diff; promoted, it joins a
// click with an impression its state got as a shadow, and repeats nothing the primary read.
func TestInputsShadowAndPromote(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	env.startService(t.TempDir(), clock)
	wasm := testutil.ReadFile(t, "../../samples/adjoin/go/adjoin.wasm")
	env.deploy(joinSpecNATS, wasm)
	env.waitRunning("adjoin")
	const h = int64(time.Hour / time.Millisecond)
	t0 := 100 * h
	row := func(ad string, ts int64) string { return fmt.Sprintf(`{"ad_id": %q, "ts": %d}`, ad, ts) }
	env.publish("ads.impressions.web", row("a1", t0), row("a2", t0))
	env.publish("ads.clicks.web", row("a1", t0+h/2))
	env.waitStream("ADJOIN_OUT", 1)

	shadowSpec := specFromYAML(t, strings.Replace(joinSpecNATS, "name: adjoin", "name: adjoin-v2", 1))
	d, err := env.client.Deploy(ctx, shadowSpec, wasm, client.AsShadowOf("adjoin"))
	testutil.Require(t, err)
	env.publish("ads.impressions.web", row("a3", t0+h))
	env.publish("ads.clicks.web", row("a3", t0+h+h/6))
	env.waitStream("ADJOIN_OUT", 2)
	testutil.EventuallyWithin(t, compileDeadline, "the shadow caught up", func() bool { return env.caughtUp("adjoin", "adjoin-v2") })
	primary := env.outputsBy("ADJOIN_OUT", "adjoin")
	shadowStream, err := env.js.StreamNameBySubject(ctx, "adjoin.out.shadow")
	testutil.Require(t, err)
	if shadow := env.outputsBy(shadowStream, "adjoin-v2"); fmt.Sprint(shadow) != fmt.Sprint(primary) {
		t.Fatalf("the shadow's pairs %v, the primary's %v", shadow, primary)
	}
	pd, err := env.client.Get(ctx, "adjoin")
	testutil.Require(t, err)
	same, err := replay.Diff(ctx, replay.DiffOptions{JS: env.js, Primary: pd.Spec, Shadow: d.RunSpec()})
	testutil.Require(t, err)
	if !same.Same() || same.Equal != 2 || same.Rows != 5 {
		t.Errorf("diff of the shadow: %+v, want 2 outputs equal over 5 rows", same)
	}

	pctx, cancel := context.WithTimeout(ctx, compileDeadline)
	defer cancel()
	testutil.Require(t, env.client.Promote(pctx, "adjoin-v2"))
	env.waitRunning("adjoin-v2")
	env.publish("ads.clicks.web", row("a2", t0+h/4)) // joins a2's impression, from before the promote
	var got []string
	testutil.EventuallyWithin(t, compileDeadline, "the promoted deployment's pair", func() bool {
		got = env.outputsBy("ADJOIN_OUT", "adjoin-v2")
		return len(got) > 0
	})
	var p struct {
		AdID  string `json:"ad_id"`
		Click *int64 `json:"click_ts"`
	}
	testutil.Require(t, json.Unmarshal([]byte(got[0]), &p))
	if len(got) != 1 || p.AdID != "a2" || p.Click == nil || *p.Click != t0+h/4 {
		t.Fatalf("the promoted deployment published %v, want a2's pair alone", got)
	}
	for _, stream := range []string{topology.InputsStream("adjoin-v2"), topology.StreamName("adjoin-v2_IN_clicks")} {
		if _, err := env.js.Stream(ctx, stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream %s: %v, want none (the promoted deployment reads adjoin's)", stream, err)
		}
	}
}
