package placement_test

import (
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/placement"
)

// TestDecide: the per-partition placement decision, one rule per case: a hand-over waits for
// a warm copy (up to WarmMax), a fenced runner stops quietly, a lease held by another live
// runtime keeps a standby, the same epoch keeps, and a failed runner is not restarted by a
// placement check (only a redeploy, or a lost log, starts it again).
func TestDecide(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	const warmMax = 30 * time.Second
	mine := placement.Lease{Owner: "me", Epoch: 7}
	here := placement.Assignment{Owner: "me", Standbys: []string{"b"}}
	there := placement.Assignment{Owner: "b", Standbys: []string{"me"}}
	thereNoStandby := placement.Assignment{Owner: "b", Standbys: []string{"c"}}
	running := func(mod func(*placement.Runner)) *placement.Runner {
		r := &placement.Runner{Lease: mine, Runs: true, SameRevision: true}
		if mod != nil {
			mod(r)
		}
		return r
	}
	tests := []struct {
		name string
		f    placement.Facts
		want placement.Decision
	}{
		{"being started here", placement.Facts{Assignment: here, Lease: mine, Starting: true, Runner: running(nil)},
			placement.Decision{Action: placement.Starting}},
		{"being started here, the plan moved on", placement.Facts{Assignment: there, Starting: true},
			placement.Decision{Action: placement.Starting}},

		// The plan gives it here.
		{"same epoch keeps", placement.Facts{Assignment: here, Lease: mine, Runner: running(nil)},
			placement.Decision{Action: placement.Keep}},
		{"failed runner not restarted by a placement check", placement.Facts{Assignment: here, Lease: mine,
			Runner: running(func(r *placement.Runner) { r.Runs = false })}, placement.Decision{Action: placement.Keep}},
		{"failed runner restarted by a redeploy", placement.Facts{Assignment: here, Lease: mine,
			Runner: running(func(r *placement.Runner) { r.Runs, r.SameRevision = false, false })}, placement.Decision{Action: placement.Acquire}},
		{"new revision that runs the same record keeps", placement.Facts{Assignment: here, Lease: mine,
			Runner: running(func(r *placement.Runner) { r.SameRevision = false })}, placement.Decision{Action: placement.Keep}},
		{"log lost restores", placement.Facts{Assignment: here, Lease: mine,
			Runner: running(func(r *placement.Runner) { r.Runs, r.LogLost = false, true })}, placement.Decision{Action: placement.Acquire}},
		{"newer epoch (taken and given back) acquires", placement.Facts{Assignment: here, Lease: placement.Lease{Owner: "me", Epoch: 9}, Runner: running(nil)},
			placement.Decision{Action: placement.Acquire}},
		{"lease of another acquires", placement.Facts{Assignment: here, Lease: placement.Lease{Owner: "b", Epoch: 9}, Runner: running(nil)},
			placement.Decision{Action: placement.Acquire}},
		{"nothing here acquires", placement.Facts{Assignment: here, Lease: placement.Lease{Owner: "b", Epoch: 3}},
			placement.Decision{Action: placement.Acquire}},
		{"never taken acquires", placement.Facts{Assignment: here}, placement.Decision{Action: placement.Acquire}},
		{"lease held by another keeps a standby", placement.Facts{Assignment: here, Lease: placement.Lease{Owner: "b", Epoch: 3}, AcquireRefused: true},
			placement.Decision{Action: placement.AwaitLease}},

		// The plan gives it to another runtime, with this one held the lease.
		{"hand-over waits for a warm copy", placement.Facts{Assignment: there, Lease: mine, Runner: running(nil), Now: now, WarmMax: warmMax},
			placement.Decision{Action: placement.WaitForWarmCopy, Standby: true}},
		{"hand-over still waits for a warm copy", placement.Facts{Assignment: there, Lease: mine, Now: now, WarmMax: warmMax,
			Runner: running(func(r *placement.Runner) { r.HandoverAsked = now.Add(-warmMax + time.Millisecond) })},
			placement.Decision{Action: placement.WaitForWarmCopy, Standby: true}},
		{"hand-over once the copy is warm", placement.Facts{Assignment: there, Lease: mine, NewOwnerWarm: true, Now: now, WarmMax: warmMax,
			Runner: running(func(r *placement.Runner) { r.HandoverAsked = now.Add(-time.Second) })},
			placement.Decision{Action: placement.HandOver, Standby: true}},
		{"hand-over at once to a warm copy", placement.Facts{Assignment: thereNoStandby, Lease: mine, NewOwnerWarm: true, Runner: running(nil), Now: now, WarmMax: warmMax},
			placement.Decision{Action: placement.HandOver}},
		{"hand-over waits no longer than WarmMax", placement.Facts{Assignment: thereNoStandby, Lease: mine, Now: now, WarmMax: warmMax,
			Runner: running(func(r *placement.Runner) { r.HandoverAsked = now.Add(-warmMax) })},
			placement.Decision{Action: placement.HandOver}},

		// The plan gives it to another runtime, which holds the lease.
		{"fenced stops quietly", placement.Facts{Assignment: there, Lease: placement.Lease{Owner: "b", Epoch: 8}, Runner: running(nil)},
			placement.Decision{Action: placement.StopFenced, Standby: true}},
		{"fenced stops quietly and drops its copy", placement.Facts{Assignment: thereNoStandby, Lease: placement.Lease{Owner: "b", Epoch: 8}, Runner: running(nil)},
			placement.Decision{Action: placement.StopFenced}},
		{"a newer epoch of this runtime fences too", placement.Facts{Assignment: there, Lease: placement.Lease{Owner: "me", Epoch: 8}, Runner: running(nil), NewOwnerWarm: true},
			placement.Decision{Action: placement.StopFenced, Standby: true}},

		// Nothing runs it here.
		{"standby kept", placement.Facts{Assignment: there, Lease: placement.Lease{Owner: "b", Epoch: 8}},
			placement.Decision{Action: placement.KeepStandby, Standby: true}},
		{"copy dropped", placement.Facts{Assignment: thereNoStandby, Lease: placement.Lease{Owner: "b", Epoch: 8}},
			placement.Decision{Action: placement.DropCopy}},
		{"no live member", placement.Facts{Assignment: placement.Assignment{Missing: 1}},
			placement.Decision{Action: placement.DropCopy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f.Me = "me"
			if got := placement.Decide(tt.f); got != tt.want {
				t.Fatalf("Decide = %v (standby %v), want %v (standby %v)", got.Action, got.Standby, tt.want.Action, tt.want.Standby)
			}
		})
	}
}

// TestActionString: every action has a name.
func TestActionString(t *testing.T) {
	for a := placement.Starting; a <= placement.DropCopy; a++ {
		if s := a.String(); s == "" || s[0] == 'a' && a != placement.Acquire && a != placement.AwaitLease {
			t.Fatalf("action %d is named %q", int(a), s)
		}
	}
	if s := placement.Action(99).String(); s != "action(99)" {
		t.Fatalf("unknown action named %q", s)
	}
}
