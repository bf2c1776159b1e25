package groupstate

import (
	"github.com/groupstate/groupstate/abi"
)

// ValueState is a value state variable (Spark's ValueState): one value of type T per key,
// stored as JSON, or none. Declare it in [StatefulProcessor.Init] with [NewValueState]; it
// operates on the key of the call in progress and may be used only during calls of the
// processor, on the module's goroutine.
//
// Reads go to the host (one state call, which also carries the call's earlier writes); the
// value read or written last is remembered until the end of the call, so Exists followed by
// Get costs one state call.
type ValueState[T any] struct {
	v stateVar
	c codec[T]

	cacheGen uint64 // the v2Module.gen the cache belongs to
	present  bool
	cached   []byte
}

// NewValueState declares a value state variable named name (1-64 characters of [a-z0-9_],
// starting with a letter, unique among the processor's variables) with the given options
// ([WithTTL]). Call it only from Init; an invalid declaration fails the init.
func NewValueState[T any](h *ProcessorHandle, name string, opts ...VarOption) *ValueState[T] {
	s := &ValueState[T]{}
	s.c.bind(&h.e.enc)
	s.v = h.declare("NewValueState", name, abi.VarValue, opts, s.c.check)
	return s
}

// raw returns the stored JSON, from the cache or the host.
func (s *ValueState[T]) raw(what string) ([]byte, bool) {
	e := s.v.e
	e.begin(what)
	if s.cacheGen != e.gen {
		mark := e.ops.Len()
		e.ops.ValueGet(s.v.idx)
		a := e.read(mark, abi.OpValueGet)
		s.cached = append(s.cached[:0], a.Value...)
		s.present, s.cacheGen = a.Present, e.gen
	}
	return s.cached, s.present
}

// Exists reports whether the key has a (live) value.
func (s *ValueState[T]) Exists() bool {
	_, ok := s.raw("ValueState.Exists")
	return ok
}

// Get returns the value, or [ErrNoState] when there is none, or the error decoding the stored
// JSON into T.
func (s *ValueState[T]) Get() (T, error) {
	b, ok := s.raw("ValueState.Get")
	if !ok {
		var zero T
		return zero, ErrNoState
	}
	v, err := s.c.decode(b)
	if err != nil {
		return v, s.v.decodeError(err)
	}
	return v, nil
}

// GetOption returns the value and true, or the zero T and false when there is none. A stored
// value that does not decode into T fails the call and reads as absent.
func (s *ValueState[T]) GetOption() (T, bool) {
	v, err := s.Get()
	if err != nil {
		if err != ErrNoState {
			s.v.e.fail(err)
		}
		var zero T
		return zero, false
	}
	return v, true
}

// Update sets the value to v, encoded as JSON. A value that encodes to null is
// [ErrNullState]; an encoding error is returned as is. On error the value is unchanged.
func (s *ValueState[T]) Update(v T) error {
	e := s.v.e
	e.begin("ValueState.Update")
	b, err := s.c.encode(v)
	if err != nil {
		return s.v.encodeError(err)
	}
	e.ops.ValueSet(s.v.idx, b)
	s.cached = append(s.cached[:0], b...)
	s.present, s.cacheGen = true, e.gen
	return nil
}

// Clear removes the value.
func (s *ValueState[T]) Clear() {
	e := s.v.e
	e.begin("ValueState.Clear")
	e.ops.ValueClear(s.v.idx)
	s.cached = s.cached[:0]
	s.present, s.cacheGen = false, e.gen
}
