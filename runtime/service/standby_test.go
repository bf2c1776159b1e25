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
// runtime than its owner, and returns the partitions' statuses.
func (e *natsEnv) waitStandbys(name string, parts int) []client.PartitionStatus {
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
		return true
	})
	return ps
}

// TestStandbyTakeover: with standbys: 1, every partition has a warm copy on another
// runtime; when a runtime crashes, each of its partitions is taken over by its standby,
// which applies only what its copy lacks (far fewer records than the whole log), and every
// key's outputs stay exactly 1..c. The survivors then keep standbys of each other.
func TestStandbyTakeover(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	runtimes := map[string]*replicaRuntime{}
	for range 3 {
		r := env.startRuntime(t.TempDir(), clock)
		runtimes[r.id] = r
	}
	const parts = 4
	env.deploy(partitionedSpec+"standbys: 1\n", logincountWasm(t))
	before := env.waitStandbys("logincount", parts)

	users := loginUsers(12)
	const rounds = 8 // a log of at least 16 records per partition (a batch and an acknowledgement a round)
	for n := 1; n <= rounds; n++ {
		env.loginRound(users)
		env.waitCounted(users, n)
	}

	victim := before[0].Owner
	moved := map[int]string{} // the victim's partitions, and their standbys
	for _, p := range before {
		if p.Owner == victim {
			moved[p.Partition] = p.Standbys[0]
		}
	}
	restoredBefore := map[string]float64{}
	for id, r := range runtimes {
		restoredBefore[id], _ = metricValue(t, r.reg, "groupstate_restore_records_total", "logincount")
	}
	runtimes[victim].crash()
	delete(runtimes, victim)
	env.loginRound(users)
	env.waitCounted(users, rounds+1)
	after := env.waitStandbys("logincount", parts)
	for p, standby := range moved {
		if got := after[p].Owner; got != standby {
			t.Errorf("partition %d went to %s, want its standby %s", p, got, standby)
		}
	}
	applied := 0.0
	for id, r := range runtimes {
		v, _ := metricValue(t, r.reg, "groupstate_restore_records_total", "logincount")
		applied += v - restoredBefore[id]
	}
	// A restore from the whole log applies at least 2*rounds records per partition; a warm
	// copy lacks at most the last batch or two.
	if max := float64(len(moved) * rounds); applied >= max {
		t.Errorf("the takeovers of %d partitions applied %v records, want fewer than %v (from warm copies)", len(moved), applied, max)
	}
	t.Logf("takeovers of %d partitions from standbys applied %v records", len(moved), applied)
	env.loginRound(users)
	env.waitCounted(users, rounds+2)
	owners := map[string]bool{}
	for _, p := range after {
		owners[p.Owner] = true
	}
	if len(owners) != 2 || !slices.ContainsFunc(after, func(p client.PartitionStatus) bool { return runtimes[p.Owner] != nil }) {
		t.Fatalf("owners after the crash: %v", after)
	}
}
