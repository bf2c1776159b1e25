package runner

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/registry"
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

// take returns a copy of the status to put, and notes the put, unless force is false and the
// last was taken less than a second ago (then ok is false).
func (sr *statusReporter) take(force bool) (st client.Status, ok bool) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if !force && time.Since(sr.lastPut) < time.Second {
		return client.Status{}, false
	}
	sr.lastPut = time.Now()
	st = sr.status
	st.Inputs = slices.Clone(st.Inputs) // record goes on adding to the reporter's
	return st, true
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

// record adds a batch report to the status counters.
func (sr *statusReporter) record(rep *engine.BatchReport) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	st := &sr.status
	st.Error = ""
	if rep.Skipped {
		return
	}
	st.Batches++
	st.RowsIn += int64(rep.RowsIn)
	st.LateRows += int64(rep.LateRows)
	st.DeadLetters += int64(rep.DeadLetters)
	st.TimeoutsFired += int64(rep.TimeoutCalls)
	st.TTLExpired += int64(rep.TTLExpired)
	st.Emitted += int64(rep.Emitted)
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
