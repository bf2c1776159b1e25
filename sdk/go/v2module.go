package groupstate

import (
	"errors"
	"fmt"

	"github.com/groupstate/groupstate/abi"
)

// v2Engine is the part of a [Module] that runs a transformWithState processor (ABI v2). Only
// [RegisterProcessor] creates one; see Module.v2.
type v2Engine interface {
	initModule(in []byte) []byte
	process(in []byte) []byte
}

// StateHost stands in for the host's groupstate.group_begin and groupstate.state imports
// (abi/README.md sections 9.1 and 9.5) when a [Module] with a processor is driven natively,
// in tests and benchmarks. Outside WebAssembly a processor's module needs one; under wasip1 the
// imports are used unless one is set.
type StateHost interface {
	// GroupBegin is called before the processor runs for the group at index (0-based) of the
	// current process buffer; the ops of the State calls that follow are that group's.
	GroupBegin(index uint32)
	// State applies the op list req for the current group and writes the answers of its read
	// ops to resp when they fit. It returns the size of the answers, or [abi.StateRefused].
	State(req, resp []byte) int32
}

// SetStateHost makes m send its state requests to h instead of the host's imports (see
// [StateHost]). Call it before [Module.Process]; nil restores the imports.
func (m *Module) SetStateHost(h StateHost) { m.stateHost = h }

// Default sizes of the state reads.
const (
	// defaultPageBytes is the max_bytes of LIST_READ and MAP_READ: how much of a collection
	// one state call fetches.
	defaultPageBytes = 64 << 10
	// minRespBytes is the initial capacity of the answers buffer; it grows when the host
	// reports bigger answers.
	minRespBytes = defaultPageBytes + 4<<10
)

// Errors of the state requests.
var (
	// ErrStateRefused is the failure of a call whose state request the host refused (abi
	// README section 9.5): the call stops at once and its group fails. The host logs why.
	ErrStateRefused = errors.New("groupstate: the host refused a state request (see the host's log)")

	// errNoStateHost is the failure of a state request outside WebAssembly without a StateHost.
	errNoStateHost = errors.New("groupstate: no state host: outside WebAssembly a processor's module needs Module.SetStateHost")
)

// abortCall is the panic that stops a call whose state request failed; call recovers it and
// fails the group with v2Module.err.
type abortCall struct{}

// varInfo is one declared state variable.
type varInfo struct {
	decl  abi.VarDecl
	check func(b []byte) error // decodes one value, element or map value into the variable's type
}

// v2Module runs a processor: the ABI v2 side of a [Module].
type v2Module struct {
	m   *Module
	run v2Runner

	vars      []varInfo // declared by the processor's Init, in index order
	inputs    []string  // the init's input names (abi.InitHasInputs), nil without
	declaring bool      // in the processor's Init
	declErr   error     // the first declaration error

	in    abi.InputReaderV2
	group abi.GroupV2
	w     abi.ResultWriterV2
	ops   abi.OpWriter // the group's writes not sent yet, then a request's reads
	resp  []byte       // the answers of the last request
	ar    abi.AnswerReader
	ans   abi.Answer
	enc   jsonEncoder
	errb  []byte
	out   []byte

	pageBytes uint32 // max_bytes of LIST_READ and MAP_READ
	respMin   int    // the initial capacity of resp

	// The call in progress.
	inCall   bool
	gen      uint64 // counts groups; a handle's cache is valid for one generation
	key      Key
	procMs   int64
	wmMs     int64
	err      error // the first failure recorded outside the processor's return value
	timers   Timers
	timerIdx int    // in a TIMERS group: the index of the timer being handled
	skip     []bool // in a TIMERS group: the timers deleted by an earlier call of the group
}

// v2Runner calls the user's processor; see runner.
type v2Runner interface {
	init(h *ProcessorHandle) error
	data(key Key) error
	timer(key Key, ts int64) error
	initial(key Key, initial []byte) error
}

func newV2Module(m *Module) *v2Module {
	e := &v2Module{m: m, pageBytes: defaultPageBytes, respMin: minRespBytes}
	e.timers.e = e
	return e
}

// initModule is [Module.Init] for a processor: the v1 checks (with version 2), the OnInit
// functions, then the processor's Init, whose declarations go into a v2 init result.
func (e *v2Module) initModule(in []byte) []byte {
	if err := e.init(in); err != nil {
		e.out = abi.AppendInitResultV2(e.out[:0], abi.StatusError, err.Error(), nil)
		return e.out
	}
	decls := make([]abi.VarDecl, len(e.vars))
	for i, v := range e.vars {
		decls[i] = v.decl
	}
	e.out = abi.AppendInitResultV2(e.out[:0], abi.StatusOK, "", decls)
	return e.out
}

func (e *v2Module) init(in []byte) (err error) {
	if err := e.m.init(in); err != nil {
		return err
	}
	e.m.initialized = false // until the processor's Init succeeds
	e.inputs = e.m.config.inputs
	e.in.SetInputCount(uint32(len(e.inputs)))
	e.vars, e.declErr = e.vars[:0], nil
	h := &ProcessorHandle{e: e, config: e.m.config}
	e.declaring = true
	defer func() {
		e.declaring = false
		if v := recover(); v != nil {
			err = fmt.Errorf("groupstate: panic in Init: %v", v)
		}
	}()
	if err := e.run.init(h); err != nil {
		return err
	}
	if e.declErr != nil {
		return e.declErr
	}
	decls := make([]abi.VarDecl, len(e.vars))
	for i, v := range e.vars {
		decls[i] = v.decl
	}
	if err := abi.ValidateVarDecls(decls); err != nil {
		return fmt.Errorf("groupstate: %w", err)
	}
	e.m.initialized = true
	return nil
}

// process is [Module.Process] for a processor: one call of the processor per group (one per
// timer for a TIMERS group), results as in abi/README.md section 9.6.
func (e *v2Module) process(in []byte) []byte {
	if !e.m.initialized {
		return e.callError("groupstate: process called before a successful init")
	}
	if err := e.in.Reset(in); err != nil {
		return e.callError("groupstate: process buffer: " + err.Error())
	}
	h := e.in.Header()
	e.procMs, e.wmMs = h.ProcessingTimeMs, h.WatermarkMs
	e.w.Reset()
	for i := 0; ; i++ {
		ok, err := e.in.Next(&e.group)
		if err != nil {
			return e.callError(fmt.Sprintf("groupstate: process buffer: group %d: %v", i, err))
		}
		if !ok {
			break
		}
		e.groupBegin(uint32(i))
		e.w.BeginGroup()
		err = e.call()
		var r abi.GroupResultV2
		if err != nil {
			// The host discards the group's writes, those sent with reads too; the ops
			// field is left empty.
			r.Status = abi.StatusError
			e.errb = append(e.errb[:0], err.Error()...)
			r.Error = e.errb
		} else {
			r.Ops = e.ops.Bytes()
		}
		e.w.EndGroup(r)
	}
	return e.w.Bytes()
}

// groupBegin announces group i to the host and resets the call's state.
func (e *v2Module) groupBegin(i uint32) {
	hostGroupBegin(i)
	if h := e.m.stateHost; h != nil {
		h.GroupBegin(i)
	}
	e.ops.Reset()
	e.gen++
	e.key = Key{raw: e.group.Key}
	e.err = nil
	e.timerIdx = -1
	e.skip = e.skip[:0]
}

// call runs the processor for the current group, turning a panic into an error.
func (e *v2Module) call() (err error) {
	e.inCall = true
	defer func() {
		e.inCall = false
		if v := recover(); v != nil {
			if _, ok := v.(abortCall); ok && e.err != nil {
				err = e.err
			} else {
				err = fmt.Errorf("panic: %v", v)
			}
		}
	}()
	switch e.group.Kind {
	case abi.GroupData:
		err = e.run.data(e.key)
	case abi.GroupTimers:
		n := int(e.group.Count)
		for range n {
			e.skip = append(e.skip, false)
		}
		for i := 0; i < n && err == nil && e.err == nil; i++ {
			if e.skip[i] {
				continue
			}
			e.timerIdx = i
			err = e.run.timer(e.key, e.group.Timer(i))
		}
	case abi.GroupInitial:
		err = e.run.initial(e.key, e.group.Initial)
	}
	if err == nil {
		err = e.err
	}
	return err
}

// inputName returns the name of input i of the init, or "" without inputs (the reader has
// checked i against their count).
func (e *v2Module) inputName(i uint32) string {
	if int(i) < len(e.inputs) {
		return e.inputs[i]
	}
	return ""
}

func (e *v2Module) callError(msg string) []byte {
	e.out = abi.AppendCallError(e.out[:0], msg)
	return e.out
}

// Emit appends row to the current group's output (an [Emitter]'s sink).
func (e *v2Module) Emit(row []byte) {
	e.begin("Emitter.Emit")
	e.w.Emit(row)
}

// fail records err as the call's failure unless one is recorded already.
func (e *v2Module) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// abort fails the call with err and stops it at once.
func (e *v2Module) abort(err error) {
	e.fail(err)
	panic(abortCall{})
}

// begin checks that a handle is used during a call of the processor.
func (e *v2Module) begin(what string) {
	if !e.inCall {
		panic("groupstate: " + what + " used outside a call of the processor")
	}
}

// request sends the pending writes and the read ops appended to e.ops since mark through the
// host's state function (abi/README.md section 9.5), and returns the answers, valid until the
// next request. When the answers do not fit, the host has applied the writes all the same, so
// only the reads are sent again, with a buffer of the size the host asked for. A refused
// request (or a host that misbehaves) stops the call.
func (e *v2Module) request(mark int) []byte {
	if cap(e.resp) < e.respMin {
		e.resp = make([]byte, e.respMin)
	}
	req := e.ops.Bytes()
	for attempt := 0; ; attempt++ {
		resp := e.resp[:cap(e.resp)]
		n := e.callHost(req, resp)
		if n < 0 {
			if n == abi.StateRefused {
				e.abort(ErrStateRefused)
			}
			e.abort(fmt.Errorf("groupstate: the state function returned %d", n))
		}
		if int(n) <= len(resp) {
			e.ops.Reset()
			return resp[:n]
		}
		if attempt == 3 {
			e.abort(fmt.Errorf("groupstate: the state answers keep growing (%d bytes)", n))
		}
		e.resp = make([]byte, n)
		req = e.ops.Bytes()[mark:] // the writes were applied: resend only the reads
	}
}

// callHost calls the state host set with [Module.SetStateHost], else the import.
func (e *v2Module) callHost(req, resp []byte) int32 {
	if h := e.m.stateHost; h != nil {
		return h.State(req, resp)
	}
	if !haveStateImport {
		e.abort(errNoStateHost)
	}
	return hostState(req, resp)
}

// decode decodes the single answer of the read op op in b into a, stopping the call when the
// host's answer is malformed.
func (e *v2Module) decode(b []byte, op abi.Op, a *abi.Answer) {
	e.ar.Reset(b)
	err := e.ar.Next(op, a)
	if err == nil {
		err = e.ar.Finish()
	}
	if err != nil {
		e.abort(fmt.Errorf("groupstate: state answer of %v: %w", op, err))
	}
}

// read sends the read op op appended since mark and returns its answer, valid until the next
// request.
func (e *v2Module) read(mark int, op abi.Op) *abi.Answer {
	e.decode(e.request(mark), op, &e.ans)
	return &e.ans
}

// readPage is read for a page of an iteration, which must survive the requests that the
// iterating code makes: the answer is copied into page (returned, reused for the next page)
// and decoded into a.
func (e *v2Module) readPage(mark int, op abi.Op, page []byte, a *abi.Answer) []byte {
	page = append(page[:0], e.request(mark)...)
	e.decode(page, op, a)
	return page
}
