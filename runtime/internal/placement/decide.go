package placement

import (
	"slices"
	"strconv"
	"time"
)

// Action is what a runtime does about one partition of a replicated deployment when it
// applies the deployment (see [Decide]). The zero value is [Starting].
type Action int

const (
	// Starting: the partition is being started here already (off the service's loop);
	// nothing is done until that ends (the deployment is applied again then).
	Starting Action = iota
	// Keep: a runner here runs the partition under its current lease, as the record asks,
	// or it stopped by itself (on_error: fail) at the same revision of the record: a
	// placement check is not a redeploy, so nothing is done (and a hand-over asked before
	// is forgotten).
	Keep
	// Acquire: the plan gives the partition to this runtime and no runner here runs it
	// under its current lease: the revision is checked, a runner here (of another
	// revision, or whose log was lost) is stopped, and the lease acquired for a start here.
	Acquire
	// AwaitLease: an [Acquire] was refused because another live runtime holds the lease:
	// this runtime keeps a standby copy of the partition meanwhile, which the holder waits
	// for (see [WaitForWarmCopy]) before it hands the partition over.
	AwaitLease
	// WaitForWarmCopy: the plan moves the partition that runs here, under this runtime's
	// lease, to another runtime whose standby copy of it is not warm yet: it keeps running
	// until that copy is warm, or for at most [Facts.WarmMax] since the hand-over was first
	// asked ([Runner.HandoverAsked]; now when zero).
	WaitForWarmCopy
	// HandOver: the plan moves the partition that runs here, under this runtime's lease, to
	// another runtime, whose copy is warm (or was waited for long enough): the runner stops
	// after its batch in flight, writes its status as stopped and releases the lease for
	// the new owner to take at once.
	HandOver
	// StopFenced: the plan gives the partition to another runtime, and another runtime
	// holds its lease: the runner here was fenced (or is about to be, at its next append).
	// It stops quietly: the status and the lease are the new owner's.
	StopFenced
	// KeepStandby: the plan gives the partition to another runtime and names this one a
	// standby, and nothing runs it here: a standby copy is kept (started if there is none).
	KeepStandby
	// DropCopy: the plan gives the partition to another runtime and does not name this one
	// a standby, and nothing runs it here: a standby copy here, if any, is ended and its
	// data dropped.
	DropCopy
)

var actionNames = [...]string{"starting", "keep", "acquire", "await-lease", "wait-for-warm-copy", "hand-over", "stop-fenced", "keep-standby", "drop-copy"}

// String is the action's name, as in logs and test failures.
func (a Action) String() string {
	if a < 0 || int(a) >= len(actionNames) {
		return "action(" + strconv.Itoa(int(a)) + ")"
	}
	return actionNames[a]
}

// Lease is a partition lease as this package sees it: who holds it, at which epoch (the
// lease's revision; 0: never taken).
type Lease struct {
	Owner string
	Epoch uint64
}

// Runner is what a runtime knows of the runner of a partition registered there.
type Runner struct {
	// Lease is the lease the runner runs under.
	Lease Lease
	// Runs tells whether it runs the record being applied as it should: the same module and
	// spec, no reset asked, and neither failed nor faulting.
	Runs bool
	// SameRevision tells whether it was started from the revision of the record being
	// applied.
	SameRevision bool
	// LogLost tells whether it stopped because its changelog refused (fenced) or lost a
	// write: only a restore from the log may run the partition here again.
	LogLost bool
	// HandoverAsked is when the plan first moved the partition to another runtime while
	// this runner held its lease (zero: not asked).
	HandoverAsked time.Time
}

// Facts are what a runtime knows about one partition of a replicated deployment when it
// applies the deployment: the input of [Decide].
type Facts struct {
	// Me is this runtime's ID.
	Me string
	// Assignment is the plan's assignment of the partition (see [Plan]).
	Assignment Assignment
	// Lease is the partition's lease as read for this apply (zero: none).
	Lease Lease
	// Starting tells whether the partition is being started here (off the service's loop).
	Starting bool
	// Runner is the runner of the partition here (nil: none).
	Runner *Runner
	// NewOwnerWarm tells whether the plan's owner, another runtime, records a warm standby
	// copy of the partition.
	NewOwnerWarm bool
	// AcquireRefused tells whether this apply's [Acquire] of the lease was refused: another
	// live runtime holds it.
	AcquireRefused bool
	// Now is the time of the decision, and WarmMax the longest a hand-over waits for the
	// new owner's copy to be warm.
	Now     time.Time
	WarmMax time.Duration
}

// Decision is the outcome of [Decide].
type Decision struct {
	// Action is what to do.
	Action Action
	// Standby tells, when the plan gives the partition to another runtime, whether it names
	// this one a standby of it: after the action this runtime keeps a standby copy (of what
	// a runner stopped here held, after a [HandOver]); otherwise a standby copy here is
	// ended, and the data of a runner stopped here dropped.
	Standby bool
}

// Decide is the placement decision of one runtime for one partition of a replicated
// deployment: what to do given what the runtime knows (see [Facts]). It is a pure
// function: it reads nothing but f and changes nothing, so that the service, which gathers
// the facts and carries out the action, can be reasoned about (and tested) one rule at a
// time:
//
//   - a partition being started here is left alone ([Starting]);
//   - the plan gives it here: a runner here under the current lease that runs the record
//     (or stopped by itself at the same revision, its log intact) is kept ([Keep]);
//     otherwise the lease is acquired ([Acquire]), and while another live runtime holds it,
//     a standby copy is kept ([AwaitLease]);
//   - the plan gives it to another runtime: a runner here that holds the current lease
//     hands the partition over once the new owner's copy is warm ([WaitForWarmCopy], then
//     [HandOver]); one whose lease another runtime holds stops quietly ([StopFenced]);
//     with no runner here, a standby copy is kept or dropped as the plan says
//     ([KeepStandby], [DropCopy]).
func Decide(f Facts) Decision {
	as, r := f.Assignment, f.Runner
	if f.Starting {
		return Decision{Action: Starting}
	}
	if as.Owner != f.Me {
		d := Decision{Standby: slices.Contains(as.Standbys, f.Me)}
		switch {
		case r == nil && d.Standby:
			d.Action = KeepStandby
		case r == nil:
			d.Action = DropCopy
		case f.Lease.Owner == f.Me && f.Lease.Epoch == r.Lease.Epoch:
			d.Action = HandOver
			if !f.NewOwnerWarm && (r.HandoverAsked.IsZero() || f.Now.Sub(r.HandoverAsked) < f.WarmMax) {
				d.Action = WaitForWarmCopy
			}
		default:
			d.Action = StopFenced
		}
		return d
	}
	switch {
	case f.AcquireRefused:
		return Decision{Action: AwaitLease}
	case r != nil && r.Lease == f.Lease && (r.Runs || (r.SameRevision && !r.LogLost)):
		return Decision{Action: Keep}
	default:
		return Decision{Action: Acquire}
	}
}
