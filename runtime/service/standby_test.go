package service_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// waitStandbys waits until every partition of name runs with one standby on another
// runtime than its owner and ok (nil: true) holds, and returns the partitions' statuses.
func (e *natsEnv) waitStandbys(name string, parts int, ok func([]client.PartitionStatus) bool) []client.PartitionStatus {
	e.t.Helper()
	var ps []client.PartitionStatus
	testutil.EventuallyWithin(e.t, compileDeadline, name+"'s partitions each with a standby", func() bool {
		st, err := e.client.Status(context.Background(), name)
		if err != nil || st.State != client.StatusRunning || len(st.Partitions) != parts {
			return false
		}
		ps = st.Partitions
		for _, p := range ps {
			if len(p.Standbys) != 1 || p.Standbys[0] == p.Owner || p.MissingStandbys != 0 {
				return false
			}
		}
		return ok == nil || ok(ps)
	})
	return ps
}

// TestStandbyTakeover: with standbys: 1 on two runtimes, each keeps a warm copy of the
// other's partitions; when one crashes, the other takes its partitions over from those
// copies, applying only what they lack (far fewer records than the whole log), and every
// key's outputs stay exactly 1..c. A third runtime that joins then keeps the standbys and
// takes its share, each partition warmed before it is handed over.
func TestStandbyTakeover(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	runtimes := map[string]*replicaRuntime{}
	for range 2 {
		r := env.startRuntime(t.TempDir(), clock)
		runtimes[r.id] = r
	}
	const parts = 4
	env.deploy(partitionedSpec+"standbys: 1\n", logincountWasm(t))
	before := env.waitStandbys("logincount", parts, nil)

	users := loginUsers(12)
	const rounds = 8 // a log of at least 16 records per partition (a batch and an acknowledgement a round)
	for n := 1; n <= rounds; n++ {
		env.loginRound(users)
		env.waitCounted(users, n)
	}

	victim := before[0].Owner
	var survivor string
	for id := range runtimes {
		if id != victim {
			survivor = id
		}
	}
	moved := 0
	for _, p := range before {
		if p.Owner == victim {
			moved++
			if p.Standbys[0] != survivor {
				t.Fatalf("partition %d of %s has standby %s, want %s", p.Partition, victim, p.Standbys[0], survivor)
			}
		}
	}
	restoredBefore, _ := metricValue(t, runtimes[survivor].reg, "groupstate_restore_records_total", "logincount")
	runtimes[victim].crash()
	delete(runtimes, victim)
	env.loginRound(users)
	env.waitCounted(users, rounds+1)
	env.waitOwners("logincount", func(o []string) bool {
		return len(o) == parts && !slices.ContainsFunc(o, func(id string) bool { return id != survivor })
	})
	restored, _ := metricValue(t, runtimes[survivor].reg, "groupstate_restore_records_total", "logincount")
	// A restore from the whole log applies at least 2*rounds records per partition; a warm
	// copy lacks at most the last batch or two.
	if applied, most := restored-restoredBefore, float64(moved*rounds); applied >= most {
		t.Errorf("the takeovers of %d partitions applied %v records, want fewer than %v (from warm copies)", moved, applied, most)
	} else {
		t.Logf("takeovers of %d partitions from standbys applied %v records", moved, applied)
	}

	// A third runtime joins: it keeps the standbys the survivor cannot, and takes two
	// partitions, each warmed before the survivor hands it over.
	c := env.startRuntime(t.TempDir(), clock)
	runtimes[c.id] = c
	env.waitStandbys("logincount", parts, func(ps []client.PartitionStatus) bool { return perOwner(ps)[c.id] == parts/2 })
	env.loginRound(users)
	env.waitCounted(users, rounds+2)
}

// perOwner counts the partitions of each owner.
func perOwner(ps []client.PartitionStatus) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		out[p.Owner]++
	}
	return out
}
