package abi

import (
	"iter"
	"strconv"
)

// Op is the code of one operation on a key's state in a version 2 op list (abi/README.md
// section 9.4). Variable ops name a state variable by its index in the declarations (see
// [VarDecl]); timer ops name none. Read ops have an answer (see [AnswerReader]); the others
// are writes.
type Op uint8

// The op codes of version 2.
const (
	OpValueGet      Op = 0x01 // read a value variable: answer present u8, value when 1
	OpValueSet      Op = 0x02 // set a value variable: value
	OpValueClear    Op = 0x03 // clear a value variable
	OpListRead      Op = 0x10 // read a page of a list: cursor u64, max_bytes u32
	OpListAppend    Op = 0x11 // append elements to a list: count u32, elements
	OpListPut       Op = 0x12 // replace a list: count u32, elements
	OpListClear     Op = 0x13 // clear a list
	OpListExists    Op = 0x14 // read whether a list has elements: answer u8
	OpListDropFirst Op = 0x15 // remove a list's first n elements: n u32 (an addition to the draft)
	OpMapGet        Op = 0x20 // read a map entry: map key; answer present u8, value when 1
	OpMapContains   Op = 0x21 // read whether a map has a key: map key; answer u8
	OpMapSet        Op = 0x22 // set a map entry: map key, value
	OpMapRemove     Op = 0x23 // remove a map entry: map key
	OpMapRead       Op = 0x24 // read a page of a map: cursor (byte string), max_bytes u32
	OpMapClear      Op = 0x25 // clear a map
	OpMapExists     Op = 0x26 // read whether a map has entries: answer u8
	OpTimerRegister Op = 0x30 // register a timer: ts i64
	OpTimerDelete   Op = 0x31 // delete a timer: ts i64
	OpTimerList     Op = 0x32 // read the key's timers: answer count u32, i64 each
)

// opInfo is what the codec knows about an op code.
type opInfo struct {
	name  string
	kind  VarKind // 0 for timer ops
	read  bool
	valid bool
}

// opInfos is indexed by op code, so every question about an op is one lookup.
var opInfos = [256]opInfo{
	OpValueGet:      {"VALUE_GET", VarValue, true, true},
	OpValueSet:      {"VALUE_SET", VarValue, false, true},
	OpValueClear:    {"VALUE_CLEAR", VarValue, false, true},
	OpListRead:      {"LIST_READ", VarList, true, true},
	OpListAppend:    {"LIST_APPEND", VarList, false, true},
	OpListPut:       {"LIST_PUT", VarList, false, true},
	OpListClear:     {"LIST_CLEAR", VarList, false, true},
	OpListExists:    {"LIST_EXISTS", VarList, true, true},
	OpListDropFirst: {"LIST_DROP_FIRST", VarList, false, true},
	OpMapGet:        {"MAP_GET", VarMap, true, true},
	OpMapContains:   {"MAP_CONTAINS", VarMap, true, true},
	OpMapSet:        {"MAP_SET", VarMap, false, true},
	OpMapRemove:     {"MAP_REMOVE", VarMap, false, true},
	OpMapRead:       {"MAP_READ", VarMap, true, true},
	OpMapClear:      {"MAP_CLEAR", VarMap, false, true},
	OpMapExists:     {"MAP_EXISTS", VarMap, true, true},
	OpTimerRegister: {"TIMER_REGISTER", 0, false, true},
	OpTimerDelete:   {"TIMER_DELETE", 0, false, true},
	OpTimerList:     {"TIMER_LIST", 0, true, true},
}

// String returns the op's name as in abi/README.md ("VALUE_GET", ...), or "unknown".
func (o Op) String() string {
	if !opInfos[o].valid {
		return "unknown"
	}
	return opInfos[o].name
}

// Valid reports whether o is an op code of version 2.
func (o Op) Valid() bool { return opInfos[o].valid }

// IsRead reports whether o is a read op, one that has an answer. Only write ops may appear in
// a group result's op list.
func (o Op) IsRead() bool { return opInfos[o].read }

// VarKind returns the kind of variable o operates on, or 0 for the timer ops (which name no
// variable) and for unknown ops. A host refuses an op whose variable was declared with another
// kind.
func (o Op) VarKind() VarKind { return opInfos[o].kind }

// OpWriter builds an op list: ops back to back, each op u8 followed, for variable ops, by var
// u32 and then the op's operands (abi/README.md section 9.4). Every method appends one op and
// copies its byte operands. The methods do not validate their arguments.
//
// A guest typically buffers write ops in one OpWriter and, at a read, appends the read ops to
// it and sends [OpWriter.Bytes] through [ImportState]. If the answers did not fit, the host has
// applied the writes anyway, so only the reads are sent again: Bytes()[mark:], where mark is
// [OpWriter.Len] before the first read.
//
// The zero value is ready to use. An OpWriter is not safe for concurrent use.
type OpWriter struct {
	buf []byte
}

// Reset empties w, keeping its memory.
func (w *OpWriter) Reset() { w.buf = w.buf[:0] }

// Len returns the size of the op list so far, in bytes.
func (w *OpWriter) Len() int { return len(w.buf) }

// Bytes returns the op list. It aliases w's memory and is valid until the next call of a
// method of w.
func (w *OpWriter) Bytes() []byte { return w.buf }

func (w *OpWriter) varOp(op Op, v uint32) {
	w.buf = append(w.buf, byte(op))
	w.buf = appendU32(w.buf, v)
}

func (w *OpWriter) elements(op Op, v uint32, elems [][]byte) {
	w.varOp(op, v)
	w.buf = appendU32(w.buf, uint32(len(elems)))
	for _, e := range elems {
		w.buf = appendBytes(w.buf, e)
	}
}

// ValueGet appends VALUE_GET of value variable v.
func (w *OpWriter) ValueGet(v uint32) { w.varOp(OpValueGet, v) }

// ValueSet appends VALUE_SET of value variable v to value.
func (w *OpWriter) ValueSet(v uint32, value []byte) {
	w.varOp(OpValueSet, v)
	w.buf = appendBytes(w.buf, value)
}

// ValueClear appends VALUE_CLEAR of value variable v.
func (w *OpWriter) ValueClear(v uint32) { w.varOp(OpValueClear, v) }

// ListRead appends LIST_READ of list variable v from cursor (0: the start; then the previous
// answer's next) for about maxBytes of elements.
func (w *OpWriter) ListRead(v uint32, cursor uint64, maxBytes uint32) {
	w.varOp(OpListRead, v)
	w.buf = le.AppendUint64(w.buf, cursor)
	w.buf = appendU32(w.buf, maxBytes)
}

// ListAppend appends LIST_APPEND of elems to list variable v.
func (w *OpWriter) ListAppend(v uint32, elems ...[]byte) { w.elements(OpListAppend, v, elems) }

// ListPut appends LIST_PUT of list variable v: the list becomes elems.
func (w *OpWriter) ListPut(v uint32, elems ...[]byte) { w.elements(OpListPut, v, elems) }

// ListClear appends LIST_CLEAR of list variable v.
func (w *OpWriter) ListClear(v uint32) { w.varOp(OpListClear, v) }

// ListExists appends LIST_EXISTS of list variable v.
func (w *OpWriter) ListExists(v uint32) { w.varOp(OpListExists, v) }

// ListDropFirst appends LIST_DROP_FIRST of list variable v: its first n elements are
// removed (a host refuses an n above the list's number of elements).
func (w *OpWriter) ListDropFirst(v uint32, n uint32) {
	w.varOp(OpListDropFirst, v)
	w.buf = appendU32(w.buf, n)
}

// MapGet appends MAP_GET of key in map variable v.
func (w *OpWriter) MapGet(v uint32, key []byte) {
	w.varOp(OpMapGet, v)
	w.buf = appendBytes(w.buf, key)
}

// MapContains appends MAP_CONTAINS of key in map variable v.
func (w *OpWriter) MapContains(v uint32, key []byte) {
	w.varOp(OpMapContains, v)
	w.buf = appendBytes(w.buf, key)
}

// MapSet appends MAP_SET of key to value in map variable v.
func (w *OpWriter) MapSet(v uint32, key, value []byte) {
	w.varOp(OpMapSet, v)
	w.buf = appendBytes(w.buf, key)
	w.buf = appendBytes(w.buf, value)
}

// MapRemove appends MAP_REMOVE of key from map variable v.
func (w *OpWriter) MapRemove(v uint32, key []byte) {
	w.varOp(OpMapRemove, v)
	w.buf = appendBytes(w.buf, key)
}

// MapRead appends MAP_READ of map variable v from cursor (empty: the start; then the previous
// answer's next) for about maxBytes of entries.
func (w *OpWriter) MapRead(v uint32, cursor []byte, maxBytes uint32) {
	w.varOp(OpMapRead, v)
	w.buf = appendBytes(w.buf, cursor)
	w.buf = appendU32(w.buf, maxBytes)
}

// MapClear appends MAP_CLEAR of map variable v.
func (w *OpWriter) MapClear(v uint32) { w.varOp(OpMapClear, v) }

// MapExists appends MAP_EXISTS of map variable v.
func (w *OpWriter) MapExists(v uint32) { w.varOp(OpMapExists, v) }

// TimerRegister appends TIMER_REGISTER of a timer at ts (ms).
func (w *OpWriter) TimerRegister(ts int64) {
	w.buf = append(w.buf, byte(OpTimerRegister))
	w.buf = appendI64(w.buf, ts)
}

// TimerDelete appends TIMER_DELETE of the timer at ts (ms).
func (w *OpWriter) TimerDelete(ts int64) {
	w.buf = append(w.buf, byte(OpTimerDelete))
	w.buf = appendI64(w.buf, ts)
}

// TimerList appends TIMER_LIST.
func (w *OpWriter) TimerList() { w.buf = append(w.buf, byte(OpTimerList)) }

// Append appends the op o, as decoded by [OpReader.Next], so a decoded op list encodes back
// to the same bytes. It does nothing for an unknown op.
func (w *OpWriter) Append(o *DecodedOp) {
	switch o.Op {
	case OpValueSet:
		w.ValueSet(o.Var, o.Value)
	case OpListRead:
		w.ListRead(o.Var, o.Cursor, o.MaxBytes)
	case OpListAppend, OpListPut:
		w.varOp(o.Op, o.Var)
		w.buf = appendU32(w.buf, o.Count)
		w.buf = append(w.buf, o.elems...)
	case OpListDropFirst:
		w.ListDropFirst(o.Var, o.N)
	case OpMapGet, OpMapContains, OpMapRemove:
		w.varOp(o.Op, o.Var)
		w.buf = appendBytes(w.buf, o.MapKey)
	case OpMapSet:
		w.MapSet(o.Var, o.MapKey, o.Value)
	case OpMapRead:
		w.MapRead(o.Var, o.MapCursor, o.MaxBytes)
	case OpTimerRegister, OpTimerDelete:
		w.buf = append(w.buf, byte(o.Op))
		w.buf = appendI64(w.buf, o.Ts)
	case OpTimerList:
		w.TimerList()
	default:
		if o.Op.Valid() { // the variable ops without operands
			w.varOp(o.Op, o.Var)
		}
	}
}

// DecodedOp is one op read by [OpReader.Next]. Only the fields of its op are set; the others
// are zero. Its slices alias the op list: they are valid as long as it is, and are not copied.
// A DecodedOp is meant to be reused from op to op.
type DecodedOp struct {
	// Op is the op code.
	Op Op
	// Var is the variable's index, for variable ops (below [MaxVars]; the reader does not know
	// how many variables were declared).
	Var uint32
	// Value is the value of VALUE_SET and MAP_SET.
	Value []byte
	// MapKey is the map key of MAP_GET, MAP_CONTAINS, MAP_SET and MAP_REMOVE.
	MapKey []byte
	// Cursor is the cursor of LIST_READ (0: the start).
	Cursor uint64
	// MapCursor is the cursor of MAP_READ (empty: the start).
	MapCursor []byte
	// MaxBytes is the max_bytes of LIST_READ and MAP_READ.
	MaxBytes uint32
	// Ts is the timestamp of TIMER_REGISTER and TIMER_DELETE.
	Ts int64
	// Count is the number of elements of LIST_APPEND and LIST_PUT; see [DecodedOp.Elements].
	Count uint32
	// N is the number of elements LIST_DROP_FIRST removes.
	N     uint32
	elems []byte
}

// Elements iterates over the elements of LIST_APPEND and LIST_PUT (none for other ops). Each
// yielded slice aliases the op list.
func (o *DecodedOp) Elements() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		c := o.ElementCursor()
		for e, ok := c.Next(); ok; e, ok = c.Next() {
			if !yield(e) {
				return
			}
		}
	}
}

// ElementCursor returns a cursor over the elements of LIST_APPEND and LIST_PUT (an empty one
// for other ops), like [DecodedOp.Elements] without a closure.
func (o *DecodedOp) ElementCursor() RowCursor {
	return RowCursor{r: reader{b: o.elems}, left: o.Count}
}

// OpReader decodes an op list one op at a time, checking every op code, variable index, length
// and count against the end of the list; it never panics and never reads outside the list. It
// copies nothing. An OpReader is not safe for concurrent use; reuse one with
// [OpReader.Reset].
type OpReader struct {
	r     reader
	index int
}

// NewOpReader returns a reader at the first op of ops.
func NewOpReader(ops []byte) *OpReader {
	or := &OpReader{}
	or.Reset(ops)
	return or
}

// Reset makes or read ops from its first op.
func (or *OpReader) Reset(ops []byte) {
	or.r = reader{b: ops}
	or.index = 0
}

// Offset returns the offset in the op list of the next op to read.
func (or *OpReader) Offset() int { return or.r.off }

func (or *OpReader) fail(what string) error {
	or.r.err = malformedErr("op " + strconv.Itoa(or.index) + ": " + what)
	return or.r.err
}

// Next decodes the next op into o. It returns false, nil at the end of the list and false with
// an error wrapping [ErrMalformed] for an unknown op code, a variable index of [MaxVars] or
// more, a truncated operand or a count that cannot fit; after an error every call returns it
// again.
func (or *OpReader) Next(o *DecodedOp) (bool, error) {
	r := &or.r
	if r.err != nil {
		return false, r.err
	}
	if r.off == len(r.b) {
		return false, nil
	}
	op := Op(r.b[r.off])
	r.off++
	info := &opInfos[op]
	if !info.valid {
		return false, or.fail("unknown op code 0x" + strconv.FormatUint(uint64(op), 16))
	}
	*o = DecodedOp{Op: op}
	if info.kind != 0 {
		o.Var = r.u32()
		if r.err != nil {
			return false, or.fail(info.name + ": truncated variable index")
		}
		if o.Var >= MaxVars {
			return false, or.fail(info.name + ": variable index " + strconv.FormatUint(uint64(o.Var), 10) + " is not below " + strconv.Itoa(MaxVars))
		}
	}
	switch op {
	case OpValueSet:
		o.Value = r.bytes()
	case OpListRead:
		o.Cursor = uint64(r.i64())
		o.MaxBytes = r.u32()
	case OpListAppend, OpListPut:
		o.Count = r.u32()
		if r.err == nil && int64(o.Count) > int64(len(r.b)-r.off)/4 {
			return false, or.fail(info.name + ": " + strconv.FormatUint(uint64(o.Count), 10) + " elements cannot fit in the op list")
		}
		start := r.off
		for i := uint32(0); i < o.Count && r.err == nil; i++ {
			r.bytes()
		}
		if r.err == nil {
			o.elems = r.b[start:r.off:r.off]
		}
	case OpListDropFirst:
		o.N = r.u32()
	case OpMapGet, OpMapContains, OpMapRemove:
		o.MapKey = r.bytes()
	case OpMapSet:
		o.MapKey = r.bytes()
		o.Value = r.bytes()
	case OpMapRead:
		o.MapCursor = r.bytes()
		o.MaxBytes = r.u32()
	case OpTimerRegister, OpTimerDelete:
		o.Ts = r.i64()
	}
	if r.err != nil {
		return false, or.fail(info.name + ": truncated operands")
	}
	or.index++
	return true, nil
}

// ValidateWriteOps returns nil when ops is a well-formed op list of write ops only, as a group
// result's op list must be, and otherwise an error wrapping [ErrMalformed] that names the
// first offending op.
func ValidateWriteOps(ops []byte) error {
	or := OpReader{r: reader{b: ops}}
	var o DecodedOp
	for {
		ok, err := or.Next(&o)
		if !ok {
			return err
		}
		if o.Op.IsRead() {
			return malformedErr("op " + strconv.Itoa(or.index-1) + ": read op " + o.Op.String() + " in an op list of writes")
		}
	}
}
