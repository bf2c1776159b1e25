// Package handler defines what the engine asks of a handler, whatever it runs on: a batch of
// groups in, one result per group out. The WASM host and the in-process native handler both
// implement [Handler] and share the buffer encoding here.
package handler

import (
	"context"
	"errors"
	"fmt"

	"github.com/groupstate/groupstate/abi"
)

// Group is one key's call: its rows (data call) or none (timeout call).
type Group struct {
	// Flags holds abi.GroupTimedOut and abi.GroupStateExists.
	Flags uint32
	// Key is the canonical JSON scalar of the key.
	Key []byte
	// State is the current state value (with abi.GroupStateExists).
	State []byte
	// Rows are the key's rows of this batch in arrival order.
	Rows [][]byte
	// Inputs holds, for a deployment with several inputs (the spec's inputs list), the index
	// of each row's input (Inputs[i] is Rows[i]'s); nil for a deployment with one input.
	Inputs []uint32
}

// Result is one group's outcome, copied out of the handler's memory: the caller owns it.
type Result struct {
	// Err is set when the call for this group failed (handler error, misuse, trap, time or
	// memory limit). The other fields are then meaningless.
	Err error
	// Action is what the call did to the state value.
	Action abi.Action
	// TimeoutSet tells whether the call left a timeout; TimeoutMs holds it.
	TimeoutSet bool
	TimeoutMs  int64
	// State is the new value with abi.ActionUpdate.
	State []byte
	// Emits are the emitted rows in emission order.
	Emits [][]byte
}

// Call is one batch of groups with the batch's times.
type Call struct {
	ProcessingTimeMs int64
	WatermarkMs      int64
	Groups           []Group
}

// Handler runs calls. Process fills results (len(results) == len(call.Groups)) and returns an
// error only when the handler as a whole is unusable (closed, cannot instantiate); a failure of
// one group is reported in that group's Result.Err.
type Handler interface {
	Process(ctx context.Context, call *Call, results []Result) error
	Close(ctx context.Context) error
}

// GroupError is a failure reported for one group.
type GroupError struct {
	// Message is the handler's message.
	Message string
}

func (e *GroupError) Error() string { return e.Message }

// Fault is the error of a group whose guest call failed as a whole while running that group
// alone (a trap, the time, memory or stack limit, a malformed or oversized result): a fault
// of the module pinned on the group, as opposed to an error the handler reported for it. The
// engine quarantines a key whose calls keep faulting.
type Fault struct {
	// Err is the call's error.
	Err error
}

func (f *Fault) Error() string { return f.Err.Error() }
func (f *Fault) Unwrap() error { return f.Err }

// isolationKey is the context key of WithIsolation.
type isolationKey struct{}

// WithIsolation returns a context under which a Handler runs the groups of a call one at a
// time, each alone in a guest call of its own, calling before with the group's key first, and
// with nil after the last (an error from it ends the call with that error). The engine isolates a batch this way when it
// was started several times without committing (a crash that no error reported), so the
// key that brings the process down is known.
func WithIsolation(ctx context.Context, before func(key []byte) error) context.Context {
	return context.WithValue(ctx, isolationKey{}, before)
}

// IsolationOf returns the function of WithIsolation, or nil.
func IsolationOf(ctx context.Context) func(key []byte) error {
	f, _ := ctx.Value(isolationKey{}).(func(key []byte) error)
	return f
}

// ErrClosed is returned by a closed handler.
var ErrClosed = errors.New("handler: closed")

// EncodedSize returns the size of the process buffer for call.
func EncodedSize(call *Call) int {
	n := abi.ProcessHeaderSize
	for i := range call.Groups {
		g := &call.Groups[i]
		n += abi.GroupSize(g.Key, g.State, g.Rows)
	}
	return n
}

// Encode appends the process buffer for call to dst.
func Encode(dst []byte, call *Call) []byte {
	dst = abi.AppendProcessHeader(dst, abi.ProcessHeader{
		GroupCount:       uint32(len(call.Groups)),
		ProcessingTimeMs: call.ProcessingTimeMs,
		WatermarkMs:      call.WatermarkMs,
	})
	for i := range call.Groups {
		g := &call.Groups[i]
		dst = abi.AppendGroup(dst, g.Flags, g.Key, g.State, g.Rows)
	}
	return dst
}

// Decode reads a result buffer into results, copying everything it keeps. It fails when the
// buffer is malformed or holds a different number of groups; the error then applies to every
// group of the call.
//
// The results are fresh memory, never reused: a result stays valid for as long as the caller
// keeps it. Decode copies the whole buffer once (one copy is cheaper than one per state and
// emitted row) and the states and emitted rows of the call alias that copy, and all the emit
// lists share one slice of slices, so a call costs a few allocations instead of a few per
// group; keeping any one of them keeps that call's whole copy alive, so copy what must outlive
// the batch. Each State and Emits slice has its capacity capped at its length, so appending to
// one never writes into another.
func Decode(buf []byte, results []Result) error {
	rr, err := abi.NewResultReader(append([]byte(nil), buf...))
	if err != nil {
		return err
	}
	if int(rr.Count()) != len(results) {
		return fmt.Errorf("%w: %d results for %d groups", abi.ErrMalformed, rr.Count(), len(results))
	}
	var d decoder
	var g abi.GroupResult
	for i := range results {
		ok, err := rr.Next(&g)
		if err != nil {
			return err
		}
		if !ok {
			return abi.ErrMalformed
		}
		results[i] = d.one(&g, len(results)-i)
	}
	if ok, err := rr.Next(&g); ok || err != nil {
		if err == nil {
			err = abi.ErrMalformed
		}
		return err
	}
	return nil
}

// decoder holds the emit lists of one Decode, allocated when first needed.
type decoder struct {
	emits [][]byte // the Emits of every result, back to back
}

// one decodes a group result, whose slices alias Decode's copy of the buffer (capacities
// capped by the reader); left counts it and the groups after it.
func (d *decoder) one(g *abi.GroupResult, left int) Result {
	if g.Status != abi.StatusOK {
		msg := string(g.Error)
		if msg == "" {
			msg = "handler reported an error without a message"
		}
		return Result{Err: &GroupError{Message: msg}}
	}
	r := Result{Action: g.Action, TimeoutMs: abi.NoTimeout}
	if g.Flags&abi.ResultTimeoutSet != 0 {
		r.TimeoutSet, r.TimeoutMs = true, g.TimeoutMs
	}
	if g.Action == abi.ActionUpdate {
		r.State = g.State // never nil, even when empty: it is a slice of the copy
	}
	if g.EmitCount > 0 {
		if d.emits == nil {
			d.emits = make([][]byte, 0, int(g.EmitCount)+left-1) // a guess: one per group
		}
		start := len(d.emits)
		c := g.EmitCursor()
		for e, ok := c.Next(); ok; e, ok = c.Next() {
			d.emits = append(d.emits, e)
		}
		r.Emits = d.emits[start:len(d.emits):len(d.emits)]
	}
	return r
}

// FailAll sets err on every result.
func FailAll(results []Result, err error) {
	for i := range results {
		results[i] = Result{Err: err}
	}
}
