package abi

import (
	"iter"
	"strconv"
)

// GroupResultV2 is the outcome of one group's call in a version 2 result buffer. The slices of
// one read by [ResultReaderV2.Next] alias the buffer: they are valid as long as it is, and are
// not copied.
type GroupResultV2 struct {
	// EmitCount is the number of emitted rows.
	EmitCount uint32
	// Status is [StatusOK], or [StatusError] with Error set. With StatusError the host ignores
	// the emits and every write of the group, including those sent with reads.
	Status Status
	// Error is the error message, when Status is [StatusError].
	Error []byte
	// Ops is the group's op list of write ops not yet sent with a read (see [OpWriter],
	// [OpReader]); empty when there are none.
	Ops   []byte
	emits []byte
}

// Emits iterates over the rows the call emitted, in emission order. Each yielded slice aliases
// the buffer.
func (g *GroupResultV2) Emits() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		c := g.EmitCursor()
		for e, ok := c.Next(); ok; e, ok = c.Next() {
			if !yield(e) {
				return
			}
		}
	}
}

// EmitCursor returns a cursor over the emitted rows, like [GroupResultV2.Emits] without a
// closure.
func (g *GroupResultV2) EmitCursor() RowCursor {
	return RowCursor{r: reader{b: g.emits}, left: g.EmitCount}
}

// ResultWriterV2 builds a version 2 result buffer in one pass:
//
//	status u32, group_count u32, then per group:
//	emit_count u32, emit_count x (u32 length + bytes),
//	status u32, error (u32 length + bytes), ops (u32 length + bytes)
//
// As in version 1, emitted rows come first because they are produced while the handler runs.
// A whole-call error has the version 1 layout (see [AppendCallError]). The zero value is ready
// to use; a ResultWriterV2 is not safe for concurrent use.
type ResultWriterV2 struct {
	buf      []byte
	count    uint32
	emitsAt  int
	emitting uint32
}

// Reset starts a new result buffer, reusing w's memory.
func (w *ResultWriterV2) Reset() {
	w.buf = append(w.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
	w.count = 0
}

// BeginGroup starts the result of the next group.
func (w *ResultWriterV2) BeginGroup() {
	if len(w.buf) < ResultHeaderSize {
		w.Reset()
	}
	w.emitsAt = len(w.buf)
	w.emitting = 0
	w.buf = append(w.buf, 0, 0, 0, 0)
}

// Emit appends one emitted row to the current group. The row is copied.
func (w *ResultWriterV2) Emit(row []byte) {
	w.buf = appendBytes(w.buf, row)
	w.emitting++
}

// EndGroup completes the current group with r's Status, Error and Ops, which are copied (its
// EmitCount is ignored: the count of Emit calls is written instead). Ops must hold write ops
// only; EndGroup does not check (see [ValidateWriteOps]).
func (w *ResultWriterV2) EndGroup(r GroupResultV2) {
	le.PutUint32(w.buf[w.emitsAt:], w.emitting)
	w.buf = appendU32(w.buf, uint32(r.Status))
	w.buf = appendBytes(w.buf, r.Error)
	w.buf = appendBytes(w.buf, r.Ops)
	w.count++
}

// Bytes returns the finished result buffer with status [StatusOK]. It aliases w's memory and
// is valid until the next Reset.
func (w *ResultWriterV2) Bytes() []byte {
	if len(w.buf) < ResultHeaderSize {
		w.Reset()
	}
	le.PutUint32(w.buf[0:], uint32(StatusOK))
	le.PutUint32(w.buf[4:], w.count)
	return w.buf
}

// ResultReaderV2 reads a version 2 result buffer group by group, validating each group as it
// goes: every length against the end of the buffer, a status of 0 or 1, an op list of
// well-formed write ops only (even with status 1), no trailing bytes. It copies nothing. A
// ResultReaderV2 is not safe for concurrent use; reuse one with [ResultReaderV2.Reset].
type ResultReaderV2 struct {
	r     reader
	count uint32
	left  uint32
}

// NewResultReaderV2 validates the header of a version 2 result buffer. When the module failed
// the whole call it returns a *[CallError].
func NewResultReaderV2(b []byte) (*ResultReaderV2, error) {
	rr := &ResultReaderV2{}
	return rr, rr.Reset(b)
}

// Reset makes rr read b. It returns a *[CallError] when b is a whole-call error, and an error
// wrapping [ErrMalformed] when its header is malformed.
func (rr *ResultReaderV2) Reset(b []byte) error {
	rr.r = reader{b: b}
	rr.count, rr.left = 0, 0
	status := Status(rr.r.u32())
	if rr.r.err != nil {
		return rr.fail("shorter than its header")
	}
	switch status {
	case StatusOK:
	case StatusError:
		msg := rr.r.bytes()
		if rr.r.finish() != nil {
			return rr.fail("whole-call error truncated or followed by trailing bytes")
		}
		return &CallError{Message: string(msg)}
	default:
		return rr.fail("status " + strconv.FormatUint(uint64(status), 10) + " (want 0 or 1)")
	}
	rr.count = rr.r.u32()
	rr.left = rr.count
	if rr.r.err != nil {
		return rr.fail("shorter than its header")
	}
	return nil
}

func (rr *ResultReaderV2) fail(what string) error {
	rr.r.err = malformedErr("result buffer v2: " + what)
	return rr.r.err
}

// failGroup records and returns a malformed-buffer error about the current group.
func (rr *ResultReaderV2) failGroup(what string) error {
	return rr.fail("group " + strconv.FormatUint(uint64(rr.count-rr.left), 10) + ": " + what)
}

// Count returns the number of group results the buffer claims to hold.
func (rr *ResultReaderV2) Count() uint32 { return rr.count }

// Next reads the next group result into g. It returns false, nil at the end of the buffer and
// false with an error wrapping [ErrMalformed] when the buffer is inconsistent; after an error
// every call returns it again.
func (rr *ResultReaderV2) Next(g *GroupResultV2) (bool, error) {
	r := &rr.r
	if r.err != nil {
		return false, r.err
	}
	if rr.left == 0 {
		if r.finish() != nil {
			return false, rr.fail("trailing bytes after " + strconv.FormatUint(uint64(rr.count), 10) + " groups")
		}
		return false, nil
	}
	g.EmitCount = r.u32()
	start := r.off
	for i := uint32(0); i < g.EmitCount && r.err == nil; i++ {
		r.bytes()
	}
	if r.err != nil {
		return false, rr.failGroup("emits truncated")
	}
	g.emits = r.b[start:r.off:r.off]
	g.Status = Status(r.u32())
	g.Error = r.bytes()
	g.Ops = r.bytes()
	if r.err != nil {
		return false, rr.failGroup("truncated")
	}
	if g.Status > StatusError {
		return false, rr.failGroup("status " + strconv.FormatUint(uint64(g.Status), 10) + " (want 0 or 1)")
	}
	if err := ValidateWriteOps(g.Ops); err != nil {
		what := err.Error()
		if me, ok := err.(*malformedError); ok {
			what = me.what
		}
		return false, rr.failGroup("ops: " + what)
	}
	rr.left--
	return true, nil
}
