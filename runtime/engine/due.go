package engine

import (
	"context"
	"math"

	"github.com/groupstate/groupstate/timeouts"
)

// DueNow is what [Engine.Due] returns when the engine has something to do at once.
const DueNow = math.MinInt64

// Due tells when a batch without input would next do something, so that a runner with no
// input runs none that would do nothing (docs/semantics.md, "No-data batches"). It returns:
//
//   - [DueNow] (ok) when it would at once: an earlier batch's outputs are still to be
//     delivered or their acknowledgements made durable, a batch was left open, the initial
//     state or (ABI v2) the module's state declarations are still to be committed;
//   - else the processing time (ms) from which a batch fires the earliest processing-time
//     timeout (one at t fires in a batch whose processing time is after t) or removes the
//     earliest state entry whose TTL expires (ABI v2);
//   - ok false when no batch without input does anything at any processing time: event-time
//     timeouts fire only as the watermark moves, which input does, or the other partitions'
//     records (the runner watches those itself).
//
// An error reading the state is returned as such; the caller may run a batch anyway. Due is
// for the goroutine that runs batches.
func (e *Engine) Due() (atMs int64, ok bool, err error) {
	if e.closed {
		return 0, false, ErrEngineClosed
	}
	if e.pending || e.inflight != nil || e.acksUnsynced || e.progress.Open.Active || e.initial != nil ||
		(e.v2 != nil && e.v2.vars == nil) {
		return DueNow, true, nil
	}
	at, ok := int64(math.MaxInt64), false
	if e.rules.Mode == timeouts.ProcessingTime {
		t, has, err := e.ks.FirstTimeout()
		if err != nil {
			return 0, false, err
		}
		if has && t < math.MaxInt64 {
			at, ok = t+1, true // timeouts.Fires: t < T
		}
	}
	if e.v2 != nil {
		t, has, err := e.ks.FirstExpiry()
		if err != nil {
			return 0, false, err
		}
		if has && t < at {
			at, ok = t, true // Batch.ExpireTTL(T) removes what expires at or before T
		}
	}
	return at, ok, nil
}

// releaser is a handler that can close the module instances waiting for calls (the WASM
// host, and a shared module's reference to it).
type releaser interface {
	Release(ctx context.Context) int
}

// ReleaseInstances closes the module instances that wait for calls, so that the engine of a
// deployment that idles holds no instance memory; its next call makes an instance again (it
// starts the module anew, as after a failed call: a module keeps nothing between calls that
// the runtime relies on). With a module the deployment's partitions share
// (Config.ShareModule) it closes the shared module's idle instances. It returns how many it
// closed (0 for a native handler).
func (e *Engine) ReleaseInstances(ctx context.Context) int {
	if e.closed {
		return 0
	}
	if r, ok := e.h.(releaser); ok {
		return r.Release(ctx)
	}
	return 0
}
