package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// snapshottedSpec snapshots as often as a spec may (spec.MinSnapshotInterval).
const snapshottedSpec = partitionedSpec + "snapshot: {interval: 10s}\n"

// TestEveryDiskLost: a partitioned, replicated deployment whose runtimes all stop and lose
// their data directories is restored by one runtime on an empty directory from the
// snapshots and the changelog after them (the log below the older snapshot kept having been
// purged): every key's state is as committed, no output is repeated or lost, and counting
// goes on from there.
func TestEveryDiskLost(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	var runtimes []*replicaRuntime
	for range 2 {
		runtimes = append(runtimes, env.startRuntime(t.TempDir(), clock))
	}
	env.deploy(snapshottedSpec, logincountWasm(t))
	env.waitOwners("logincount", func(owners []string) bool { return len(owners) == 4 })

	// Count until every partition has the two snapshots that let its log be purged below
	// the older one (a snapshot is taken only when the log has grown since the last).
	ctx := context.Background()
	snaps, err := changelog.OpenSnapshots(ctx, env.js, 0)
	testutil.Require(t, err)
	users := loginUsers(12)
	n := 0
	purged := func() bool {
		for p := range 4 {
			metas, err := snaps.List(ctx, "logincount", p)
			if err != nil || len(metas) < 2 {
				return false
			}
		}
		return true
	}
	var lastRound time.Time
	testutil.EventuallyWithin(t, 90*time.Second, "two snapshots of every partition", func() bool {
		if time.Since(lastRound) >= time.Second { // a round a second keeps the log growing
			lastRound = time.Now()
			env.loginRound(users)
			n++
			env.waitCounted(users, n)
		}
		return purged()
	})
	// Some rows after the newest snapshots: the restore needs the log after them.
	for range 2 {
		env.loginRound(users)
		n++
		env.waitCounted(users, n)
	}
	cl, err := env.js.Stream(ctx, "GS_LOGINCOUNT_CL")
	testutil.Require(t, err)
	info, err := cl.Info(ctx)
	testutil.Require(t, err)
	if info.State.FirstSeq <= 1 {
		t.Fatalf("the changelog was not purged (first sequence %d)", info.State.FirstSeq)
	}

	for _, r := range runtimes {
		r.rs.stop()
	}
	before := len(env.streamMsgs("LOGINCOUNT_OUT"))
	fresh := env.startRuntime(t.TempDir(), clock)
	env.waitOwners("logincount", func(owners []string) bool {
		for _, o := range owners {
			if o != fresh.id {
				return false
			}
		}
		return len(owners) == 4
	})
	for _, u := range users {
		ks, found, err := env.client.State(ctx, "logincount", []byte(fmt.Sprintf("%q", u)))
		if err != nil || !found {
			t.Fatalf("%s's state after the restore: found %v, err %v", u, found, err)
		}
		var v struct {
			Count int `json:"login_count"`
		}
		if err := json.Unmarshal(ks.Value, &v); err != nil || v.Count != n {
			t.Fatalf("%s's state after the restore %s (%v), want a count of %d", u, ks.Value, err, n)
		}
	}
	if after := len(env.streamMsgs("LOGINCOUNT_OUT")); after != before {
		t.Fatalf("the restore published %d outputs", after-before)
	}
	env.loginRound(users)
	env.waitCounted(users, n+1)
}
