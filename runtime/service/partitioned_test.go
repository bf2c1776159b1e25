package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

const partitionedSpec = replicatedSpec + "partitions: 4\n"

// totalsByUser returns each user's totals in the output stream, in stream order.
func (e *natsEnv) totalsByUser() map[string][]int {
	e.t.Helper()
	out := map[string][]int{}
	for _, m := range e.streamMsgs("LOGINCOUNT_OUT") {
		var v struct {
			UserID string `json:"user_id"`
			Total  int    `json:"total_logins"`
		}
		testutil.Require(e.t, json.Unmarshal(m.Data, &v))
		out[v.UserID] = append(out[v.UserID], v.Total)
	}
	return out
}

// wantCounts fails unless the state of each of users in deployment name is a login count
// of n (logincount's state).
func (e *natsEnv) wantCounts(name string, users []string, n int) {
	e.t.Helper()
	for _, u := range users {
		ks, found, err := e.client.State(context.Background(), name, client.KeyFromArg(u))
		if err != nil || !found {
			e.t.Fatalf("%s's state: found %v, err %v", u, found, err)
		}
		var v struct {
			Count int `json:"login_count"`
		}
		if err := json.Unmarshal(ks.Value, &v); err != nil || v.Count != n {
			e.t.Fatalf("%s's state %s (%v), want a count of %d", u, ks.Value, err, n)
		}
	}
}

// loginUsers returns n user ids, u0 to u<n-1>.
func loginUsers(n int) []string {
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("u%d", i)
	}
	return users
}

// loginRound publishes one login of each user.
func (e *natsEnv) loginRound(users []string) {
	e.t.Helper()
	for _, u := range users {
		e.publish("logins.web", fmt.Sprintf(`{"user_id":%q}`, u))
	}
}

// waitCounted waits until every user's totals are exactly 1..n; anything else that is not
// on its way there (a repeat, a gap, a count above n) fails at once.
func (e *natsEnv) waitCounted(users []string, n int) {
	e.t.Helper()
	var got map[string][]int
	testutil.EventuallyWithin(e.t, compileDeadline, fmt.Sprintf("every user counted to %d", n), func() bool {
		got = e.totalsByUser()
		done := true
		for _, u := range users {
			for i, c := range got[u] {
				if c != i+1 || i >= n {
					e.t.Fatalf("%s's totals %v, want 1..%d", u, got[u], n)
				}
			}
			done = done && len(got[u]) == n
		}
		return done
	})
}

// TestPartitionedFailover: a deployment split into 4 partitions runs on two runtimes. Each
// key's rows reach its partition (routed once), every key's outputs are exactly 1..c, state
// and key listing are answered by the partitions' owners, and losing a runtime moves its
// partitions (the router's among them) to the other, which goes on without a gap or a repeat.
func TestPartitionedFailover(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	runtimes := map[string]*replicaRuntime{}
	for range 2 {
		r := env.startRuntime(t.TempDir(), clock)
		runtimes[r.id] = r
	}
	env.deploy(partitionedSpec, logincountWasm(t))
	var st *client.Status
	testutil.EventuallyWithin(t, compileDeadline, "4 partitions running on both runtimes", func() bool {
		var err error
		st, err = env.client.Status(context.Background(), "logincount")
		if err != nil || st.State != client.StatusRunning || len(st.Partitions) != 4 {
			return false
		}
		owners := map[string]int{}
		for _, p := range st.Partitions {
			owners[p.Owner]++
		}
		return len(owners) == 2 && owners[""] == 0
	})

	users := loginUsers(12)
	round := func() { env.loginRound(users) }
	// logincount emits a key's total once a batch, so a round is awaited before the next.
	round()
	env.waitCounted(users, 1)
	round()
	env.waitCounted(users, 2)

	keys, next, err := env.client.Keys(context.Background(), "logincount", nil, 100)
	testutil.Require(t, err)
	var listed []string
	for _, k := range keys {
		var s string
		testutil.Require(t, json.Unmarshal(k.Key, &s))
		listed = append(listed, s)
	}
	if want := slices.Sorted(slices.Values(users)); !slices.Equal(listed, want) || next != nil {
		t.Fatalf("keys %v (next %s), want %v", listed, next, want)
	}

	// Lose the runtime that runs partition 0 (and the router).
	victim := st.Partitions[0].Owner
	runtimes[victim].crash()
	delete(runtimes, victim)
	var survivor string
	for id := range runtimes {
		survivor = id
	}
	round()
	testutil.EventuallyWithin(t, compileDeadline, "every partition on "+survivor, func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		if err != nil || st.State != client.StatusRunning {
			return false
		}
		for _, p := range st.Partitions {
			if p.Owner != survivor {
				return false
			}
		}
		return true
	})
	env.waitCounted(users, 3)
	round()
	env.waitCounted(users, 4)
	env.wantCounts("logincount", users, 4)
}

// waitOwners waits until every partition of name runs and ok holds for their owners, and
// returns them.
func (e *natsEnv) waitOwners(name string, ok func(owners []string) bool) []string {
	e.t.Helper()
	var owners []string
	defer func() { e.t.Logf("owners of %s: %v", name, owners) }()
	testutil.EventuallyWithin(e.t, compileDeadline, name+"'s partitions placed", func() bool {
		st, err := e.client.Status(context.Background(), name)
		if err != nil || st.State != client.StatusRunning {
			return false
		}
		owners = owners[:0]
		for _, p := range st.Partitions {
			owners = append(owners, p.Owner)
		}
		return ok(owners)
	})
	return owners
}

// TestPartitionedScaleOut: a runtime that joins takes its share of the partitions, only from
// runtimes above it (no partition moves between the others), the old owners hand theirs
// over; when it stops (SIGTERM) its partitions go back. Every key's outputs stay exactly 1..c.
func TestPartitionedScaleOut(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	a := env.startRuntime(t.TempDir(), clock)
	b := env.startRuntime(t.TempDir(), clock)
	// 6 partitions: 3 on each of two runtimes; a third makes the bound ceil(6/3) = 2, so each
	// of the two hands one over.
	env.deploy(replicatedSpec+"partitions: 6\n", logincountWasm(t))
	users := loginUsers(12)
	round := func() { env.loginRound(users) }
	before := env.waitOwners("logincount", func(o []string) bool {
		return len(o) == 6 && slices.Contains(o, a.id) && slices.Contains(o, b.id)
	})
	round()
	env.waitCounted(users, 1)

	c := env.startRuntime(t.TempDir(), clock)
	after := env.waitOwners("logincount", func(o []string) bool {
		n := 0
		for _, id := range o {
			if id == c.id {
				n++
			}
		}
		return len(o) == 6 && n == 2
	})
	for p := range after {
		if after[p] != before[p] && after[p] != c.id {
			t.Errorf("partition %d moved from %s to %s, not to the newcomer %s", p, before[p], after[p], c.id)
		}
	}
	round()
	env.waitCounted(users, 2)

	c.rs.stop() // SIGTERM: drains, hands its partition over, leaves
	env.waitOwners("logincount", func(o []string) bool {
		return len(o) == 6 && !slices.Contains(o, c.id) && !slices.Contains(o, "")
	})
	round()
	env.waitCounted(users, 3)
}
