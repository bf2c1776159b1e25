package abi

import (
	"iter"
	"strconv"
)

// GroupKind is the kind of a group in a version 2 process buffer: what the guest calls the
// handler for.
type GroupKind uint32

const (
	// GroupData: the key's rows of the batch (at least one).
	GroupData GroupKind = 0
	// GroupTimers: the key's expired timers (at least one, strictly ascending).
	GroupTimers GroupKind = 1
	// GroupInitial: the key's initial state, a JSON object (first batch only).
	GroupInitial GroupKind = 2
)

// String returns "DATA", "TIMERS" or "INITIAL", or "unknown" for any other value.
func (k GroupKind) String() string {
	switch k {
	case GroupData:
		return "DATA"
	case GroupTimers:
		return "TIMERS"
	case GroupInitial:
		return "INITIAL"
	}
	return "unknown"
}

// DataGroupSize returns the number of bytes [AppendDataGroup] appends for this key and rows,
// so a host can size a buffer before writing it.
func DataGroupSize(key []byte, rows [][]byte) int {
	n := 4 + 4 + len(key) + 4 + 4*len(rows)
	for _, r := range rows {
		n += len(r)
	}
	return n
}

// TimersGroupSize returns the number of bytes [AppendTimersGroup] appends for this key and
// timerCount timers.
func TimersGroupSize(key []byte, timerCount int) int { return 4 + 4 + len(key) + 4 + 8*timerCount }

// InitialGroupSize returns the number of bytes [AppendInitialGroup] appends for this key and
// initial state.
func InitialGroupSize(key, initial []byte) int { return 4 + 4 + len(key) + 4 + len(initial) }

// AppendDataGroup appends a [GroupData] group of a version 2 process buffer to b:
// kind u32 (0), key (u32 length + bytes), row_count u32, then each row (u32 length + bytes).
// The buffer starts with the version 1 header ([AppendProcessHeader]). A host MUST pass at
// least one row; the encoder does not check.
func AppendDataGroup(b, key []byte, rows [][]byte) []byte {
	b = appendU32(b, uint32(GroupData))
	b = appendBytes(b, key)
	b = appendU32(b, uint32(len(rows)))
	for _, r := range rows {
		b = appendBytes(b, r)
	}
	return b
}

// AppendTimersGroup appends a [GroupTimers] group to b: kind u32 (1), key (u32 length +
// bytes), timer_count u32, then each timer (i64). A host MUST pass at least one timer, in
// strictly ascending order; the encoder does not check.
func AppendTimersGroup(b, key []byte, timers []int64) []byte {
	b = appendU32(b, uint32(GroupTimers))
	b = appendBytes(b, key)
	b = appendU32(b, uint32(len(timers)))
	for _, ts := range timers {
		b = appendI64(b, ts)
	}
	return b
}

// AppendInitialGroup appends a [GroupInitial] group to b: kind u32 (2), key (u32 length +
// bytes), initial (u32 length + bytes), the key's line of the initial-state file.
func AppendInitialGroup(b, key, initial []byte) []byte {
	b = appendU32(b, uint32(GroupInitial))
	b = appendBytes(b, key)
	return appendBytes(b, initial)
}

// GroupV2 is one group read from a version 2 process buffer by [InputReaderV2]. Its slices
// alias the buffer: they are valid as long as the buffer is, and are not copied. A GroupV2 is
// meant to be reused from group to group; it is not safe for concurrent use while it is being
// filled.
type GroupV2 struct {
	// Kind is the group's kind. It decides which fields below are meaningful.
	Kind GroupKind
	// Key is the canonical JSON scalar of the group's key.
	Key []byte
	// Count is the number of rows of a [GroupData] group or of timers of a [GroupTimers]
	// group (at least 1), and 0 for [GroupInitial].
	Count uint32
	// Initial is the key's initial state (a JSON object) of a [GroupInitial] group, else nil.
	Initial []byte
	body    []byte // the rows or the timers
	inputs  bool   // a DATA group's rows start with their input index
}

// Rows iterates over the rows of a [GroupData] group (none for other kinds). Each yielded
// slice aliases the buffer.
func (g *GroupV2) Rows() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		c := g.Cursor()
		for row, ok := c.Next(); ok; row, ok = c.Next() {
			if !yield(row) {
				return
			}
		}
	}
}

// Cursor returns a cursor at the first row of a [GroupData] group (an empty cursor for other
// kinds); a loop over it allocates nothing. When the group was read with input indexes (see
// [InputReaderV2.SetInputCount]), [RowCursor.Input] gives each row's.
func (g *GroupV2) Cursor() RowCursor {
	if g.Kind != GroupData {
		return RowCursor{}
	}
	return RowCursor{r: reader{b: g.body}, left: g.Count, inputs: g.inputs}
}

// InputRows iterates over the rows of a [GroupData] group with the input index of each (0 for
// every row unless the group was read with input indexes, see [InputReaderV2.SetInputCount]);
// none for other kinds. Each yielded slice aliases the buffer.
func (g *GroupV2) InputRows() iter.Seq2[uint32, []byte] {
	return func(yield func(uint32, []byte) bool) {
		c := g.Cursor()
		for row, ok := c.Next(); ok; row, ok = c.Next() {
			if !yield(c.Input(), row) {
				return
			}
		}
	}
}

// Timer returns the i-th timer (0-based) of a [GroupTimers] group. It panics unless
// 0 <= i < Count and the group is a [GroupTimers] group.
func (g *GroupV2) Timer(i int) int64 {
	if g.Kind != GroupTimers {
		panic("abi: Timer of a " + g.Kind.String() + " group")
	}
	return int64(le.Uint64(g.body[8*i:]))
}

// Timers iterates over the timers of a [GroupTimers] group in their (ascending) order; none
// for other kinds.
func (g *GroupV2) Timers() iter.Seq[int64] {
	return func(yield func(int64) bool) {
		if g.Kind != GroupTimers {
			return
		}
		for i := 0; i+8 <= len(g.body); i += 8 {
			if !yield(int64(le.Uint64(g.body[i:]))) {
				return
			}
		}
	}
}

// InputReaderV2 reads a version 2 process buffer group by group, validating each group as it
// goes: a known kind, the same kind as the buffer's first group, a [GroupData] group with at
// least one row, a [GroupTimers] group with at least one timer in strictly ascending order,
// no byte outside the buffer, no trailing bytes. It copies nothing. An InputReaderV2 is not
// safe for concurrent use; reuse one with [InputReaderV2.Reset].
//
// A module whose init had [InitHasInputs] reads DATA rows that start with their input index
// (abi/README.md section 9.3a): tell the reader with [InputReaderV2.SetInputCount].
type InputReaderV2 struct {
	r      reader
	header ProcessHeader
	left   uint32
	index  uint32
	kind   GroupKind
	inputs uint32 // the init's input count; 0: rows without input indexes
}

// SetInputCount makes ir read the rows of DATA groups as an init with [InitHasInputs] and n
// input names makes them (abi/README.md section 9.3a): each row is its input index (u32, below
// n, else the buffer is malformed) followed by the row. n 0, the default, reads rows without
// indexes, as an init without the flag makes them. It holds until the next SetInputCount,
// across [InputReaderV2.Reset]; set it before reading a buffer.
func (ir *InputReaderV2) SetInputCount(n uint32) { ir.inputs = n }

// InputCount returns the input count set with [InputReaderV2.SetInputCount] (0: none).
func (ir *InputReaderV2) InputCount() uint32 { return ir.inputs }

// NewInputReaderV2 validates the header of a version 2 process buffer (the same header as
// version 1) and returns a reader positioned at its first group.
func NewInputReaderV2(b []byte) (*InputReaderV2, error) {
	ir := &InputReaderV2{}
	return ir, ir.Reset(b)
}

// Reset makes ir read b, so one reader can be reused across calls.
func (ir *InputReaderV2) Reset(b []byte) error {
	ir.r = reader{b: b}
	ir.header = ProcessHeader{GroupCount: ir.r.u32(), ProcessingTimeMs: ir.r.i64(), WatermarkMs: ir.r.i64()}
	ir.left = ir.header.GroupCount
	ir.index = 0
	if ir.r.err != nil {
		ir.r.err = malformedErr("process buffer shorter than its header")
	}
	return ir.r.err
}

// Header returns the buffer's header.
func (ir *InputReaderV2) Header() ProcessHeader { return ir.header }

// fail records and returns a malformed-buffer error about the current group.
func (ir *InputReaderV2) fail(what string) error {
	ir.r.err = malformedErr("process buffer v2: group " + strconv.FormatUint(uint64(ir.index), 10) + ": " + what)
	return ir.r.err
}

// Next reads the next group into g. It returns false, nil at the end of the buffer and false
// with an error wrapping [ErrMalformed] when the buffer is inconsistent; after an error every
// call returns it again.
func (ir *InputReaderV2) Next(g *GroupV2) (bool, error) {
	r := &ir.r
	if r.err != nil {
		return false, r.err
	}
	if ir.left == 0 {
		if r.finish() != nil {
			r.err = malformedErr("process buffer v2: trailing bytes after " + strconv.FormatUint(uint64(ir.header.GroupCount), 10) + " groups")
		}
		return false, r.err
	}
	kind := GroupKind(r.u32())
	key := r.bytes()
	if r.err != nil {
		return false, ir.fail("truncated kind or key")
	}
	if kind > GroupInitial {
		return false, ir.fail("unknown kind " + strconv.FormatUint(uint64(kind), 10))
	}
	if ir.index == 0 {
		ir.kind = kind
	} else if kind != ir.kind {
		return false, ir.fail("kind " + kind.String() + " after " + ir.kind.String() + " groups (a process buffer holds one phase)")
	}
	g.Kind, g.Key, g.Count, g.Initial, g.body, g.inputs = kind, key, 0, nil, nil, false
	switch kind {
	case GroupData:
		n := r.u32()
		start := r.off
		if ir.inputs == 0 {
			for i := uint32(0); i < n && r.err == nil; i++ {
				r.bytes()
			}
		} else {
			for i := uint32(0); i < n && r.err == nil; i++ {
				if in := r.u32(); in >= ir.inputs && r.err == nil {
					return false, ir.fail("row " + strconv.FormatUint(uint64(i), 10) + ": input index " + strconv.FormatUint(uint64(in), 10) + ", the init has " + strconv.FormatUint(uint64(ir.inputs), 10) + " inputs")
				}
				r.bytes()
			}
		}
		if r.err != nil {
			return false, ir.fail("rows truncated")
		}
		if n == 0 {
			return false, ir.fail("DATA group without rows")
		}
		g.Count, g.body, g.inputs = n, r.b[start:r.off:r.off], ir.inputs != 0
	case GroupTimers:
		n := r.u32()
		if r.err != nil || uint64(n)*8 > uint64(len(r.b)-r.off) {
			return false, ir.fail("timers truncated")
		}
		if n == 0 {
			return false, ir.fail("TIMERS group without timers")
		}
		body := r.b[r.off : r.off+8*int(n) : r.off+8*int(n)]
		for i := 8; i < len(body); i += 8 {
			if int64(le.Uint64(body[i:])) <= int64(le.Uint64(body[i-8:])) {
				return false, ir.fail("timers not in strictly ascending order at timer " + strconv.Itoa(i/8))
			}
		}
		r.off += len(body)
		g.Count, g.body = n, body
	case GroupInitial:
		g.Initial = r.bytes()
		if r.err != nil {
			return false, ir.fail("initial state truncated")
		}
	}
	ir.left--
	ir.index++
	return true, nil
}
