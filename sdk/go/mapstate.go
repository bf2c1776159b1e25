package groupstate

import (
	"iter"
	"unsafe"

	"github.com/groupstate/groupstate/abi"
)

// MapState is a map state variable (Spark's MapState): values of type V under string keys,
// per key of the stream, each value stored as JSON and each map key as its UTF-8 bytes.
// Declare it in [StatefulProcessor.Init] with [NewMapState]; it operates on the key of the
// call in progress and may be used only during calls of the processor, on the module's
// goroutine.
//
// Writes cost the same whatever the map's size: Update sends one entry to the host, never the
// map. [MapState.All], [MapState.Keys] and [MapState.Values] read the map lazily, a page at a
// time, in bytewise order of the map keys.
type MapState[V any] struct {
	v stateVar
	c codec[V]
}

// NewMapState declares a map state variable named name (see [NewValueState] for the rules of
// names) with the given options ([WithTTL]: each entry expires on its own). Call it only from
// Init; an invalid declaration fails the init.
func NewMapState[V any](h *ProcessorHandle, name string, opts ...VarOption) *MapState[V] {
	s := &MapState[V]{}
	s.c.bind(&h.e.enc)
	s.v = h.declare("NewMapState", name, abi.VarMap, opts, s.c.check)
	return s
}

// keyBytes returns the bytes of k without copying them; the op writer copies them.
func keyBytes(k string) []byte { return unsafe.Slice(unsafe.StringData(k), len(k)) }

// Exists reports whether the map has a (live) entry.
func (s *MapState[V]) Exists() bool {
	e := s.v.e
	e.begin("MapState.Exists")
	mark := e.ops.Len()
	e.ops.MapExists(s.v.idx)
	return e.read(mark, abi.OpMapExists).Present
}

// Get returns the value under k, or [ErrNoState] when there is none, or the error decoding
// the stored JSON into V.
func (s *MapState[V]) Get(k string) (V, error) {
	e := s.v.e
	e.begin("MapState.Get")
	mark := e.ops.Len()
	e.ops.MapGet(s.v.idx, keyBytes(k))
	a := e.read(mark, abi.OpMapGet)
	if !a.Present {
		var zero V
		return zero, ErrNoState
	}
	v, err := s.c.decode(a.Value)
	if err != nil {
		return v, s.v.decodeError(err)
	}
	return v, nil
}

// GetOption returns the value under k and true, or the zero V and false when there is none. A
// stored value that does not decode into V fails the call and reads as absent.
func (s *MapState[V]) GetOption(k string) (V, bool) {
	v, err := s.Get(k)
	if err != nil {
		if err != ErrNoState {
			s.v.e.fail(err)
		}
		var zero V
		return zero, false
	}
	return v, true
}

// Contains reports whether the map has a (live) entry under k.
func (s *MapState[V]) Contains(k string) bool {
	e := s.v.e
	e.begin("MapState.Contains")
	mark := e.ops.Len()
	e.ops.MapContains(s.v.idx, keyBytes(k))
	return e.read(mark, abi.OpMapContains).Present
}

// Update sets the value under k to v, encoded as JSON. A value that encodes to null is
// [ErrNullState]; on error the map is unchanged.
func (s *MapState[V]) Update(k string, v V) error {
	e := s.v.e
	e.begin("MapState.Update")
	b, err := s.c.encode(v)
	if err != nil {
		return s.v.encodeError(err)
	}
	e.ops.MapSet(s.v.idx, keyBytes(k), b)
	return nil
}

// Remove removes the entry under k, if any.
func (s *MapState[V]) Remove(k string) {
	e := s.v.e
	e.begin("MapState.Remove")
	e.ops.MapRemove(s.v.idx, keyBytes(k))
}

// Clear removes every entry.
func (s *MapState[V]) Clear() {
	e := s.v.e
	e.begin("MapState.Clear")
	e.ops.MapClear(s.v.idx)
}

// All iterates over the map's entries in bytewise order of their keys, reading them from the
// host a page at a time as the iteration advances. A value that does not decode into V stops
// the iteration and fails the call. As for [ListState.All], avoid changing the map while
// iterating over it.
func (s *MapState[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		s.entries("MapState.All", func(k, b []byte) bool {
			v, err := s.c.decode(b)
			if err != nil {
				s.v.e.fail(s.v.decodeError(err))
				return false
			}
			return yield(string(k), v)
		})
	}
}

// Keys iterates over the map's keys in bytewise order, like [MapState.All] without decoding
// the values.
func (s *MapState[V]) Keys() iter.Seq[string] {
	return func(yield func(string) bool) {
		s.entries("MapState.Keys", func(k, _ []byte) bool { return yield(string(k)) })
	}
}

// Values iterates over the map's values in the bytewise order of their keys, like
// [MapState.All].
func (s *MapState[V]) Values() iter.Seq[V] {
	return func(yield func(V) bool) {
		s.entries("MapState.Values", func(_, b []byte) bool {
			v, err := s.c.decode(b)
			if err != nil {
				s.v.e.fail(s.v.decodeError(err))
				return false
			}
			return yield(v)
		})
	}
}

// entries pages through the map with MAP_READ, calling f for each entry until it returns
// false.
func (s *MapState[V]) entries(what string, f func(k, v []byte) bool) {
	e := s.v.e
	e.begin(what)
	var page []byte
	var a abi.Answer
	var cursor []byte // empty: the start; then a slice of page, copied by MapRead
	for {
		mark := e.ops.Len()
		e.ops.MapRead(s.v.idx, cursor, e.pageBytes)
		page = e.readPage(mark, abi.OpMapRead, page, &a)
		c := a.EntryCursor()
		for k, v, ok := c.Next(); ok; k, v, ok = c.Next() {
			if !f(k, v) {
				return
			}
		}
		if !a.More {
			return
		}
		cursor = a.MapNext
	}
}
