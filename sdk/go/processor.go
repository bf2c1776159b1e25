package groupstate

import (
	"encoding/json"
	"fmt"
	"iter"
)

// StatefulProcessor is a transformWithState handler (ABI v2), after Spark 4's
// StatefulProcessor and Flink's KeyedProcessFunction: each key holds the named state
// variables the processor declares in Init (values, lists and maps, with an optional TTL) and
// any number of timers. Register it with [Process].
//
// Rows are decoded from JSON into R and emitted values of type O are encoded as JSON, with the
// conventions of [Typed] (encoding/json unless R implements json.Unmarshaler or O
// [JSONAppender]); use [json.RawMessage] for either to get the JSON text. A row type that
// embeds [InputName] learns which input each row came from (a deployment with several
// inputs).
//
// A module runs one call at a time, on one goroutine: the processor, its state handles and
// the arguments of a call need no locking, and the handles and arguments are valid only
// during a call. Like every handler, a processor must be deterministic and keep nothing that
// matters outside its state (abi/README.md section 6).
type StatefulProcessor[R, O any] interface {
	// Init runs once per module instance, before any other call, and declares the state
	// variables with [NewValueState], [NewListState] and [NewMapState]; the processor keeps
	// the handles they return (in its fields) for the calls. h also gives the deployment's
	// config. An error (or a panic) fails the instance's init: the host refuses to start the
	// deployment.
	Init(h *ProcessorHandle) error

	// HandleInputRows is called once per key and micro-batch with that key's rows, in
	// arrival order (at least one). Rows are decoded lazily, as the iterator advances; a row
	// that does not decode stops the iteration and fails the call with "row N: <error>". The
	// state handles operate on key.
	HandleInputRows(key Key, rows iter.Seq[R], timers *Timers, out *Emitter[O]) error

	// HandleExpiredTimer is called for each expired timer of a key, in timestamp order,
	// after every data call of the batch; timerMs is the timer's timestamp. A timer fires
	// once: it is deleted when it fires, and one that an earlier call deleted does not fire.
	HandleExpiredTimer(key Key, timerMs int64, timers *Timers, out *Emitter[O]) error
}

// InitialStateHandler is implemented by a [StatefulProcessor] that handles a deployment's
// initial state itself (groupstate deploy --initial-state): HandleInitialState is called once
// per key of the file, in the deployment's first batch before its data calls, with the key's
// state, a JSON object of variable names. Without it the SDK sets each declared variable named
// in the object: a value variable to its JSON value, a list to the elements of its JSON array,
// a map to the entries of its JSON object (other variables are left alone; a name that is not
// declared, a null element or map value, or a value that does not decode into the variable's
// type fails the call).
type InitialStateHandler[O any] interface {
	HandleInitialState(key Key, initial []byte, timers *Timers, out *Emitter[O]) error
}

// Process registers p as the module's processor, making it an ABI v2 module (a draft ABI,
// see docs/handlers/go.md). Call it once, from an init function of
// package main, instead of [Handle] or [HandleRaw]: registering a processor and a handler, or
// two processors, panics.
func Process[R, O any](p StatefulProcessor[R, O]) { RegisterProcessor(defaultModule, p) }

// RegisterProcessor registers p as m's processor, like [Process] does for the module's
// default Module. It panics when m already has a handler or a processor.
func RegisterProcessor[R, O any](m *Module, p StatefulProcessor[R, O]) {
	switch {
	case p == nil:
		panic("groupstate: Process: nil processor")
	case m.handler != nil:
		panic(errBothKinds)
	case m.v2 != nil:
		panic("groupstate: a module has one processor: groupstate.Process (or RegisterProcessor) was called twice")
	}
	e := newV2Module(m)
	e.run = newRunner(e, p)
	m.v2 = e
}

// runner calls a typed processor.
type runner[R, O any] struct {
	e      *v2Module
	p      StatefulProcessor[R, O]
	ih     InitialStateHandler[O] // nil: the default
	row    R
	rowDec json.Unmarshaler // bound to &row, when *R has UnmarshalJSON
	// setIn sets the input name of row when R embeds InputName (bound to &row); ptrIn is set
	// when R is a pointer to a struct that embeds it (set through row itself).
	setIn inputSetter
	ptrIn bool
	rows  iter.Seq[R]
	out   Emitter[O]
}

func newRunner[R, O any](e *v2Module, p StatefulProcessor[R, O]) *runner[R, O] {
	r := &runner[R, O]{e: e, p: p}
	r.ih, _ = p.(InitialStateHandler[O])
	r.rowDec, _ = any(&r.row).(json.Unmarshaler)
	r.setIn, _ = any(&r.row).(inputSetter)
	_, r.ptrIn = any(r.row).(inputSetter)
	r.out.sink, r.out.jenc = e, &e.enc
	r.out.enc, _ = any(&r.out.scratch).(JSONAppender)
	skipRows := isEmptyStruct[R]()
	r.rows = func(yield func(R) bool) {
		c := r.e.group.Cursor()
		for i := 0; ; i++ {
			row, ok := c.Next()
			if !ok {
				return
			}
			var zero R
			r.row = zero
			if !skipRows {
				var err error
				if r.rowDec != nil {
					err = r.rowDec.UnmarshalJSON(row)
				} else {
					err = json.Unmarshal(row, &r.row)
				}
				if err != nil {
					r.e.fail(fmt.Errorf("row %d: %w", i, err))
					return
				}
			}
			if r.setIn != nil {
				r.setIn.setInput(r.e.inputName(c.Input()))
			} else if r.ptrIn && any(r.row) != any(zero) { // not a null row's nil pointer
				any(r.row).(inputSetter).setInput(r.e.inputName(c.Input()))
			}
			if !yield(r.row) {
				return
			}
		}
	}
	rowSeqs.Store(funcPointer(r.rows), e)
	return r
}

func (r *runner[R, O]) init(h *ProcessorHandle) error { return r.p.Init(h) }

func (r *runner[R, O]) data(key Key) error {
	return r.p.HandleInputRows(key, r.rows, &r.e.timers, &r.out)
}

func (r *runner[R, O]) timer(key Key, ts int64) error {
	return r.p.HandleExpiredTimer(key, ts, &r.e.timers, &r.out)
}

func (r *runner[R, O]) initial(key Key, initial []byte) error {
	if r.ih != nil {
		return r.ih.HandleInitialState(key, initial, &r.e.timers, &r.out)
	}
	return r.e.applyInitialState(initial)
}
