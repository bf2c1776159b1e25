package groupstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"time"
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
func Typed[R, S, O any](h func(key Key, rows iter.Seq[R], state *GroupState[S], out *Emitter[O]) error) RawHandler {
	return func(g *RawGroup) error {
		st := GroupState[S]{raw: &g.state, g: g}
		out := Emitter[O]{g: g}
		return h(g.key, typedRows[R](g), &st, &out)
	}
}

// typedRows decodes the rows of g into R as they are iterated.
func typedRows[R any](g *RawGroup) iter.Seq[R] {
	return func(yield func(R) bool) {
		i := 0
		for row := range g.rows {
			var r R
			if err := json.Unmarshal(row, &r); err != nil {
				g.fail(fmt.Errorf("row %d: %w", i, err))
				return
			}
			if !yield(r) {
				return
			}
			i++
		}
	}
}

// GroupState is the state handle of the typed layer: the key's state as a value of type S,
// stored as JSON, with Spark's GroupState semantics (DESIGN.md section 3 rule 5). It is valid
// only during the call that received it. See [RawState] for the rules of timeouts and of
// Update and Remove.
type GroupState[S any] struct {
	raw     *RawState
	g       *RawGroup
	cached  S
	cacheOK bool
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
		var v S
		if err := json.Unmarshal(s.raw.value, &v); err != nil {
			return v, fmt.Errorf("groupstate: decoding state: %w", err)
		}
		s.cached, s.cacheOK = v, true
	}
	return s.cached, nil
}

// GetOption returns the state value and true, or the zero S and false when there is none. A
// stored value that does not decode into S fails the group and reads as absent.
func (s *GroupState[S]) GetOption() (S, bool) {
	v, err := s.Get()
	if err != nil {
		if err != ErrNoState {
			s.g.fail(err)
		}
		var zero S
		return zero, false
	}
	return v, true
}

// Update sets the state value to v, encoded as JSON. A value that encodes to null (a nil
// pointer, map or slice) is [ErrNullState]; an encoding error is returned as is. On error the
// state is unchanged.
func (s *GroupState[S]) Update(v S) error {
	b, err := s.g.enc.encode(v)
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
	g *RawGroup
}

// Emit encodes v as JSON (without HTML escaping) and emits it as one output row. A value that
// fails to encode fails the group.
func (e *Emitter[O]) Emit(v O) {
	b, err := e.g.enc.encode(v)
	if err != nil {
		e.g.fail(fmt.Errorf("emit: %w", err))
		return
	}
	e.g.w.Emit(b)
}

// jsonEncoder encodes values to JSON into a reused buffer.
type jsonEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
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
