package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// join joins as id over a connection of its own (so that closing it is a crash of that
// member alone); the membership leaves when the test ends.
func join(t *testing.T, e *env, id string, ttl time.Duration) (*Membership, *nats.Conn) {
	t.Helper()
	nc := e.nats.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	m, err := JoinMembers(e.ctx, js, MemberOptions{ID: id, TTL: ttl})
	if err != nil {
		t.Fatalf("joining as %s: %v", id, err)
	}
	t.Cleanup(func() { _ = m.Leave(e.ctx) })
	return m, nc
}

func ids(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// sees reports whether m's view is exactly want.
func sees(m *Membership, want ...string) bool { return slices.Equal(ids(m.Live()), want) }

// drainChanges empties m's change channel.
func drainChanges(m *Membership) {
	for {
		select {
		case <-m.Changes():
		default:
			return
		}
	}
}

func TestMembersSeeEachOther(t *testing.T) {
	e := newEnv(t)
	a, _ := join(t, e, "a", time.Second)
	if !sees(a, "a") {
		t.Fatalf("a sees %v right after joining, want itself", ids(a.Live()))
	}
	drainChanges(a)
	before := time.Now()
	b, _ := join(t, e, "b", time.Second)
	if !sees(b, "a", "b") {
		t.Fatalf("b sees %v right after joining, want a and b", ids(b.Live()))
	}
	select {
	case <-a.Changes():
	case <-time.After(2 * time.Second):
		t.Fatal("a was not told of b joining")
	}
	if !sees(a, "a", "b") {
		t.Fatalf("a sees %v after the change, want a and b", ids(a.Live()))
	}
	self := b.Self()
	for _, m := range a.Live() {
		if m.ID == "b" && (!m.StartedAt.Equal(self.StartedAt) || m.StartedAt.Before(before.Add(-time.Second)) || m.RenewedAt.IsZero()) {
			t.Fatalf("a sees b as %+v, b is %+v", m, self)
		}
	}
	// Renewals (every 200ms) keep both live past the TTL and signal nothing.
	drainChanges(a)
	renewed := b.Renewed()
	time.Sleep(1500 * time.Millisecond) // the property is that nothing happens for longer than the TTL
	if !sees(a, "a", "b") || !sees(b, "a", "b") {
		t.Fatalf("after 1.5 TTL: a sees %v, b sees %v", ids(a.Live()), ids(b.Live()))
	}
	if !b.Renewed().After(renewed) {
		t.Fatal("b did not renew")
	}
	select {
	case <-a.Changes():
		t.Fatal("a renewal was signalled as a change")
	default:
	}
}

// TestMembersLeave: a leave is seen at once, not after the TTL.
func TestMembersLeave(t *testing.T) {
	e := newEnv(t)
	a, _ := join(t, e, "a", DefaultMemberTTL)
	b, _ := join(t, e, "b", DefaultMemberTTL)
	eventually(t, 2*time.Second, "a to see b", func() bool { return sees(a, "a", "b") })
	start := time.Now()
	if err := b.Leave(e.ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "a to see b leave", func() bool { return sees(a, "a") })
	t.Logf("a saw b leave %s after Leave", time.Since(start).Round(time.Microsecond))
	if err := b.Leave(e.ctx); err != nil {
		t.Fatalf("a second Leave: %v", err)
	}
}

// TestMembersExpire: a member that stops renewing without leaving (its connection closed, as
// in a crash) expires after about the TTL, and is seen again when it rejoins.
func TestMembersExpire(t *testing.T) {
	const ttl = time.Second
	e := newEnv(t)
	a, _ := join(t, e, "a", ttl)
	b, bconn := join(t, e, "b", ttl)
	// A raw watch, to see what the server sends for an expiry.
	kvw, err := e.js.KeyValue(e.ctx, MembersBucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kvw.Watch(e.ctx, "b", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	eventually(t, 2*time.Second, "a to see b", func() bool { return sees(a, "a", "b") })
	started := b.Self().StartedAt
	first := b.Renewed()
	eventually(t, 2*time.Second, "b to renew", func() bool { return b.Renewed().After(first) })

	bconn.Close()
	crashed := time.Now()
	var last time.Time // b's last renewal as a saw it
	eventually(t, ttl+2*time.Second, "b to expire", func() bool {
		for _, m := range a.Live() {
			if m.ID == "b" {
				last = m.RenewedAt
				return false
			}
		}
		return true
	})
	seen := time.Now()
	if !sees(a, "a") {
		t.Fatalf("a sees %v after b expired", ids(a.Live()))
	}
	t.Logf("b's expiry seen %s after its last renewal (TTL %s), %s after its connection closed",
		seen.Sub(last).Round(time.Millisecond), ttl, seen.Sub(crashed).Round(time.Millisecond))
	if d := seen.Sub(last); d < ttl-100*time.Millisecond {
		t.Fatalf("b expired %s after its last renewal, before the TTL of %s", d, ttl)
	}
	var op jetstream.KeyValueOp
	for op != jetstream.KeyValuePurge && op != jetstream.KeyValueDelete {
		select {
		case ent := <-w.Updates():
			if ent != nil {
				op = ent.Operation()
			}
		case <-time.After(time.Second):
			t.Fatal("the raw watch saw no removal of b")
		}
	}
	if op != jetstream.KeyValuePurge {
		t.Fatalf("an expiry is seen as %s, want a purge (the server's MaxAge marker)", op)
	}

	drainChanges(a)
	b2, _ := join(t, e, "b", ttl)
	select {
	case <-a.Changes():
	case <-time.After(2 * time.Second):
		t.Fatal("a was not told of b rejoining")
	}
	eventually(t, time.Second, "a to see b again", func() bool { return sees(a, "a", "b") })
	for _, m := range a.Live() {
		if m.ID == "b" && !m.StartedAt.After(started) {
			t.Fatalf("b rejoined with StartedAt %s, not after %s", m.StartedAt, started)
		}
	}
	if !sees(b2, "a", "b") {
		t.Fatalf("the rejoined b sees %v", ids(b2.Live()))
	}
}

// TestMembersBucket: joining creates the bucket once, whoever comes first, and refuses a
// bucket of another TTL or without limit markers.
func TestMembersBucket(t *testing.T) {
	t.Run("concurrent joins", func(t *testing.T) {
		e := newEnv(t)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				m, err := JoinMembers(e.ctx, e.js, MemberOptions{ID: string(rune('a' + i)), TTL: 2 * time.Second})
				errs[i] = err
				if err == nil {
					t.Cleanup(func() { _ = m.Leave(e.ctx) })
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("another TTL", func(t *testing.T) {
		e := newEnv(t)
		join(t, e, "a", time.Second)
		_, err := JoinMembers(e.ctx, e.js, MemberOptions{ID: "b", TTL: 2 * time.Second})
		if !errors.Is(err, ErrMemberTTL) {
			t.Fatalf("joining with another TTL: %v, want ErrMemberTTL", err)
		}
		t.Log(err)
	})
	t.Run("no limit markers", func(t *testing.T) {
		e := newEnv(t)
		if _, err := e.js.CreateKeyValue(e.ctx, jetstream.KeyValueConfig{Bucket: MembersBucket, TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		_, err := JoinMembers(e.ctx, e.js, MemberOptions{ID: "a", TTL: time.Second})
		if !errors.Is(err, ErrMembersBucket) {
			t.Fatalf("joining a bucket without limit markers: %v, want ErrMembersBucket", err)
		}
	})
}

func TestMemberOptionsRefused(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		id  string
		ttl time.Duration
		err error
	}{
		{"", time.Second, ErrMemberID},
		{"a.b", time.Second, ErrMemberID},
		{"a b", time.Second, ErrMemberID},
		{"a*", time.Second, ErrMemberID},
		{"é", time.Second, ErrMemberID},
		{string(make([]byte, 65)), time.Second, ErrMemberID},
		{"ok", 500 * time.Millisecond, ErrMemberTTL},
	}
	for _, tc := range tests {
		if _, err := JoinMembers(e.ctx, e.js, MemberOptions{ID: tc.id, TTL: tc.ttl}); !errors.Is(err, tc.err) {
			t.Errorf("JoinMembers(%q, %s) = %v, want %v", tc.id, tc.ttl, err, tc.err)
		}
	}
}

// TestMembersServerRestart: a server restart cuts every watch off. A member that died
// meanwhile is gone from the view once it comes back, whether or not the watch saw its
// expiry, and the others are back.
func TestMembersServerRestart(t *testing.T) {
	const ttl = time.Second
	e := newEnv(t)
	a, _ := join(t, e, "a", ttl)
	b, bconn := join(t, e, "b", ttl)
	eventually(t, 2*time.Second, "a and b to see each other", func() bool { return sees(a, "a", "b") && sees(b, "a", "b") })
	e.nats.Stop()
	bconn.Close() // b dies while the server is down
	down := time.Now()
	eventually(t, staleAfter*ttl+time.Second, "a's view to empty while it receives nothing", func() bool { return sees(a) })
	t.Logf("a's view emptied %s after the server stopped", time.Since(down).Round(time.Millisecond))
	e.nats.Start(t)
	up := time.Now()
	eventually(t, 5*time.Second, "a to see itself alone", func() bool { return sees(a, "a") })
	t.Logf("a sees itself again %s after the server started", time.Since(up).Round(time.Millisecond))
}

// TestMembersClusterNodeLoss: on a 3-node cluster with an R3 bucket, stopping the node that
// leads the bucket's stream loses no member, and the view carries on.
func TestMembersClusterNodeLoss(t *testing.T) {
	const ttl = time.Second
	c := testutil.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ms []*Membership
	for _, id := range []string{"a", "b"} {
		m, err := JoinMembers(ctx, c.JetStream(t), MemberOptions{ID: id, TTL: ttl, Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Leave(context.Background()) })
		ms = append(ms, m)
	}
	a, b := ms[0], ms[1]
	eventually(t, 2*time.Second, "a and b to see each other", func() bool { return sees(a, "a", "b") && sees(b, "a", "b") })
	s, err := c.JetStream(t).Stream(ctx, "KV_"+MembersBucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 {
		t.Fatalf("the bucket has %d replicas, want 3", info.Config.Replicas)
	}
	drainChanges(a)
	stopped := time.Now()
	c.Stop(c.Index(info.Cluster.Leader))
	renewed := b.Renewed()
	eventually(t, 5*time.Second, "b to renew after the leader stopped", func() bool { return b.Renewed().After(renewed) })
	t.Logf("stopped the bucket's leader %s: b renewed again %s later", info.Cluster.Leader, b.Renewed().Sub(stopped).Round(time.Millisecond))
	// Past two TTLs, neither member was ever dropped from a's view.
	deadline := stopped.Add(2*ttl + 500*time.Millisecond)
	for time.Now().Before(deadline) {
		if !sees(a, "a", "b") {
			t.Fatalf("a sees %v %s after the node stopped", ids(a.Live()), time.Since(stopped).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "a to see b leave", func() bool { return sees(a, "a") })
}

// TestMembersStandbys: a member's standby copies reach the others' views with a change
// signal, sorted and without repeats; setting the same ones again signals nothing.
func TestMembersStandbys(t *testing.T) {
	e := newEnv(t)
	a, _ := join(t, e, "a", time.Second)
	b, _ := join(t, e, "b", time.Second)
	testutil.Eventually(t, "a sees b", func() bool { return sees(a, "a", "b") })
	drainChanges(a)
	standbysOf := func(m *Membership, id string) []string {
		for _, mem := range m.Live() {
			if mem.ID == id {
				return mem.Standbys
			}
		}
		return nil
	}
	testutil.Require(t, b.SetStandbys(e.ctx, []string{"counts.3", "counts.1", "counts.3"}))
	want := []string{"counts.1", "counts.3"}
	testutil.Eventually(t, "a sees b's standbys", func() bool { return slices.Equal(standbysOf(a, "b"), want) })
	select {
	case <-a.Changes():
	case <-time.After(testutil.PollDeadline):
		t.Fatal("no change signalled for b's standbys")
	}
	if got := b.Self().Standbys; !slices.Equal(got, want) {
		t.Fatalf("b's Self has standbys %v, want %v", got, want)
	}
	testutil.Require(t, b.SetStandbys(e.ctx, []string{"counts.3", "counts.1"}))
	testutil.Require(t, b.SetStandbys(e.ctx, nil))
	testutil.Eventually(t, "a sees b's standbys gone", func() bool { return len(standbysOf(a, "b")) == 0 })
}

// TestMembersLeaving: a runtime that starts leaving stays live with Leaving set, the others
// are signalled, its standbys are kept, and it can still leave.
func TestMembersLeaving(t *testing.T) {
	e := newEnv(t)
	a, _ := join(t, e, "a", time.Second)
	b, _ := join(t, e, "b", time.Second)
	testutil.Eventually(t, "a sees b", func() bool { return sees(a, "a", "b") })
	testutil.Require(t, b.SetStandbys(e.ctx, []string{"counts.1"}))
	drainChanges(a)
	memberOf := func(m *Membership, id string) (Member, bool) {
		for _, mem := range m.Live() {
			if mem.ID == id {
				return mem, true
			}
		}
		return Member{}, false
	}
	testutil.Require(t, b.SetLeaving(e.ctx))
	testutil.Eventually(t, "a sees b leaving", func() bool {
		mem, ok := memberOf(a, "b")
		return ok && mem.Leaving && slices.Equal(mem.Standbys, []string{"counts.1"})
	})
	select {
	case <-a.Changes():
	case <-time.After(testutil.PollDeadline):
		t.Fatal("no change signalled for b's leaving")
	}
	if !b.Self().Leaving {
		t.Fatal("b's Self is not leaving")
	}
	testutil.Require(t, b.SetLeaving(e.ctx)) // again: nothing
	testutil.Require(t, b.Leave(e.ctx))
	testutil.Eventually(t, "b gone", func() bool { _, ok := memberOf(a, "b"); return !ok })
	testutil.Require(t, b.SetLeaving(e.ctx)) // after Leave: nothing
}
