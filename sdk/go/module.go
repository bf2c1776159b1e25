package groupstate

import (
	"fmt"
	"iter"

	"github.com/groupstate/groupstate/abi"
)

// Module is one handler module: a registered handler (ABI v1) or processor (ABI v2, see
// [RegisterProcessor]), its init hooks, and the buffers of its calls. The WebAssembly exports drive a package-level default Module (the one [Handle],
// [HandleRaw] and [OnInit] register on); tests and benchmarks can create their own with
// [NewModule] and feed it ABI buffers with [Module.Init] and [Module.Process], running the
// same handler code natively.
//
// A Module is not safe for concurrent use: like a WebAssembly instance, it runs one call at a
// time, and the buffer a call returns is reused by the next.
type Module struct {
	handler RawHandler
	inits   []func(Config) error

	// v2 runs a transformWithState processor (ABI v2) when one is registered. It is an
	// interface set only by [RegisterProcessor], so the linker drops the ABI v2 code (and its
	// groupstate.state import) from modules that never register a processor.
	v2        v2Engine
	stateHost StateHost // replaces the state imports, see SetStateHost

	initialized bool
	config      Config

	in    abi.InputReader
	group abi.Group
	rows  iter.Seq[[]byte]
	g     RawGroup
	w     abi.ResultWriter
	enc   jsonEncoder
	errb  []byte // error messages of group results
	out   []byte // init results and call errors
}

// NewModule returns an empty Module; register a handler with [Module.HandleRaw] (or
// [HandleTyped]), or a processor with [RegisterProcessor], before calling [Module.Init].
func NewModule() *Module {
	m := &Module{}
	// abi.Group.Rows reads the group's fields when the iteration starts, so one iterator over
	// m.group serves every group without allocating.
	m.rows = m.group.Rows()
	m.g.rows = m.rows
	m.g.group = &m.group
	m.g.w = &m.w
	m.g.enc = &m.enc
	return m
}

// HandleRaw registers h as m's handler, replacing any earlier one. It panics when m already
// has a processor ([RegisterProcessor]): a module is either a flatMapGroupsWithState handler
// or a transformWithState processor.
func (m *Module) HandleRaw(h RawHandler) {
	if m.v2 != nil {
		panic(errBothKinds)
	}
	m.handler = h
}

// errBothKinds is the panic of registering a handler and a processor on one module.
const errBothKinds = "groupstate: a module has either a handler (groupstate.Handle, HandleRaw: ABI v1) " +
	"or a processor (groupstate.Process: ABI v2), not both"

// ABIVersion returns the ABI version m implements: 2 ([abi.Version2]) when a processor is
// registered ([RegisterProcessor]), else 1 ([abi.Version]).
func (m *Module) ABIVersion() uint32 {
	if m.v2 != nil {
		return abi.Version2
	}
	return abi.Version
}

// OnInit registers f to run once, in [Module.Init], after the init buffer is decoded and
// before any call of the handler. Functions run in registration order; an error (or a panic)
// fails the init with its message, and the host refuses to start the deployment.
func (m *Module) OnInit(f func(c Config) error) { m.inits = append(m.inits, f) }

// Config returns the config of the last successful [Module.Init].
func (m *Module) Config() Config { return m.config }

// Init takes an ABI init buffer (see [abi.AppendInit]) and returns an ABI init result buffer
// (see [abi.ParseInitResult]). The result is owned by m and valid until m's next call. Init
// checks the ABI version, decodes the config and runs the [Module.OnInit] functions; it may
// be called again to reconfigure m.
func (m *Module) Init(in []byte) []byte {
	if m.v2 != nil {
		return m.v2.initModule(in)
	}
	if err := m.init(in); err != nil {
		m.out = abi.AppendInitResult(m.out[:0], abi.StatusError, err.Error())
		return m.out
	}
	m.out = abi.AppendInitResult(m.out[:0], abi.StatusOK, "")
	return m.out
}

func (m *Module) init(b []byte) (err error) {
	m.initialized = false
	in, err := abi.ParseInit(b)
	if err != nil {
		return fmt.Errorf("groupstate: init: %w", err)
	}
	if v := m.ABIVersion(); in.ABIVersion != v {
		return fmt.Errorf("groupstate: host ABI version %d, module implements version %d", in.ABIVersion, v)
	}
	if in.Mode > abi.TimeoutEventTime {
		return fmt.Errorf("groupstate: unknown timeout mode %d", in.Mode)
	}
	// A v2 module refuses the flags it does not implement (abi/README.md 9.1), so that a host
	// with a newer layout does not have its rows misread; a v1 module ignores reserved bits.
	if unknown := in.Flags &^ v2InitFlags; m.v2 != nil && unknown != 0 {
		return fmt.Errorf("groupstate: host sets init flags %#x this SDK does not implement (rebuild with a newer SDK)", unknown)
	}
	if m.handler == nil && m.v2 == nil {
		return fmt.Errorf("groupstate: no handler registered (call groupstate.Handle or groupstate.HandleRaw in an init function)")
	}
	c, err := newConfig(in)
	if err != nil {
		return err
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("groupstate: panic in OnInit: %v", v)
		}
	}()
	for _, f := range m.inits {
		if err := f(c); err != nil {
			return err
		}
	}
	m.config = c
	m.initialized = true
	return nil
}

// Process takes an ABI process buffer (see [abi.AppendProcessHeader] and [abi.AppendGroup]),
// runs the handler once per group, in order, and returns an ABI result buffer with one result
// per group (see [abi.ResultReader]). The result is owned by m and valid until m's next call.
//
// A handler error or panic fails only its group. A malformed buffer, or a call before a
// successful [Module.Init], fails the whole call (see [abi.AppendCallError]).
func (m *Module) Process(in []byte) []byte {
	if m.v2 != nil {
		return m.v2.process(in)
	}
	if !m.initialized {
		return m.callError("groupstate: process called before a successful init")
	}
	if err := m.in.Reset(in); err != nil {
		return m.callError("groupstate: process buffer: " + err.Error())
	}
	m.w.Reset()
	setGroupCell(noGroup)
	defer setGroupCell(noGroup)
	for i := 0; i >= 0; {
		var msg string
		if i, msg = m.runGroups(i); msg != "" {
			return m.callError(msg)
		}
	}
	return m.w.Bytes()
}

// noGroup is the group cell's value outside any group.
const noGroup = ^uint32(0)

// runGroups runs the handler for group i and the groups after it, reading them from m.in, and
// returns -1 after the last one, or a whole-call error message for a malformed buffer. A panic
// in the handler fails only its group: runGroups then writes that group's result and returns
// the index of the next group, for Process to go on from there. One deferred recover per call
// rather than one per group: under WebAssembly every call costs, and the loop stays flat.
func (m *Module) runGroups(i int) (next int, callErr string) {
	g := &m.g
	defer func() {
		if v := recover(); v != nil {
			m.endGroup(fmt.Errorf("panic: %v", v))
			next = g.index + 1
		}
	}()
	h := m.in.Header()
	hasWM := m.config.hasWatermark
	for ; ; i++ {
		ok, err := m.in.Next(&m.group)
		if err != nil {
			return -1, fmt.Sprintf("groupstate: process buffer: group %d: %v", i, err)
		}
		if !ok {
			return -1, ""
		}
		setGroupCell(uint32(i))
		g.index = i
		g.key = Key{raw: m.group.Key}
		g.count = int(m.group.RowCount)
		g.err = nil
		g.state.reset(&m.group, h, m.config.mode, hasWM)
		m.w.BeginGroup()
		m.endGroup(m.handler(g))
	}
}

// endGroup writes the result of the group in progress, failed with err (or with the failure
// the typed layer recorded) when there is one.
func (m *Module) endGroup(err error) {
	g := &m.g
	if err == nil {
		err = g.err
	}
	var r abi.GroupResult
	if err != nil {
		r.Status = abi.StatusError
		m.errb = append(m.errb[:0], err.Error()...)
		r.Error = m.errb
	} else {
		g.state.result(&r)
	}
	m.w.EndGroup(r)
}

func (m *Module) callError(msg string) []byte {
	m.out = abi.AppendCallError(m.out[:0], msg)
	return m.out
}

// v2InitFlags are the init flags a processor's module implements.
const v2InitFlags = abi.InitHasWatermark | abi.InitHasInputs

// defaultModule is the Module the WebAssembly exports drive.
var defaultModule = NewModule()

// HandleRaw registers h as the handler of the module. Call it (or [Handle]) once, from an init
// function of package main.
func HandleRaw(h RawHandler) { defaultModule.HandleRaw(h) }

// OnInit registers f to run once per instance, after the host's init and before any call of
// the handler, with the deployment's config. An error fails the init with its message. Call
// it from an init function of package main.
func OnInit(f func(c Config) error) { defaultModule.OnInit(f) }
