package abi

import (
	"encoding/binary"
	"errors"
	"iter"
	"slices"
)

// ErrMalformed is returned by the readers when a buffer is shorter than its contents claim,
// has trailing bytes, or holds a value outside its range. A hostile module can produce any
// bytes; the readers never panic and never read outside the buffer.
var ErrMalformed = errors.New("abi: malformed buffer")

// Sizes of the fixed parts of each buffer.
const (
	// ProcessHeaderSize is the size of a process buffer's header:
	// group_count u32, processing_time_ms i64, watermark_ms i64.
	ProcessHeaderSize = 4 + 8 + 8
	// ResultHeaderSize is the size of a result buffer's header: status u32, group_count u32.
	ResultHeaderSize = 4 + 4
	// GroupResultFixedSize is the size of a group result without its emits, state and error:
	// emit_count, status, action, flags u32, timeout_ms i64, state_len, error_len u32.
	GroupResultFixedSize = 4 + 4 + 4 + 4 + 8 + 4 + 4
)

// Result flags of a group.
const (
	// ResultTimeoutSet is set when the call left a timeout; timeout_ms holds it.
	ResultTimeoutSet uint32 = 1 << 0
)

var le = binary.LittleEndian

func appendU32(b []byte, v uint32) []byte { return le.AppendUint32(b, v) }
func appendI64(b []byte, v int64) []byte  { return le.AppendUint64(b, uint64(v)) }
func appendBytes(b, v []byte) []byte {
	b = le.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// PackResult packs a result buffer's offset and length into the i64 that [ExportInit] and
// [ExportProcess] return: offset in the high 32 bits, length in the low 32 bits.
func PackResult(ptr, length uint32) uint64 { return uint64(ptr)<<32 | uint64(length) }

// UnpackResult is the inverse of [PackResult].
func UnpackResult(v uint64) (ptr, length uint32) { return uint32(v >> 32), uint32(v) }

// Init is the content of an init buffer.
type Init struct {
	// ABIVersion is the host's ABI version ([Version]).
	ABIVersion uint32
	// Mode is the deployment's timeout mode.
	Mode TimeoutMode
	// Flags holds [InitHasWatermark] and (ABI v2 only) [InitHasInputs].
	Flags uint32
	// Name is the deployment's name.
	Name []byte
	// Config is the deployment's config as a JSON object ("{}" when it has none).
	Config []byte
	// Inputs are the names of the deployment's inputs, in the spec's order, with
	// [InitHasInputs] (ABI v2 only); nil otherwise.
	Inputs [][]byte
}

// AppendInit appends the init buffer for in to b:
// abi_version u32, timeout_mode u32, flags u32, name (u32 length + bytes),
// config (u32 length + bytes); then, only when in.Flags has [InitHasInputs], input_count u32
// and each of in.Inputs (u32 length + bytes). Without the flag in.Inputs is not written. The
// encoder does not check the names (see [ValidateInputName]) nor that the flag comes with
// version 2.
func AppendInit(b []byte, in Init) []byte {
	b = appendU32(b, in.ABIVersion)
	b = appendU32(b, uint32(in.Mode))
	b = appendU32(b, in.Flags)
	b = appendBytes(b, in.Name)
	b = appendBytes(b, in.Config)
	if in.Flags&InitHasInputs != 0 {
		b = appendInputs(b, in.Inputs)
	}
	return b
}

// ParseInit decodes an init buffer. The returned slices alias b. Without [InitHasInputs]
// nothing may follow the config; with it the input names must follow, 1 to [MaxInputs]
// valid names (see [ValidateInputName]), none twice, and nothing after them. Any other buffer
// is an error wrapping [ErrMalformed]. ParseInit does not check the flag against the version:
// a guest refuses the flags it does not implement.
func ParseInit(b []byte) (Init, error) {
	r := reader{b: b}
	in := Init{ABIVersion: r.u32(), Mode: TimeoutMode(r.u32()), Flags: r.u32(), Name: r.bytes(), Config: r.bytes()}
	if r.err == nil && in.Flags&InitHasInputs != 0 {
		names, err := parseInputs(&r)
		if err != nil {
			return Init{}, err
		}
		in.Inputs = names
	}
	if err := r.finish(); err != nil {
		return Init{}, err
	}
	return in, nil
}

// AppendInitResult appends an init result buffer to b: status u32, message (u32 length + bytes).
// The message is empty on success.
func AppendInitResult(b []byte, status Status, msg string) []byte {
	b = appendU32(b, uint32(status))
	b = appendU32(b, uint32(len(msg)))
	return append(b, msg...)
}

// ParseInitResult decodes an init result buffer. The message aliases b.
func ParseInitResult(b []byte) (Status, []byte, error) {
	r := reader{b: b}
	st, msg := Status(r.u32()), r.bytes()
	if err := r.finish(); err != nil {
		return 0, nil, err
	}
	return st, msg, nil
}

// ProcessHeader is the header of a process buffer.
type ProcessHeader struct {
	// GroupCount is the number of groups that follow.
	GroupCount uint32
	// ProcessingTimeMs is the batch's processing time T.
	ProcessingTimeMs int64
	// WatermarkMs is the batch's watermark W (0 when no watermark is configured).
	WatermarkMs int64
}

// AppendProcessHeader appends a process buffer's header to b.
func AppendProcessHeader(b []byte, h ProcessHeader) []byte {
	b = appendU32(b, h.GroupCount)
	b = appendI64(b, h.ProcessingTimeMs)
	return appendI64(b, h.WatermarkMs)
}

// GroupSize returns the number of bytes [AppendGroup] appends for a group with this key,
// state and rows, so a host can size the buffer before writing it in place.
func GroupSize(key, state []byte, rows [][]byte) int {
	n := 4 + 4 + len(key) + 4 + len(state) + 4 + 4*len(rows)
	for _, r := range rows {
		n += len(r)
	}
	return n
}

// AppendGroup appends one group of a process buffer to b:
// flags u32, key (u32 length + bytes), state (u32 length + bytes; length 0 unless
// [GroupStateExists]), row_count u32, then each row (u32 length + bytes).
// The key is the group's key as a canonical JSON scalar (a JSON string or number);
// each row is one input message, unchanged.
func AppendGroup(b []byte, flags uint32, key, state []byte, rows [][]byte) []byte {
	b = appendU32(b, flags)
	b = appendBytes(b, key)
	b = appendBytes(b, state)
	b = appendU32(b, uint32(len(rows)))
	for _, r := range rows {
		b = appendBytes(b, r)
	}
	return b
}

// Group is one group read from a process buffer. Its slices alias the buffer.
type Group struct {
	// Flags holds [GroupTimedOut] and [GroupStateExists].
	Flags uint32
	// Key is the canonical JSON scalar of the group's key.
	Key []byte
	// State is the current state value; meaningful only with [GroupStateExists].
	State []byte
	// RowCount is the number of rows.
	RowCount uint32
	rows     []byte
}

// Rows iterates over the group's rows. Each yielded slice aliases the buffer.
func (g *Group) Rows() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		r := reader{b: g.rows}
		for i := uint32(0); i < g.RowCount; i++ {
			if !yield(r.bytes()) {
				return
			}
		}
	}
}

// RowCursor reads the rows of a [Group] one by one, like [Group.Rows] but without a closure,
// so a loop over it allocates nothing. The zero RowCursor has no rows. The version 2 readers
// return one for any run of byte strings: a [GroupV2]'s rows, a [DecodedOp]'s or an
// [Answer]'s list elements, a [GroupResultV2]'s emits.
type RowCursor struct {
	r      reader
	left   uint32
	inputs bool   // each row is preceded by its input index (a DATA group under InitHasInputs)
	input  uint32 // the input index of the row Next returned last
}

// Cursor returns a cursor at the group's first row.
func (g *Group) Cursor() RowCursor { return RowCursor{r: reader{b: g.rows}, left: g.RowCount} }

// Next returns the next row (aliasing the process buffer) and true, or nil and false after
// the last one.
func (c *RowCursor) Next() ([]byte, bool) {
	if c.left == 0 {
		return nil, false
	}
	c.left--
	if c.inputs {
		c.input = c.r.u32()
	}
	// The group's rows were checked by InputReader.Next (or are a caller's own buffer, which
	// bytes checks): read the length in place when it fits, else through the reader.
	if b, off := c.r.b, c.r.off; c.r.err == nil && len(b)-off >= 4 {
		if n := int(le.Uint32(b[off:])); n <= len(b)-off-4 {
			c.r.off = off + 4 + n
			return b[off+4 : off+4+n : off+4+n], true
		}
	}
	return c.r.bytes(), true
}

// Input returns the input index of the row that [RowCursor.Next] returned last: its position
// in the init's [Init.Inputs], in a [GroupV2] read from a buffer with input indexes (see
// [InputReaderV2.SetInputCount]); 0 otherwise, and before the first row.
func (c *RowCursor) Input() uint32 { return c.input }

// InputReader reads a process buffer group by group.
type InputReader struct {
	r      reader
	header ProcessHeader
	left   uint32
}

// NewInputReader validates the header of a process buffer and returns a reader positioned
// at its first group.
func NewInputReader(b []byte) (*InputReader, error) {
	ir := &InputReader{}
	return ir, ir.Reset(b)
}

// Reset makes ir read b, so one reader can be reused across calls.
func (ir *InputReader) Reset(b []byte) error {
	ir.r = reader{b: b}
	ir.header = ProcessHeader{GroupCount: ir.r.u32(), ProcessingTimeMs: ir.r.i64(), WatermarkMs: ir.r.i64()}
	ir.left = ir.header.GroupCount
	return ir.r.err
}

// Header returns the buffer's header.
func (ir *InputReader) Header() ProcessHeader { return ir.header }

// Next reads the next group into g. It returns false, nil at the end of the buffer and false
// with [ErrMalformed] when the buffer is inconsistent.
func (ir *InputReader) Next(g *Group) (bool, error) {
	if ir.left == 0 {
		return false, ir.r.finish()
	}
	ir.left--
	r := &ir.r
	if r.err != nil {
		return false, r.err
	}
	// One function with its own offset rather than a reader call per field: this runs once
	// per group inside every Go module, where calls are what costs.
	b, off := r.b, r.off
	if len(b)-off < 8 {
		return false, r.malformed()
	}
	g.Flags = le.Uint32(b[off:])
	n := int(le.Uint32(b[off+4:]))
	off += 8
	if n > len(b)-off-4 {
		return false, r.malformed()
	}
	g.Key = b[off : off+n : off+n]
	off += n
	n = int(le.Uint32(b[off:]))
	off += 4
	if n > len(b)-off-4 {
		return false, r.malformed()
	}
	g.State = b[off : off+n : off+n]
	off += n
	g.RowCount = le.Uint32(b[off:])
	off += 4
	start := off
	for i := uint32(0); i < g.RowCount; i++ {
		if len(b)-off < 4 {
			return false, r.malformed()
		}
		n = int(le.Uint32(b[off:]))
		off += 4
		if n > len(b)-off {
			return false, r.malformed()
		}
		off += n
	}
	g.rows = b[start:off]
	r.off = off
	return true, nil
}

// GroupResult is the outcome of one group's call.
type GroupResult struct {
	// EmitCount is the number of emitted rows.
	EmitCount uint32
	// Status is [StatusOK], or [StatusError] with Error set.
	Status Status
	// Action is what the call did to the state value.
	Action Action
	// Flags holds [ResultTimeoutSet].
	Flags uint32
	// TimeoutMs is the timeout the call left, when [ResultTimeoutSet].
	TimeoutMs int64
	// State is the new state value, when Action is [ActionUpdate].
	State []byte
	// Error is the error message, when Status is [StatusError].
	Error []byte
	emits []byte
}

// Emits iterates over the rows the call emitted, in emission order. Each yielded slice aliases
// the buffer.
func (g *GroupResult) Emits() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		r := reader{b: g.emits}
		for i := uint32(0); i < g.EmitCount; i++ {
			if !yield(r.bytes()) {
				return
			}
		}
	}
}

// EmitCursor returns a cursor over the rows the call emitted, like [GroupResult.Emits] but
// without a closure.
func (g *GroupResult) EmitCursor() RowCursor {
	return RowCursor{r: reader{b: g.emits}, left: g.EmitCount}
}

// ResultWriter builds a result buffer in one pass, without copying emitted rows twice:
//
//	status u32, group_count u32, then per group:
//	emit_count u32, emit_count x (u32 length + bytes),
//	status u32, action u32, flags u32, timeout_ms i64,
//	state (u32 length + bytes), error (u32 length + bytes)
//
// Emitted rows come first because they are produced while the handler runs; the rest is known
// only when it returns. The zero value is ready to use.
type ResultWriter struct {
	buf      []byte
	count    uint32
	emitsAt  int
	emitting uint32
}

// Reset starts a new result buffer, reusing w's memory.
func (w *ResultWriter) Reset() {
	w.buf = append(w.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
	w.count = 0
}

// BeginGroup starts the result of the next group.
func (w *ResultWriter) BeginGroup() {
	if len(w.buf) < ResultHeaderSize {
		w.Reset()
	}
	w.emitsAt = len(w.buf)
	w.emitting = 0
	w.buf = append(w.buf, 0, 0, 0, 0)
}

// Emit appends one emitted row to the current group. The row is copied.
func (w *ResultWriter) Emit(row []byte) {
	w.buf = appendBytes(w.buf, row)
	w.emitting++
}

// EndGroup completes the current group with r (whose EmitCount is ignored: the count of Emit
// calls is written instead).
func (w *ResultWriter) EndGroup(r GroupResult) {
	le.PutUint32(w.buf[w.emitsAt:], w.emitting)
	// The fixed fields in one step (one capacity check, stores in place): this runs once per
	// group inside every Go module, where each append's check is a jump.
	n := len(w.buf)
	w.buf = slices.Grow(w.buf, GroupResultFixedSize-4+len(r.State)+len(r.Error))[:n+GroupResultFixedSize-8]
	b := w.buf[n:]
	le.PutUint32(b[0:], uint32(r.Status))
	le.PutUint32(b[4:], uint32(r.Action))
	le.PutUint32(b[8:], r.Flags)
	le.PutUint64(b[12:], uint64(r.TimeoutMs))
	le.PutUint32(b[20:], uint32(len(r.State)))
	w.buf = append(w.buf, r.State...)
	w.buf = appendBytes(w.buf, r.Error)
	w.count++
}

// Bytes returns the finished result buffer with status [StatusOK]. It aliases w's memory and
// is valid until the next Reset.
func (w *ResultWriter) Bytes() []byte {
	if len(w.buf) < ResultHeaderSize {
		w.Reset()
	}
	le.PutUint32(w.buf[0:], uint32(StatusOK))
	le.PutUint32(w.buf[4:], w.count)
	return w.buf
}

// AppendCallError appends a result buffer that fails the whole call to b:
// status u32 ([StatusError]), message (u32 length + bytes).
func AppendCallError(b []byte, msg string) []byte {
	b = appendU32(b, uint32(StatusError))
	b = appendU32(b, uint32(len(msg)))
	return append(b, msg...)
}

// CallError is returned by [NewResultReader] when the module failed the whole call.
type CallError struct {
	// Message is the module's error message.
	Message string
}

func (e *CallError) Error() string { return "abi: module failed the call: " + e.Message }

// ResultReader reads a result buffer group by group.
type ResultReader struct {
	r     reader
	count uint32
	left  uint32
}

// NewResultReader validates the header of a result buffer. When the module failed the whole
// call it returns a *[CallError].
func NewResultReader(b []byte) (*ResultReader, error) {
	rr := &ResultReader{}
	return rr, rr.Reset(b)
}

// Reset makes rr read b.
func (rr *ResultReader) Reset(b []byte) error {
	rr.r = reader{b: b}
	status := Status(rr.r.u32())
	if rr.r.err != nil {
		return rr.r.err
	}
	switch status {
	case StatusOK:
	case StatusError:
		msg := rr.r.bytes()
		if err := rr.r.finish(); err != nil {
			return err
		}
		return &CallError{Message: string(msg)}
	default:
		return ErrMalformed
	}
	rr.count = rr.r.u32()
	rr.left = rr.count
	return rr.r.err
}

// Count returns the number of group results the buffer claims to hold.
func (rr *ResultReader) Count() uint32 { return rr.count }

// Next reads the next group result into g. It returns false, nil at the end of the buffer and
// false with [ErrMalformed] when the buffer is inconsistent (including a status out of range,
// or an action out of range in a successful group).
func (rr *ResultReader) Next(g *GroupResult) (bool, error) {
	if rr.left == 0 {
		return false, rr.r.finish()
	}
	rr.left--
	r := &rr.r
	if r.err != nil {
		return false, r.err
	}
	// One function with its own offset rather than a reader call per field, as in
	// InputReader.Next: this runs once per group of every call on the host.
	b, off := r.b, r.off
	if len(b)-off < 4 {
		return false, r.malformed()
	}
	g.EmitCount = le.Uint32(b[off:])
	off += 4
	start := off
	for i := uint32(0); i < g.EmitCount; i++ {
		if len(b)-off < 4 {
			return false, r.malformed()
		}
		n := int(le.Uint32(b[off:]))
		off += 4
		if n > len(b)-off {
			return false, r.malformed()
		}
		off += n
	}
	g.emits = b[start:off]
	// status, action, flags, timeout_ms, state_len: 24 bytes.
	if len(b)-off < 24 {
		return false, r.malformed()
	}
	g.Status = Status(le.Uint32(b[off:]))
	g.Action = Action(le.Uint32(b[off+4:]))
	g.Flags = le.Uint32(b[off+8:])
	g.TimeoutMs = int64(le.Uint64(b[off+12:]))
	n := int(le.Uint32(b[off+20:]))
	off += 24
	if n > len(b)-off-4 { // the state, then error_len
		return false, r.malformed()
	}
	g.State = b[off : off+n : off+n]
	off += n
	n = int(le.Uint32(b[off:]))
	off += 4
	if n > len(b)-off {
		return false, r.malformed()
	}
	g.Error = b[off : off+n : off+n]
	off += n
	if g.Status > StatusError || (g.Status == StatusOK && g.Action > ActionRemove) {
		return false, r.malformed()
	}
	r.off = off
	return true, nil
}

// reader is a bounds-checked cursor. After the first error every read returns zero values and
// the error sticks.
type reader struct {
	b   []byte
	off int
	err error
}

// malformed records and returns ErrMalformed.
func (r *reader) malformed() error {
	r.err = ErrMalformed
	return r.err
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.b)-r.off < n {
		r.err = ErrMalformed
		return false
	}
	return true
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := le.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) i64() int64 {
	if !r.need(8) {
		return 0
	}
	v := le.Uint64(r.b[r.off:])
	r.off += 8
	return int64(v)
}

func (r *reader) bytes() []byte {
	n := r.u32()
	if !r.need(int(n)) {
		return nil
	}
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v
}

// finish reports an error for trailing bytes or an earlier failure.
func (r *reader) finish() error {
	if r.err == nil && r.off != len(r.b) {
		r.err = ErrMalformed
	}
	return r.err
}
