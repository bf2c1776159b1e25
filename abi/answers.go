package abi

import (
	"bytes"
	"errors"
	"iter"
	"strconv"
)

// The answers of the read ops (abi/README.md section 9.4). The host answers the read ops of a
// request in order, back to back, with no op code or length in front of an answer: the guest
// knows which reads it sent and decodes the answers with [AnswerReader].

// MapEntry is one entry of a MAP_READ answer, for [AppendMapReadAnswer].
type MapEntry struct {
	Key, Value []byte
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendValueAnswer appends the answer of VALUE_GET or MAP_GET to b: present u8, then, when
// present, the value (u32 length + bytes).
func AppendValueAnswer(b []byte, present bool, value []byte) []byte {
	b = appendBool(b, present)
	if present {
		b = appendBytes(b, value)
	}
	return b
}

// AppendBoolAnswer appends the answer of LIST_EXISTS, MAP_CONTAINS or MAP_EXISTS to b: one u8,
// 1 for true and 0 for false.
func AppendBoolAnswer(b []byte, v bool) []byte { return appendBool(b, v) }

// AppendListReadAnswer appends the answer of LIST_READ to b: count u32, the elements (u32
// length + bytes each), next u64 (the cursor of the following page, 0 at the end). An answer
// without elements must have next 0.
func AppendListReadAnswer(b []byte, elems [][]byte, next uint64) []byte {
	b = appendU32(b, uint32(len(elems)))
	for _, e := range elems {
		b = appendBytes(b, e)
	}
	return le.AppendUint64(b, next)
}

// AppendMapReadAnswer appends the answer of MAP_READ to b: count u32, the entries (key, then
// value, each u32 length + bytes) in strictly ascending bytewise key order, more u8, next (u32
// length + bytes: the cursor of the following page, empty when more is false). An answer
// without entries must have more false.
func AppendMapReadAnswer(b []byte, entries []MapEntry, more bool, next []byte) []byte {
	b = appendU32(b, uint32(len(entries)))
	for _, e := range entries {
		b = appendBytes(b, e.Key)
		b = appendBytes(b, e.Value)
	}
	b = appendBool(b, more)
	return appendBytes(b, next)
}

// AppendTimerListAnswer appends the answer of TIMER_LIST to b: count u32, then each timer
// (i64), which must be strictly ascending.
func AppendTimerListAnswer(b []byte, timers []int64) []byte {
	b = appendU32(b, uint32(len(timers)))
	for _, ts := range timers {
		b = appendI64(b, ts)
	}
	return b
}

// Answer is the answer of one read op, decoded by [AnswerReader.Next]. Only the fields of its
// op are set; the others are zero. Its slices alias the answers buffer: they are valid as long
// as it is, and are not copied. An Answer is meant to be reused from answer to answer.
type Answer struct {
	// Op is the read op this answers.
	Op Op
	// Present is the u8 of the answer: for VALUE_GET and MAP_GET whether there is a value,
	// for MAP_CONTAINS whether the key is in the map, for LIST_EXISTS and MAP_EXISTS whether
	// the variable exists (has elements or entries).
	Present bool
	// Value is the value of VALUE_GET and MAP_GET when Present.
	Value []byte
	// Count is the number of elements of LIST_READ, entries of MAP_READ and timers of
	// TIMER_LIST.
	Count uint32
	// Next is LIST_READ's cursor of the following page; 0 at the end.
	Next uint64
	// More is MAP_READ's "more entries follow"; MapNext is then the cursor of the following
	// page (else empty).
	More bool
	// MapNext is MAP_READ's cursor of the following page, when More.
	MapNext []byte
	body    []byte // the elements, entries or timers
}

// Elements iterates over the elements of a LIST_READ answer (none for other ops). Each yielded
// slice aliases the answers buffer.
func (a *Answer) Elements() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		c := a.ElementCursor()
		for e, ok := c.Next(); ok; e, ok = c.Next() {
			if !yield(e) {
				return
			}
		}
	}
}

// ElementCursor returns a cursor over the elements of a LIST_READ answer (an empty one for
// other ops); a loop over it allocates nothing.
func (a *Answer) ElementCursor() RowCursor {
	if a.Op != OpListRead {
		return RowCursor{}
	}
	return RowCursor{r: reader{b: a.body}, left: a.Count}
}

// Entries iterates over the entries (key, value) of a MAP_READ answer, in ascending key order
// (none for other ops). Each yielded slice aliases the answers buffer.
func (a *Answer) Entries() iter.Seq2[[]byte, []byte] {
	return func(yield func([]byte, []byte) bool) {
		c := a.EntryCursor()
		for k, v, ok := c.Next(); ok; k, v, ok = c.Next() {
			if !yield(k, v) {
				return
			}
		}
	}
}

// EntryCursor returns a cursor over the entries of a MAP_READ answer (an empty one for other
// ops); a loop over it allocates nothing.
func (a *Answer) EntryCursor() EntryCursor {
	if a.Op != OpMapRead {
		return EntryCursor{}
	}
	return EntryCursor{r: reader{b: a.body}, left: a.Count}
}

// Timer returns the i-th timer (0-based) of a TIMER_LIST answer. It panics unless
// 0 <= i < Count and the answer is a TIMER_LIST answer.
func (a *Answer) Timer(i int) int64 {
	if a.Op != OpTimerList {
		panic("abi: Timer of a " + a.Op.String() + " answer")
	}
	return int64(le.Uint64(a.body[8*i:]))
}

// Timers iterates over the timers of a TIMER_LIST answer in ascending order (none for other
// ops).
func (a *Answer) Timers() iter.Seq[int64] {
	return func(yield func(int64) bool) {
		if a.Op != OpTimerList {
			return
		}
		for i := 0; i+8 <= len(a.body); i += 8 {
			if !yield(int64(le.Uint64(a.body[i:]))) {
				return
			}
		}
	}
}

// EntryCursor reads the entries of a MAP_READ answer one by one. The zero EntryCursor has no
// entries.
type EntryCursor struct {
	r    reader
	left uint32
}

// Next returns the next entry's key and value (aliasing the answers buffer) and true, or
// nil, nil, false after the last one.
func (c *EntryCursor) Next() (key, value []byte, ok bool) {
	if c.left == 0 {
		return nil, nil, false
	}
	c.left--
	return c.r.bytes(), c.r.bytes(), true
}

// errNotRead is returned by AnswerReader.Next for an op without an answer: the caller's bug,
// not the buffer's.
var errNotRead = errors.New("abi: the op has no answer (not a read op)")

// AnswerReader decodes the answers the host returned from [ImportState], one read op at a
// time, checking every length and count against the end of the buffer and every answer's
// consistency (u8 fields 0 or 1; a LIST_READ page without elements has next 0 and a MAP_READ
// page without entries has more 0, so a paging loop always ends; a MAP_READ page without more
// has an empty next; map keys and timers strictly ascending). It never panics and copies
// nothing. An AnswerReader is not safe for concurrent use; reuse one with
// [AnswerReader.Reset].
type AnswerReader struct {
	r     reader
	index int
}

// NewAnswerReader returns a reader at the first answer of b.
func NewAnswerReader(b []byte) *AnswerReader {
	ar := &AnswerReader{}
	ar.Reset(b)
	return ar
}

// Reset makes ar read b from its first answer.
func (ar *AnswerReader) Reset(b []byte) {
	ar.r = reader{b: b}
	ar.index = 0
}

func (ar *AnswerReader) fail(op Op, what string) error {
	ar.r.err = malformedErr("answer " + strconv.Itoa(ar.index) + " (" + op.String() + "): " + what)
	return ar.r.err
}

func (ar *AnswerReader) flag(op Op, field string) bool {
	r := &ar.r
	if !r.need(1) {
		return false
	}
	v := r.b[r.off]
	r.off++
	if v > 1 {
		ar.fail(op, field+" is "+strconv.Itoa(int(v))+", not 0 or 1")
	}
	return v == 1
}

// Next decodes the answer of the read op op into a. It returns an error wrapping
// [ErrMalformed] when the answer is truncated or inconsistent (after which every call returns
// it again), and another error when op is not a read op.
func (ar *AnswerReader) Next(op Op, a *Answer) error {
	r := &ar.r
	if r.err != nil {
		return r.err
	}
	if !op.IsRead() {
		return errNotRead
	}
	*a = Answer{Op: op}
	switch op {
	case OpValueGet, OpMapGet:
		if a.Present = ar.flag(op, "present"); a.Present {
			a.Value = r.bytes()
		}
	case OpMapContains, OpListExists, OpMapExists:
		a.Present = ar.flag(op, "answer")
	case OpListRead:
		a.Count = r.u32()
		if r.err == nil && int64(a.Count) > int64(len(r.b)-r.off)/4 {
			return ar.fail(op, strconv.FormatUint(uint64(a.Count), 10)+" elements cannot fit in the answers")
		}
		start := r.off
		for i := uint32(0); i < a.Count && r.err == nil; i++ {
			r.bytes()
		}
		if r.err == nil {
			a.body = r.b[start:r.off:r.off]
		}
		a.Next = uint64(r.i64())
		if r.err == nil && a.Count == 0 && a.Next != 0 {
			return ar.fail(op, "no elements but next is not 0")
		}
	case OpMapRead:
		a.Count = r.u32()
		if r.err == nil && int64(a.Count) > int64(len(r.b)-r.off)/8 {
			return ar.fail(op, strconv.FormatUint(uint64(a.Count), 10)+" entries cannot fit in the answers")
		}
		start := r.off
		var prev []byte
		for i := uint32(0); i < a.Count && r.err == nil; i++ {
			k := r.bytes()
			r.bytes()
			if i > 0 && r.err == nil && bytes.Compare(prev, k) >= 0 {
				return ar.fail(op, "keys not in strictly ascending order at entry "+strconv.FormatUint(uint64(i), 10))
			}
			prev = k
		}
		if r.err == nil {
			a.body = r.b[start:r.off:r.off]
		}
		a.More = ar.flag(op, "more")
		a.MapNext = r.bytes()
		if r.err == nil && a.Count == 0 && a.More {
			return ar.fail(op, "no entries but more is 1")
		}
		if r.err == nil && !a.More && len(a.MapNext) != 0 {
			return ar.fail(op, "more is 0 but next is not empty")
		}
	case OpTimerList:
		a.Count = r.u32()
		if r.err == nil && int64(a.Count)*8 > int64(len(r.b)-r.off) {
			return ar.fail(op, strconv.FormatUint(uint64(a.Count), 10)+" timers cannot fit in the answers")
		}
		if r.err == nil {
			a.body = r.b[r.off : r.off+8*int(a.Count) : r.off+8*int(a.Count)]
			r.off += len(a.body)
			for i := 8; i < len(a.body); i += 8 {
				if int64(le.Uint64(a.body[i:])) <= int64(le.Uint64(a.body[i-8:])) {
					return ar.fail(op, "timers not in strictly ascending order at timer "+strconv.Itoa(i/8))
				}
			}
		}
	}
	if r.err != nil {
		if r.err == ErrMalformed {
			return ar.fail(op, "truncated")
		}
		return r.err
	}
	ar.index++
	return nil
}

// Finish returns nil when every answer has been read, and otherwise an error wrapping
// [ErrMalformed] (trailing bytes, or an earlier error).
func (ar *AnswerReader) Finish() error {
	r := &ar.r
	if r.err == nil && r.off != len(r.b) {
		r.err = malformedErr("trailing bytes after " + strconv.Itoa(ar.index) + " answers")
	}
	return r.err
}
