package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// StatusHeartbeat is how often, at the latest, a runtime writes the status of each deployment
// it runs, even when nothing happens (besides the writes after batches, at most once a
// second, and on every change of state).
const StatusHeartbeat = 5 * time.Second

// StaleAfter is how old the update time of a running (or drained) deployment's status may be
// before the client calls it stale ([Status.Stale]): three heartbeats. A status that old was
// not written by a live runtime for three intervals in a row: the runtime is stopped, cut
// from NATS, or cannot write to NATS (a full disk under the server), and whatever the status
// says is no longer known to be true. The rule compares the runtime's clock (UpdatedAt) with
// the client's: clocks more than a few seconds apart make it fire early or late.
const StaleAfter = 3 * StatusHeartbeat

// Deployment states in [Status].
const (
	StatusRunning = "running"
	StatusFailed  = "failed"
	StatusStopped = "stopped"
	// StatusDrained: the deployment ran its last batch for undeploy --drain (every timeout
	// fired) and runs nothing more until the undeploy removes it.
	StatusDrained = "drained"
	// StatusOrphaned: the deployment is owned by a runtime that does not answer (its
	// state is on that runtime's data directory, lost or not running). Error says which
	// runtime and the ways out: start a runtime on that data directory, or deploy again
	// with --reset-state to start from empty state on a runtime that is up.
	StatusOrphaned = "orphaned"
	// StatusBlocked: the deployment runs, but the outputs of its committed batches cannot be
	// published (an output stream full with discard new, or deleted, a publish refused or
	// unacknowledged, NATS unreachable). They wait in its outbox, and no new batch runs until
	// they are out, so its input waits in its stream (InputLag grows). Error says why. It
	// reads running again once they are delivered and a batch commits; nothing is lost.
	StatusBlocked = "blocked"
)

// Runs tells whether a deployment in state runs on its runtime: running, or blocked.
func Runs(state string) bool { return state == StatusRunning || state == StatusBlocked }

// Status is a deployment's progress, like Spark's StreamingQueryProgress. The service
// publishes it to the status bucket after batches (at most once a second) and on every change
// of state; `groupstate status` reads it. Batches, RowsIn, LateRows, DeadLetters,
// TimeoutsFired, Emitted and TTLExpired count since the deployment's state began: they are
// committed with the batches, so they go on through restarts and failovers (a reset of the
// state starts them again at 0). The counts of Inputs count since the runtime started it.
type Status struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Error is the current error: set while the deployment cannot make progress (or after it
	// stopped by one), cleared by the next batch that commits.
	Error string `json:"error,omitempty"`
	// LastError and LastErrorAt are the most recent error and when it happened; they stay
	// after the deployment recovered, so an outage shows.
	LastError    string    `json:"last_error,omitempty"`
	LastErrorAt  time.Time `json:"last_error_at,omitzero"`
	ModuleDigest string    `json:"module_digest"`
	// ShadowOf names the primary of a shadow deployment (deploy --shadow): its Position then
	// counts the primary's batch manifests it ran, and InputLag those it has not run yet.
	ShadowOf string `json:"shadow_of,omitempty"`
	// Promoted, on a partition of a shadow being promoted ([Client.Promote]), tells that the
	// partition ran every batch its primary recorded and took over the primary's input
	// position; the shadow becomes the primary once every partition did.
	Promoted bool `json:"promoted,omitempty"`
	// PromotedBatch and PromotedPosition, on a partition that is Promoted, are the batch id
	// of its promotion's commit and the input position it took over.
	PromotedBatch    uint64 `json:"promoted_batch,omitempty"`
	PromotedPosition uint64 `json:"promoted_position,omitempty"`
	// Owner is the ID of the runtime (its state store) that runs the deployment.
	Owner      string    `json:"owner,omitempty"`
	DeployedAt time.Time `json:"deployed_at,omitzero"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
	// Stale is set by the client that read the status (it is never stored): the status says
	// running (or drained) but was not updated for longer than [StaleAfter], so what it says
	// is not known to be true (see [Status.MarkStale]).
	Stale bool `json:"stale,omitempty"`

	Batches       int64 `json:"batches"`
	RowsIn        int64 `json:"rows_in"`
	LateRows      int64 `json:"late_rows_dropped"`
	DeadLetters   int64 `json:"dead_letters"`
	TimeoutsFired int64 `json:"timeouts_fired"`
	Emitted       int64 `json:"rows_out"`
	// TTLExpired counts the state variable entries removed because their TTL expired (ABI
	// v2 handlers only).
	TTLExpired int64 `json:"ttl_expired,omitempty"`

	StateKeys int64 `json:"state_keys"`
	TimerKeys int64 `json:"timer_keys"`
	// StateBytes is the estimated size of the deployment's state on disk.
	StateBytes int64 `json:"state_bytes"`

	LastBatchID uint64    `json:"last_batch_id"`
	LastBatchMs float64   `json:"last_batch_duration_ms"`
	LastBatchAt time.Time `json:"last_batch_at,omitzero"`
	WatermarkMs int64     `json:"watermark_ms"`
	// Position is the last input stream sequence committed; 0 for a deployment with
	// partitions, whose partitions each have theirs (in the partitioned stream, see
	// PartitionStatus). LastBatchID and LastBatchMs are then the latest partition's.
	Position uint64 `json:"input_position"`
	// InputLag is the number of input messages not yet run by a committed batch: not yet
	// delivered to the deployment, or fetched and waiting for their batch.
	InputLag int64 `json:"input_lag"`
	// Partitions are the deployment's partitions (one for a deployment without
	// `partitions`), each with its owner and progress; the fields above sum over them.
	Partitions []PartitionStatus `json:"partitions"`
	// Inputs are the inputs of a deployment with several (the spec's inputs), in the spec's
	// order; empty for a deployment with one input. InputLag above is the sum of theirs;
	// RowsIn and LateRows above, which go on through restarts, are the sums of theirs since
	// the runtime started the deployment plus what was counted before.
	Inputs []InputStatus `json:"inputs,omitempty"`
	// Isolating, while set, says that the runtime runs a batch that it attempted before
	// without committing (it stopped during it: killed for its memory, a native fault) with
	// its keys one at a time, to find and quarantine the key that brings it down.
	Isolating string `json:"isolating,omitempty"`
	// QuarantinedKeys counts the keys quarantined (their calls kept failing as a whole: their
	// rows are dead-lettered without a call until the next deploy); Quarantined lists them,
	// the first [MaxQuarantinedListed] of each partition.
	QuarantinedKeys int              `json:"quarantined_keys,omitempty"`
	Quarantined     []QuarantinedKey `json:"quarantined,omitempty"`

	// oldestLive, on a deployment with partitions, is the oldest UpdatedAt of its partitions
	// in a live state (see MarkStale); staleFrom is the update time MarkStale judged.
	oldestLive, staleFrom time.Time
}

// live tells whether st's state is one a running runtime keeps writing (see StatusHeartbeat):
// the other states are a runtime's last word about a deployment it no longer runs.
func (st *Status) live() bool {
	return st.State == StatusRunning || st.State == StatusDrained
}

// MarkStale sets st.Stale by the rule of [StaleAfter], with now the reader's time: a status
// of a live state (running, drained) whose UpdatedAt is more than StaleAfter before now.
// A deployment with partitions is stale when one of its live partitions is (see
// Client.Status), shown with that partition's age.
func (st *Status) MarkStale(now time.Time) {
	at := st.UpdatedAt
	if !st.oldestLive.IsZero() {
		at = st.oldestLive
	}
	st.Stale = st.live() && !at.IsZero() && now.Sub(at) > StaleAfter
	st.staleFrom = at
}

// ShownState is the state to show a person at time now: the stored state, or, for a stale
// status (see MarkStale), "stale (last update 42s ago)".
func (st *Status) ShownState(now time.Time) string {
	if !st.Stale {
		return st.State
	}
	return fmt.Sprintf("stale (last update %s ago)", now.Sub(st.staleFrom).Truncate(time.Second))
}

// MaxQuarantinedListed bounds the quarantined keys a partition's status lists.
const MaxQuarantinedListed = 50

// QuarantinedKey is a key quarantined by its deployment's runtime.
type QuarantinedKey struct {
	// Key is the key, a canonical JSON scalar.
	Key json.RawMessage `json:"key"`
	// Reason is the error of its last failed call.
	Reason string `json:"reason"`
	// SinceMs is the processing time of the batch that quarantined it.
	SinceMs int64 `json:"since_ms"`
	// Partition is the partition that holds it.
	Partition int `json:"partition"`
}

// InputStatus is one of the inputs of a deployment with several, in [Status].
type InputStatus struct {
	Name string `json:"name"`
	// RowsIn and LateRows count the input's rows and those dropped as late (judged against
	// the deployment's watermark) since the runtime started the deployment.
	RowsIn   int64 `json:"rows_in"`
	LateRows int64 `json:"late_rows_dropped"`
	// Lag is the number of the input's rows not yet delivered to the deployment (counted
	// every few seconds while there are any; rows the server has not yet copied from the
	// input's stream into the deployment's inputs stream do not count).
	Lag int64 `json:"lag"`
	// WatermarkMs is the input's own watermark: its largest event time seen minus its
	// watermark delay (0 without event time, or before its first row). The deployment's
	// WatermarkMs is made of these (watermark_policy).
	WatermarkMs int64 `json:"watermark_ms"`
}

// PartitionStatus is one partition of a deployment in [Status].
type PartitionStatus struct {
	Partition int `json:"partition"`
	// Owner is the runtime that runs the partition.
	Owner string `json:"owner"`
	// Standbys are the runtimes keeping a warm copy of it (standbys in the spec).
	Standbys []string `json:"standbys"`
	// MissingStandbys is how many standbys the spec asks for that no live runtime holds.
	MissingStandbys int `json:"missing_standbys,omitempty"`
	// Position is the last input stream sequence committed: with several partitions, a
	// sequence of the partitioned stream GS_<NAME>_KG (written by the router, or sourced from
	// the input by the server with key.subject_token).
	Position uint64 `json:"position"`
	// Lag is the number of input messages not yet delivered to the partition.
	Lag int64 `json:"lag"`
	// WatermarkMs is the partition's event-time watermark.
	WatermarkMs int64 `json:"watermark_ms"`
}
