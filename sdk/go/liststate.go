package groupstate

import (
	"fmt"
	"iter"
	"math"

	"github.com/groupstate/groupstate/abi"
)

// ListState is a list state variable (Spark's ListState): an ordered list of values of type T
// per key, each stored as JSON. Declare it in [StatefulProcessor.Init] with [NewListState]; it
// operates on the key of the call in progress and may be used only during calls of the
// processor, on the module's goroutine.
//
// Writes cost the same whatever the list's length: Append sends one element to the host,
// never the list, and DropFirst one op. [ListState.All] reads the list lazily, a page at a time.
type ListState[T any] struct {
	v stateVar
	c codec[T]

	flat  []byte   // the encoded elements of a Put or AppendAll
	ends  []int    // where each element ends in flat
	elems [][]byte // the elements, slices of flat
}

// NewListState declares a list state variable named name (see [NewValueState] for the rules
// of names) with the given options ([WithTTL]: each element expires on its own). Call it only
// from Init; an invalid declaration fails the init.
func NewListState[T any](h *ProcessorHandle, name string, opts ...VarOption) *ListState[T] {
	s := &ListState[T]{}
	s.c.bind(&h.e.enc)
	s.v = h.declare("NewListState", name, abi.VarList, opts, s.c.check)
	return s
}

// Exists reports whether the list has a (live) element.
func (s *ListState[T]) Exists() bool {
	e := s.v.e
	e.begin("ListState.Exists")
	mark := e.ops.Len()
	e.ops.ListExists(s.v.idx)
	return e.read(mark, abi.OpListExists).Present
}

// All iterates over the list's elements in order, reading them from the host a page at a
// time as the iteration advances: stopping after the first element of a long list fetches
// one page only. An element that does not decode into T stops the iteration and fails the
// call. Writes made during the iteration are sent with the next page's read; where they show
// in the rest of the iteration is up to the host, so avoid changing the list while iterating
// over it.
func (s *ListState[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		e := s.v.e
		e.begin("ListState.All")
		var page []byte
		var a abi.Answer
		cursor := uint64(0)
		for {
			mark := e.ops.Len()
			e.ops.ListRead(s.v.idx, cursor, e.pageBytes)
			page = e.readPage(mark, abi.OpListRead, page, &a)
			c := a.ElementCursor()
			for b, ok := c.Next(); ok; b, ok = c.Next() {
				v, err := s.c.decode(b)
				if err != nil {
					e.fail(s.v.decodeError(err))
					return
				}
				if !yield(v) {
					return
				}
			}
			if a.Next == 0 {
				return
			}
			cursor = a.Next
		}
	}
}

// Put replaces the list with vs (an empty vs clears it). An element that encodes to null is
// [ErrNullState]; on error the list is unchanged.
func (s *ListState[T]) Put(vs []T) error {
	e := s.v.e
	e.begin("ListState.Put")
	if err := s.encodeAll(vs); err != nil {
		return err
	}
	e.ops.ListPut(s.v.idx, s.elems...)
	return nil
}

// Append appends v to the list. A value that encodes to null is [ErrNullState]; on error the
// list is unchanged.
func (s *ListState[T]) Append(v T) error {
	e := s.v.e
	e.begin("ListState.Append")
	b, err := s.c.encode(v)
	if err != nil {
		return s.v.encodeError(err)
	}
	e.ops.ListAppend(s.v.idx, b)
	return nil
}

// AppendAll appends vs to the list, in order (nothing when vs is empty). An element that
// encodes to null is [ErrNullState]; on error the list is unchanged.
func (s *ListState[T]) AppendAll(vs []T) error {
	e := s.v.e
	e.begin("ListState.AppendAll")
	if len(vs) == 0 {
		return nil
	}
	if err := s.encodeAll(vs); err != nil {
		return err
	}
	e.ops.ListAppend(s.v.idx, s.elems...)
	return nil
}

// DropFirst removes the list's first n elements, as [ListState.All] yields them (n = 0 does
// nothing): one op, whatever the list's length, where Put of the rest would send every
// element left. A negative n is an error and changes nothing; the host refuses an n above
// the number of elements, which fails the call.
func (s *ListState[T]) DropFirst(n int) error {
	e := s.v.e
	e.begin("ListState.DropFirst")
	if n < 0 || int64(n) > math.MaxUint32 {
		return fmt.Errorf("groupstate: ListState.DropFirst of state variable %s: %d elements is not a count", s.v.name, n)
	}
	if n > 0 {
		e.ops.ListDropFirst(s.v.idx, uint32(n))
	}
	return nil
}

// Clear removes every element.
func (s *ListState[T]) Clear() {
	e := s.v.e
	e.begin("ListState.Clear")
	e.ops.ListClear(s.v.idx)
}

// encodeAll encodes vs into s.elems.
func (s *ListState[T]) encodeAll(vs []T) error {
	s.flat, s.ends, s.elems = s.flat[:0], s.ends[:0], s.elems[:0]
	for i, v := range vs {
		b, err := s.c.encode(v)
		if err != nil {
			return fmt.Errorf("element %d: %w", i, s.v.encodeError(err))
		}
		s.flat = append(s.flat, b...)
		s.ends = append(s.ends, len(s.flat))
	}
	start := 0
	for _, end := range s.ends {
		s.elems = append(s.elems, s.flat[start:end:end])
		start = end
	}
	return nil
}
