package groupstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"time"

	"github.com/groupstate/groupstate/abi"
)

// Handle registers h as the handler of the module, with rows decoded from JSON into R, a
// state value of type S stored as JSON and emitted values of type O encoded as JSON. Call it
// (or [HandleRaw]) once, from an init function of package main.
//
// Rows are decoded lazily, as the iterator advances. A row that fails to decode stops the
// iteration and fails the group with "row N: <error>" (N 0-based), whatever h returns.
func Handle[R, S, O any](h func(key Key, rows iter.Seq[R], state *GroupState[S], out *Emitter[O]) error) {
	defaultModule.HandleRaw(Typed(h))
}

// HandleTyped registers h as m's handler, like [Handle] does for the default module.
func HandleTyped[R, S, O any](m *Module, h func(key Key, rows iter.Seq[R], state *GroupState[S], out *Emitter[O]) error) {
	m.HandleRaw(Typed(h))
}

// Typed adapts a typed handler to a [RawHandler].
//
// Values are decoded and encoded with encoding/json unless their types offer a faster way: a
// row type R or state type S whose pointer implements [json.Unmarshaler] is decoded by
// calling UnmarshalJSON directly (no reflection, no second pass to validate), a state type S
// or output type O implementing [JSONAppender] (with a value or pointer receiver) is encoded
// by calling AppendJSON, and rows of an empty struct type are not decoded at all. Package
// github.com/groupstate/groupstate/sdk/go/jsonobj helps write such methods. With all of them
// in place a call allocates nothing per row or per group.
func Typed[R, S, O any](h func(key Key, rows iter.Seq[R], state *GroupState[S], out *Emitter[O]) error) RawHandler {
	skipRows := isEmptyStruct[R]()
	return func(g *RawGroup) error {
		// The handles live with the Module's RawGroup and are reused from call to call, so a
		// call allocates none; a Module runs one call at a time, so they are never shared.
		t, ok := g.typed.(*typedCall[R, S, O])
		if !ok {
			t = newTypedCall[R, S, O](skipRows)
			g.typed = t
		}
		t.g = g
		t.state.begin(g)
		t.out.sink, t.out.jenc, t.out.w = g, g.enc, g.w
		return h(g.key, t.rows, &t.state, &t.out)
	}
}

// typedCall holds the handles of one typed call, reused for the next.
type typedCall[R, S, O any] struct {
	g     *RawGroup
	row   R
	rows  iter.Seq[R]
	state GroupState[S]
	out   Emitter[O]
}

func newTypedCall[R, S, O any](skipRows bool) *typedCall[R, S, O] {
	t := &typedCall[R, S, O]{}
	// The fast paths are bound once to the fields they decode into or encode from, so a call
	// makes no type assertion.
	rowDec, _ := any(&t.row).(json.Unmarshaler)
	t.state.dec, _ = any(&t.state.cached).(json.Unmarshaler)
	t.state.enc, _ = any(&t.state.scratch).(JSONAppender)
	t.out.enc, _ = any(&t.out.scratch).(JSONAppender)
	t.rows = func(yield func(R) bool) {
		g := t.g
		c := g.group.Cursor()
		for i := 0; ; i++ {
			row, ok := c.Next()
			if !ok {
				return
			}
			var zero R
			t.row = zero
			if !skipRows {
				var err error
				if rowDec != nil {
					err = rowDec.UnmarshalJSON(row)
				} else {
					err = json.Unmarshal(row, &t.row)
				}
				if err != nil {
					g.fail(fmt.Errorf("row %d: %w", i, err))
					return
				}
			}
			if !yield(t.row) {
				return
			}
		}
	}
	return t
}

// JSONAppender is implemented by state and output types that encode themselves as JSON,
// which the typed layer then uses instead of encoding/json's reflection (see [Typed]).
// AppendJSON appends exactly one JSON value to dst and returns the extended slice. The SDK
// does not check what it appends: the host rejects an emitted row that is not valid JSON
// (failing the group), and a state that does not decode fails the key's next call.
type JSONAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// encodeValue returns the JSON of v, valid until e's next use: through fast, which is bound
// to *scratch, when it is set (v is copied there for the call), else with encoding/json.
func encodeValue[T any](e *jsonEncoder, fast JSONAppender, scratch *T, v T) ([]byte, error) {
	if fast == nil {
		return e.encode(v)
	}
	*scratch = v
	b, err := fast.AppendJSON(e.fast[:0])
	e.fast = b
	var zero T
	*scratch = zero
	return b, err
}

// isEmptyStruct reports whether T is a struct type without fields, whose rows need no
// decoding (the host has already checked that every row is a JSON object).
func isEmptyStruct[T any]() bool {
	t := reflect.TypeFor[T]()
	return t.Kind() == reflect.Struct && t.NumField() == 0
}

// GroupState is the state handle of the typed layer: the key's state as a value of type S,
// stored as JSON, with Spark's GroupState semantics (docs/semantics.md, "The state handle").
// It is valid only during the call that received it. See [RawState] for the rules of
// timeouts and of Update and Remove.
type GroupState[S any] struct {
	raw     *RawState
	g       *RawGroup
	cached  S
	cacheOK bool
	// decodeErr is the error of the last decode(false) that failed, until Get returns it.
	decodeErr error
	scratch   S                // the value being encoded by Update
	dec       json.Unmarshaler // bound to &cached, when *S has UnmarshalJSON
	enc       JSONAppender     // bound to &scratch, when S has AppendJSON
}

// begin prepares s for a call of g.
func (s *GroupState[S]) begin(g *RawGroup) {
	var zero S
	s.raw, s.g = &g.state, g
	s.cached, s.cacheOK = zero, false
}

// Exists reports whether the key has a state value.
func (s *GroupState[S]) Exists() bool { return s.raw.exists }

// Get returns the state value, or [ErrNoState] when there is none, or the error decoding the
// stored JSON into S.
func (s *GroupState[S]) Get() (S, error) {
	if !s.raw.exists {
		var zero S
		return zero, ErrNoState
	}
	if !s.cacheOK {
		if !s.decode(false) {
			var zero S
			v, err := s.cached, s.decodeErr
			s.cached, s.decodeErr = zero, nil
			return v, err
		}
	}
	return s.cached, nil
}

// GetOption returns the state value and true, or the zero S and false when there is none. A
// stored value that does not decode into S fails the group and reads as absent.
func (s *GroupState[S]) GetOption() (S, bool) {
	// Small enough to be inlined into the handler, so decoding is one call: s.cached is the
	// zero S whenever !s.cacheOK (begin, Remove and a failed decode(true) reset it).
	ok := s.cacheOK || (s.raw.exists && s.decode(true))
	return s.cached, ok
}

// decode decodes the stored value into s.cached and reports whether it could. On error
// s.cached holds what the decoding left in it and s.decodeErr the error, unless failGroup,
// which resets s.cached and fails the group with the error instead.
func (s *GroupState[S]) decode(failGroup bool) bool {
	var zero S
	s.cached = zero
	var err error
	if s.dec != nil {
		err = s.dec.UnmarshalJSON(s.raw.value)
	} else {
		err = json.Unmarshal(s.raw.value, &s.cached)
	}
	if err != nil {
		err = fmt.Errorf("groupstate: decoding state: %w", err)
		if failGroup {
			s.cached = zero
			s.g.fail(err)
		} else {
			s.decodeErr = err
		}
		return false
	}
	s.cacheOK = true
	return true
}

// Update sets the state value to v, encoded as JSON. A value that encodes to null (a nil
// pointer, map or slice) is [ErrNullState]; an encoding error is returned as is. On error the
// state is unchanged.
func (s *GroupState[S]) Update(v S) error {
	var b []byte
	var err error
	if s.enc != nil { // encodeValue's fast path, in place: one call less per Update
		s.scratch = v
		b, err = s.enc.AppendJSON(s.g.enc.fast[:0])
		s.g.enc.fast = b
		var zero S
		s.scratch = zero
	} else {
		b, err = s.g.enc.encode(v)
	}
	if err != nil {
		return fmt.Errorf("groupstate: encoding state: %w", err)
	}
	if string(b) == "null" {
		return ErrNullState
	}
	s.raw.owned = append(s.raw.owned[:0], b...)
	s.raw.setOwned()
	s.cached, s.cacheOK = v, true
	return nil
}

// Remove removes the state value; see [RawState.Remove].
func (s *GroupState[S]) Remove() {
	s.raw.Remove()
	var zero S
	s.cached, s.cacheOK = zero, false
}

// HasTimedOut reports whether this is a timeout call; see [RawState.HasTimedOut].
func (s *GroupState[S]) HasTimedOut() bool { return s.raw.timedOut }

// RowCount returns the number of rows of the call (0 for a timeout call) without iterating
// over them. A handler that only counts its rows should call it rather than range over the
// rows: a range loop over an iterator the compiler cannot see costs two or three allocations
// per call (the loop body moves to the heap), which under WebAssembly is most of what a small
// handler costs.
func (s *GroupState[S]) RowCount() int { return s.g.count }

// SetTimeoutDuration sets a processing-time timeout; see [RawState.SetTimeoutDuration].
func (s *GroupState[S]) SetTimeoutDuration(d time.Duration) error {
	return s.raw.SetTimeoutDuration(d)
}

// SetTimeoutTimestamp sets an event-time timeout; see [RawState.SetTimeoutTimestamp].
func (s *GroupState[S]) SetTimeoutTimestamp(ms int64) error { return s.raw.SetTimeoutTimestamp(ms) }

// CurrentWatermarkMs returns the batch's watermark; see [RawState.CurrentWatermarkMs].
func (s *GroupState[S]) CurrentWatermarkMs() (int64, error) { return s.raw.CurrentWatermarkMs() }

// CurrentProcessingTimeMs returns the batch's processing time; see
// [RawState.CurrentProcessingTimeMs].
func (s *GroupState[S]) CurrentProcessingTimeMs() int64 { return s.raw.procTimeMs }

// Emitter emits values of type O, encoded as JSON, as the group's output rows. It is valid
// only during the call that received it.
type Emitter[O any] struct {
	sink    emitSink          // the call's output: a *RawGroup (ABI v1) or a *v2Module (ABI v2)
	w       *abi.ResultWriter // ABI v1: the sink's result writer, written directly; nil for v2
	jenc    *jsonEncoder      // the module's encoder
	scratch O                 // the value being encoded by Emit
	enc     JSONAppender      // bound to &scratch, when O has AppendJSON
}

// Emit encodes v as JSON (without HTML escaping) and emits it as one output row. A value that
// fails to encode fails the group.
func (e *Emitter[O]) Emit(v O) {
	var b []byte
	var err error
	if e.enc != nil { // encodeValue's fast path, in place: one call less per Emit
		e.scratch = v
		b, err = e.enc.AppendJSON(e.jenc.fast[:0])
		e.jenc.fast = b
		var zero O
		e.scratch = zero
	} else {
		b, err = e.jenc.encode(v)
	}
	if err != nil {
		e.sink.fail(fmt.Errorf("emit: %w", err))
		return
	}
	if e.w != nil {
		e.w.Emit(b) // what RawGroup.Emit does, without the interface call
		return
	}
	e.sink.Emit(b)
}

// emitSink is where an [Emitter] writes: the call in progress.
type emitSink interface {
	Emit(row []byte)
	fail(err error)
}

// jsonEncoder encodes values to JSON into a reused buffer.
type jsonEncoder struct {
	buf  bytes.Buffer
	enc  *json.Encoder
	fast []byte // AppendJSON's buffer
}

// encode returns the JSON of v, valid until the next encode.
func (e *jsonEncoder) encode(v any) ([]byte, error) {
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.buf)
		e.enc.SetEscapeHTML(false)
	}
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(e.buf.Bytes(), []byte{'\n'}), nil
}
