package runner

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/state"
)

// statusReporter holds a runner's status document between its puts (see
// runner.publishStatus): the state, the counters of the batches and the last errors. It owns
// its lock: the runner's loop, the service's goroutine, the router's and the API's all use it,
// only through its methods, which are safe for concurrent use. The zero statusReporter holds
// an empty status; runner.setup sets the first.
type statusReporter struct {
	// quiet: fenced, the runner publishes no more status (the new owner does).
	quiet atomic.Bool

	mu     sync.Mutex
	status client.Status
	// lastPut is when the status was last taken to be put (see take).
	lastPut time.Time
	// owed tells that a put was refused by the throttle since the last put (see take and
	// owedIn): what it would have carried waits for the next.
	owed bool
	// inputsLagAt is when the inputs' lag was last counted (see inputsLagDue).
	inputsLagAt time.Time
}

// silence makes the runner publish no more status (fenced: the new owner does).
func (sr *statusReporter) silence() { sr.quiet.Store(true) }

// setSilent sets whether the runner publishes no more status (see silence).
func (sr *statusReporter) setSilent(quiet bool) { sr.quiet.Store(quiet) }

// silent tells whether the runner publishes no more status (see silence).
func (sr *statusReporter) silent() bool { return sr.quiet.Load() }

// reset sets the whole status, before the runner starts.
func (sr *statusReporter) reset(st client.Status) {
	sr.mu.Lock()
	sr.status = st
	sr.mu.Unlock()
}

// statusEvery is how often at most a runner puts its status unless forced (see take).
const statusEvery = time.Second

// take returns a copy of the status to put, and notes the put, unless force is false and the
// last was taken less than statusEvery ago (then ok is false, and the put is owed: see owedIn).
func (sr *statusReporter) take(force bool) (st client.Status, ok bool) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if !force && time.Since(sr.lastPut) < statusEvery {
		sr.owed = true
		return client.Status{}, false
	}
	sr.lastPut, sr.owed = time.Now(), false
	st = sr.status
	st.Inputs = slices.Clone(st.Inputs) // record goes on adding to the reporter's
	return st, true
}

// owedIn tells whether a put refused by the throttle is owed (ok), and in how long the
// throttle lets it be made (d, 0 when it does now). The live loop wakes then to make it (see
// liveSource.due), so that a batch's status is put at most statusEvery after it committed,
// not only when the next fetch waited idlePoll for nothing.
func (sr *statusReporter) owedIn() (d time.Duration, ok bool) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if !sr.owed || sr.quiet.Load() { // a silenced runner owes no put
		return 0, false
	}
	return max(0, statusEvery-time.Since(sr.lastPut)), true
}

// SetError notes err as the status's current and last error.
func (sr *statusReporter) setError(err error) {
	sr.mu.Lock()
	sr.status.Error = err.Error()
	sr.status.LastError, sr.status.LastErrorAt = err.Error(), time.Now()
	sr.mu.Unlock()
}

// noteError notes msg as the status's last error only (what it did not stop).
func (sr *statusReporter) noteError(msg string) {
	sr.mu.Lock()
	sr.status.LastError, sr.status.LastErrorAt = msg, time.Now()
	sr.mu.Unlock()
}

// clearError clears the status's current error (its last error stays).
func (sr *statusReporter) clearError() {
	sr.mu.Lock()
	sr.status.Error = ""
	sr.mu.Unlock()
}

// fail notes that the deployment stopped by err.
func (sr *statusReporter) fail(err error) {
	sr.mu.Lock()
	sr.status.State = client.StatusFailed
	sr.status.Error = err.Error()
	sr.status.LastError, sr.status.LastErrorAt = err.Error(), time.Now()
	sr.mu.Unlock()
}

// Failed tells whether the deployment stopped by an error.
func (sr *statusReporter) failed() bool {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.status.State == client.StatusFailed
}

// healthy tells whether the deployment neither failed nor faults (a batch or a fetch failing).
func (sr *statusReporter) healthy() bool {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.status.State != client.StatusFailed && sr.status.Error == ""
}

// setState sets the status's state.
func (sr *statusReporter) setState(state string) {
	sr.mu.Lock()
	sr.status.State = state
	sr.mu.Unlock()
}

// block notes that the deployment's outputs cannot be published (see client.StatusBlocked):
// a running deployment reads blocked until a batch commits again (record).
func (sr *statusReporter) block() {
	sr.mu.Lock()
	if sr.status.State == client.StatusRunning {
		sr.status.State = client.StatusBlocked
	}
	sr.mu.Unlock()
}

// stopped sets the state stopped; with keepFailed, a failed state stays.
func (sr *statusReporter) stopped(keepFailed bool) {
	sr.mu.Lock()
	if !keepFailed || sr.status.State != client.StatusFailed {
		sr.status.State = client.StatusStopped
	}
	sr.mu.Unlock()
}

// setPromoted notes that the shadow's partition committed its promotion at h.
func (sr *statusReporter) setPromoted(h registry.Handover) {
	sr.mu.Lock()
	sr.status.Promoted, sr.status.PromotedBatch, sr.status.PromotedPosition = true, h.Batch, h.Position
	sr.mu.Unlock()
}

// setCounters sets the status counters to the deployment's committed counters (see
// state.Progress.Counters), which survive restarts and failovers.
func (sr *statusReporter) setCounters(c state.Counters) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	st := &sr.status
	st.Batches, st.RowsIn, st.LateRows = int64(c.Batches), int64(c.RowsIn), int64(c.LateRows)
	st.DeadLetters, st.TimeoutsFired, st.TTLExpired, st.Emitted = int64(c.DeadLetters), int64(c.TimeoutsFired), int64(c.TTLExpired), int64(c.Emitted)
}

// record notes a batch report in the status, and the deployment's counters as its commit
// left them (c).
func (sr *statusReporter) record(rep *engine.BatchReport, c state.Counters) {
	sr.setCounters(c)
	sr.mu.Lock()
	defer sr.mu.Unlock()
	st := &sr.status
	st.Error = ""
	switch {
	case rep.Undelivered != "" && st.State == client.StatusRunning:
		st.State = client.StatusBlocked // committed, but its outputs wait in the outbox
		st.Error = "outputs cannot be published: " + rep.Undelivered
		st.LastError, st.LastErrorAt = st.Error, time.Now()
	case rep.Undelivered == "" && st.State == client.StatusBlocked:
		st.State = client.StatusRunning // the outbox was delivered: the batch ran
	}
	if rep.Skipped {
		return
	}
	st.LastBatchID = rep.BatchID
	st.LastBatchMs = float64(rep.Duration.Microseconds()) / 1000
	st.WatermarkMs = rep.WatermarkMs
	st.LastBatchAt = time.Now()
	for i, in := range rep.Inputs {
		if i < len(st.Inputs) {
			st.Inputs[i].RowsIn += int64(in.RowsIn)
			st.Inputs[i].LateRows += int64(in.LateRows)
			st.Inputs[i].WatermarkMs = in.WatermarkMs
		}
	}
}

// inputsLagDue tells whether the inputs' lag was last counted every or longer ago.
func (sr *statusReporter) inputsLagDue(every time.Duration) bool {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return time.Since(sr.inputsLagAt) >= every
}

// setInputsLag sets the lag of each input in st and in the status (the count of its name in
// pending, 0 when absent), and notes the time it was counted.
func (sr *statusReporter) setInputsLag(st *client.Status, pending map[string]uint64) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	sr.inputsLagAt = time.Now()
	for i := range st.Inputs {
		st.Inputs[i].Lag = int64(pending[st.Inputs[i].Name])
		if i < len(sr.status.Inputs) {
			sr.status.Inputs[i].Lag = st.Inputs[i].Lag
		}
	}
}
