package host

import (
	"errors"
	"fmt"
	"slices"
)

// Interrupting guest code.
//
// A guest goroutine running compiled code cannot be preempted by the Go scheduler: compiled
// code has no safepoints, so code that never returns to Go stalls the next stop-the-world (a
// garbage collection) and with it every goroutine of the process. wazero's
// WithCloseOnContextDone leaves compiled code at loop headers only, so branching recursion
// escapes it, and it costs about 3x in guest time (RATIONALE.md). Instead, instrument rewrites
// the module once, at load time, the way wasmtime's epoch interruption works: it adds two
// mutable i32 globals, a stop flag exported as [StopGlobal] and a counter, and inserts
// [check] at the start of every loop body and at the entry of every function that calls
// another (a function that calls nothing runs at most its own length, loops aside, so every
// unbounded execution passes one of the two: a loop or a chain of calls). The check counts
// down and, every [fuelPerYield] passes, leaves compiled code for a moment (so the goroutine
// can be preempted) and traps if the stop flag is set. The host sets the flag when a call's
// deadline passes or its context is done.
//
// The module's start function, which wazero would run inside instantiation where no flag can
// be set yet, is turned into an export ([StartExport]) that the host calls, within the time
// limit, right after instantiation, as the start section would have. A module the
// instrumenter cannot rewrite (an instruction it does not know, a malformed body) is refused:
// no module runs without the checks.

// StopGlobal is the name under which instrumented modules export the stop flag.
const StopGlobal = "__groupstate_stop"

// StackGlobal is the name under which instrumented modules export the estimate of their call
// stack's size (LoadLimits.StackBytes), which the host resets before each call.
const StackGlobal = "__groupstate_stack"

// StartExport is the name under which instrumented modules export their start function (the
// function of their start section, which the instrumented module no longer has).
const StartExport = "__groupstate_start"

// errUnknownInstruction is wrapped by the error of a body with an instruction the scanner
// does not know.
var errUnknownInstruction = errors.New("an instruction the runtime's instrumenter does not know")

// instrumented is a module rewritten with interruption checks.
type instrumented struct {
	wasm     []byte // the rewritten module
	hasStart bool   // it exports StartExport, to be called after instantiation
}

// instrument checks wasm against lim (loading.go) and rewrites it with interruption checks.
// The result is deterministic in its input. An error wraps ErrInvalidModule (a module that
// cannot be rewritten) or ErrLoadLimit (a module beyond a limit) and says why.
func instrument(wasm []byte, lim LoadLimits) (res instrumented, err error) {
	defer func() {
		if r := recover(); r != nil { // a truncated or malformed module
			res, err = instrumented{}, fmt.Errorf("%w: malformed module: %v", ErrInvalidModule, r)
		}
	}()
	lim = lim.withDefaults()
	if len(wasm) > lim.ModuleBytes {
		return res, lim.exceeded("the module is %d bytes", len(wasm), "module size", lim.ModuleBytes)
	}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return res, fmt.Errorf("%w: not a WebAssembly binary (it does not start with \\0asm)", ErrInvalidModule)
	}
	if wasm[4] != 1 || wasm[5] != 0 || wasm[6] != 0 || wasm[7] != 0 {
		return res, fmt.Errorf("%w: WebAssembly binary version %x, want 1", ErrInvalidModule, wasm[4:8])
	}
	sections := splitSections(wasm)
	m, err := scanDeclarations(sections, lim)
	if err != nil {
		return res, err
	}
	g := globals{stop: m.importedGlobals + m.globals}
	g.counter, g.stack = g.stop+1, g.stop+2
	g.slow = m.importedFuncs + uint32(len(m.params))   // appended after the module's functions
	newGlobals := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b} // stop: i32, mutable, i32.const 0, end
	newGlobals = append(newGlobals, 0x7f, 0x01, 0x41)  // counter: i32, mutable, i32.const N, end
	newGlobals = appendSleb(newGlobals, fuelPerYield)
	newGlobals = append(newGlobals, 0x0b)
	newGlobals = append(newGlobals, 0x7f, 0x01, 0x41, 0x00, 0x0b) // stack: i32, mutable, i32.const 0, end
	newExports := exportEntry(nil, StopGlobal, 0x03, g.stop)
	newExports = exportEntry(newExports, StackGlobal, 0x03, g.stack)
	nNewExports := uint32(2)
	if m.hasStart {
		newExports = exportEntry(newExports, StartExport, 0x00, m.start)
		nNewExports++
		res.hasStart = true
	}

	// The rewritten sections, with the global and export sections made when the module has
	// none, each in its place in the required order.
	var out []section
	for _, s := range sections {
		switch s.id {
		case sectionGlobal:
			r := &wreader{b: s.content}
			n := r.u32()
			s.content = append(append(appendU32(nil, n+3), s.content[r.off:]...), newGlobals...)
		case sectionExport:
			r := &wreader{b: s.content}
			n := r.u32()
			s.content = append(append(appendU32(nil, n+nNewExports), s.content[r.off:]...), newExports...)
		case sectionStart:
			continue // exported instead (StartExport)
		case sectionTable:
			s.content = clampTables(s.content, lim.TableElements)
		case sectionType: // the slow path's type, [] -> [], last
			r := &wreader{b: s.content}
			n := r.u32()
			s.content = append(append(appendU32(nil, n+1), s.content[r.off:]...), 0x60, 0x00, 0x00)
		case sectionFunction: // the slow path, last (a module without functions gets one below)
			r := &wreader{b: s.content}
			n := r.u32()
			s.content = appendU32(append(appendU32(nil, n+1), s.content[r.off:]...), m.types)
		case sectionCode:
			s.content, err = instrumentCode(s.content, m, g, lim)
			if err != nil {
				return res, err
			}
		}
		out = append(out, s)
	}
	if !m.hasGlobals {
		out = insertSection(out, section{sectionGlobal, append(appendU32(nil, 3), newGlobals...)})
	}
	if !m.hasExports {
		out = insertSection(out, section{sectionExport, append(appendU32(nil, nNewExports), newExports...)})
	}
	// A module without a type, function or code section gets one holding the slow path's
	// (the cases above added it to those it has).
	has := func(id byte) bool {
		return slices.ContainsFunc(out, func(s section) bool { return s.id == id })
	}
	if !has(sectionType) {
		out = insertSection(out, section{sectionType, []byte{0x01, 0x60, 0x00, 0x00}})
	}
	if !has(sectionFunction) {
		out = insertSection(out, section{sectionFunction, appendU32([]byte{0x01}, m.types)})
	}
	if !has(sectionCode) {
		slow := slowPath(g.stop, g.counter)
		out = insertSection(out, section{sectionCode, append(appendU32([]byte{0x01}, uint32(len(slow))), slow...)})
	}
	w := append([]byte(nil), wasm[:8]...)
	for _, s := range out {
		w = append(w, s.id)
		w = appendU32(w, uint32(len(s.content)))
		w = append(w, s.content...)
	}
	res.wasm = w
	return res, nil
}

// exportEntry appends an export of kind (0 function, 3 global) and index named name.
func exportEntry(b []byte, name string, kind byte, index uint32) []byte {
	b = appendU32(b, uint32(len(name)))
	b = append(b, name...)
	b = append(b, kind)
	return appendU32(b, index)
}

// clampTables lowers every defined table's maximum to limit (the scan refused a minimum
// above it), so table.grow beyond it fails (returns -1) instead of allocating host memory.
func clampTables(content []byte, limit uint32) []byte {
	r := &wreader{b: content}
	n := r.u32()
	out := appendU32(nil, n)
	for range n {
		out = append(out, r.byte()) // reference type
		_, min, max, hasMax := r.limits()
		if !hasMax || max > limit {
			max = limit
		}
		out = append(out, 0x01)
		out = appendU32(out, min)
		out = appendU32(out, max)
	}
	return out
}

// fuelPerYield is how many checks pass between two yields to the host.
const fuelPerYield int64 = 1 << 16

// check is inserted at the start of every loop body and at the entry of every function that
// calls another: count down, and every fuelPerYield passes call the slow path (slowPath). It
// is one `if` around one call, so that the compiler, whose time grows with a function's
// blocks, pays little for it.
func check(counter, slow uint32) []byte {
	g := func(op byte, idx uint32) []byte { return append([]byte{op}, appendU32(nil, idx)...) }
	var c []byte
	c = append(c, g(0x23, counter)...) // global.get counter
	c = append(c, 0x41, 0x01, 0x6b)    // i32.const 1; i32.sub
	c = append(c, g(0x24, counter)...) // global.set counter
	c = append(c, g(0x23, counter)...) // global.get counter
	c = append(c, 0x45, 0x04, 0x40)    // i32.eqz; if
	c = append(c, g(0x10, slow)...)    //   call slow
	return append(c, 0x0b)             // end
}

// slowPath is the body of the function the checks call every fuelPerYield passes: reset the
// counter, leave compiled code (memory.grow 0 returns to the Go side of wazero, where the Go
// scheduler and garbage collector can stop the goroutine), then trap if the stop flag is set.
func slowPath(stop, counter uint32) []byte {
	g := func(op byte, idx uint32) []byte { return append([]byte{op}, appendU32(nil, idx)...) }
	c := []byte{0x00, 0x41} // no locals; i32.const N
	c = appendSleb(c, fuelPerYield)
	c = append(c, g(0x24, counter)...)    // global.set counter
	c = append(c, 0x41, 0x00)             // i32.const 0
	c = append(c, 0x40, 0x00, 0x1a)       // memory.grow 0; drop
	c = append(c, g(0x23, stop)...)       // global.get stop
	c = append(c, 0x04, 0x40, 0x00, 0x0b) // if unreachable end
	return append(c, 0x0b)                // end
}

// globals are the indexes of the globals the instrumenter adds.
type globals struct {
	stop, counter uint32
	stack         uint32 // the estimate of the call stack's size
	slow          uint32 // the function of slowPath
}

// instrumentCode rewrites the code section: each body gets check at its loop headers, and at
// its entry when it calls; a body that calls also counts its frame into the stack estimate
// (frame). It enforces the limits of one body (loading.go); function indexes in errors count
// the imported functions, as the binary format does.
func instrumentCode(content []byte, m declarations, g globals, lim LoadLimits) ([]byte, error) {
	importedFuncs := m.importedFuncs
	r := &wreader{b: content}
	n := r.u32()
	if int(n) != len(m.params) {
		return nil, fmt.Errorf("%w: %d function bodies for %d functions", ErrInvalidModule, n, len(m.params))
	}
	out := appendU32(nil, n+1) // and the slow path, last
	chk := check(g.counter, g.slow)
	var body []byte
	var work int64 // the sum of the squares of the functions' branches
	for i := range n {
		fn := importedFuncs + i
		size := int(r.u32())
		if size > lim.FunctionBytes {
			return nil, lim.exceeded(fmt.Sprintf("function %d's body is %%d bytes", fn), size, "function body size", lim.FunctionBytes)
		}
		end := r.off + size
		fr := &wreader{b: r.b[:end], off: r.off}
		body = body[:0]
		start := fr.off
		groups := fr.u32()
		groupsEnd := fr.off // the groups' count may be written in more bytes than it needs
		var locals uint64
		for range groups {
			locals += uint64(fr.u32())
			fr.byte()
		}
		if locals > uint64(lim.Locals) {
			return nil, lim.exceeded(fmt.Sprintf("function %d declares %%d locals", fn), int(min(locals, 1<<31)), "locals per function", lim.Locals)
		}
		// The frame's local, added after the others (used only if the body calls), and the
		// frame's weight in the stack estimate.
		fl := frame{local: m.params[i] + uint32(locals), stack: g.stack, weight: 32 + 8*int32(m.params[i]+uint32(locals)), limit: int32(lim.StackBytes)}
		localsAt := len(body)
		body = append(body, fr.b[start:fr.off]...)
		entry := len(body)
		calls := false
		depth, branches := 1, 0
		for fr.off < end {
			from := fr.off
			op := fr.byte()
			switch op {
			case 0x02, 0x03, 0x04: // block loop if
				depth++
				if depth > lim.Nesting {
					return nil, lim.exceeded(fmt.Sprintf("function %d nests blocks %%d deep", fn), depth, "block nesting", lim.Nesting)
				}
			case 0x0b: // end
				depth--
			case 0x10, 0x11: // call call_indirect
				calls = true
			}
			targets, err := skipImmediates(fr, op)
			if err != nil {
				return nil, fmt.Errorf("%w: function %d, offset %d: %w (the runtime refuses a module it cannot interrupt)", ErrInvalidModule, fn, from, err)
			}
			branches += targets
			if branches > lim.Branches {
				return nil, lim.exceeded(fmt.Sprintf("function %d has %%d branches", fn), branches, "branches per function", lim.Branches)
			}
			switch op {
			case 0x10, 0x11: // after a call, the stack is this frame's again
				body = append(body, fr.b[from:fr.off]...)
				body = append(body, fl.restore()...)
			case 0x03:
				body = append(body, fr.b[from:fr.off]...)
				body = append(body, chk...)
			default:
				body = append(body, fr.b[from:fr.off]...)
			}
		}
		if depth != 0 {
			return nil, fmt.Errorf("%w: function %d: unbalanced blocks", ErrInvalidModule, fn)
		}
		if work += int64(branches) * int64(branches); work > lim.BranchWork {
			return nil, fmt.Errorf("%w: the module's functions up to function %d have %d branch work (the sum of the squares of each function's branches, a loop counting %d, which the compiler's time follows); the branch work limit is %d", ErrLoadLimit, fn, work, loopWeight, lim.BranchWork)
		}
		if calls {
			prologue := append(append([]byte(nil), chk...), fl.enter()...)
			head := appendU32(nil, groups+1) // the locals with the frame's
			head = append(head, body[localsAt+(groupsEnd-start):entry]...)
			head = append(head, 0x01, 0x7f)
			body = append(append(append(body[:0:0], body[:localsAt]...), head...), append(prologue, body[entry:]...)...)
		}
		r.off = end
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	slow := slowPath(g.stop, g.counter)
	out = appendU32(out, uint32(len(slow)))
	return append(out, slow...), nil
}

// frame is how a body that calls others counts its frame into the stack estimate: at entry
// it adds weight to the global stack, keeps the result in its local, and traps when that
// passes limit; after each call it sets the global back to its local (however the callee
// left it). (Tail calls, which would need the weight taken off first, are refused: wazero
// does not run them by default.)
type frame struct {
	local, stack  uint32
	weight, limit int32
}

func (f frame) enter() []byte {
	c := append([]byte{0x23}, appendU32(nil, f.stack)...) // global.get stack
	c = append(c, 0x41)                                   // i32.const weight
	c = appendSleb(c, int64(f.weight))
	c = append(c, 0x6a, 0x22)                      // i32.add; local.tee
	c = appendU32(c, f.local)                      //
	c = append(c, 0x24)                            // global.set stack
	c = appendU32(c, f.stack)                      //
	c = append(c, 0x20)                            // local.get
	c = appendU32(c, f.local)                      //
	c = append(c, 0x41)                            // i32.const limit
	c = appendSleb(c, int64(f.limit))              //
	return append(c, 0x4b, 0x04, 0x40, 0x00, 0x0b) // i32.gt_u; if unreachable end
}

func (f frame) restore() []byte {
	c := append([]byte{0x20}, appendU32(nil, f.local)...) // local.get
	c = append(c, 0x24)                                   // global.set stack
	return appendU32(c, f.stack)
}

// loopWeight is what a loop counts among a function's branches (LoadLimits.Branches): the
// loop and its check's if and call, which the compiler's time grows with as with branches.
const loopWeight = 3

// skipImmediates advances r past the immediates of op and returns what the instruction counts
// among the function's branches (br, br_if and if one, br_table its table's targets, a loop
// loopWeight).
func skipImmediates(r *wreader, op byte) (branches int, err error) {
	switch {
	case op == 0x02: // block
		r.blockType()
	case op == 0x03: // loop: its check adds an if and a call, which cost the compiler too
		r.blockType()
		return loopWeight, nil
	case op == 0x04: // if
		r.blockType()
		return 1, nil
	case op == 0x0c || op == 0x0d: // br br_if
		r.u32()
		return 1, nil
	case op == 0x0e: // br_table
		n := r.u32()
		for range n + 1 {
			r.u32()
		}
		return int(n) + 1, nil
	case op == 0x10: // call
		r.u32()
	case op == 0x11: // call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		n := r.u32()
		for range n {
			r.byte()
		}
	case op >= 0x20 && op <= 0x26: // local.* global.* table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f || op == 0x40: // memory.size memory.grow
		r.u32()
	case op == 0x41 || op == 0x42: // i32.const i64.const
		r.sleb()
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null t
		r.byte()
	case op == 0xd2: // ref.func
		r.u32()
	case op == 0xfc:
		switch sub := r.u32(); {
		case sub <= 7: // saturating truncation
		case sub == 8: // memory.init data mem
			r.u32()
			r.u32()
		case sub == 9: // data.drop
			r.u32()
		case sub == 10: // memory.copy
			r.u32()
			r.u32()
		case sub == 11: // memory.fill
			r.u32()
		case sub == 12 || sub == 14: // table.init, table.copy
			r.u32()
			r.u32()
		case sub == 13 || sub == 15 || sub == 16 || sub == 17: // elem.drop table.grow/size/fill
			r.u32()
		default:
			return 0, fmt.Errorf("%w (0xfc %d)", errUnknownInstruction, sub)
		}
	case op == 0xfd: // SIMD
		switch sub := r.u32(); {
		case sub <= 11 || sub == 92 || sub == 93: // loads and stores
			r.memarg()
		case sub == 12 || sub == 13: // v128.const i8x16.shuffle
			r.bytes(16)
		case sub >= 21 && sub <= 34: // extract_lane replace_lane
			r.byte()
		case sub >= 84 && sub <= 91: // load_lane store_lane
			r.memarg()
			r.byte()
		case sub <= 255: // the rest of SIMD has no immediates
		default:
			return 0, fmt.Errorf("%w (0xfd %d)", errUnknownInstruction, sub)
		}
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		(op >= 0x45 && op <= 0xc4) || op == 0xd1:
		// no immediates
	default:
		// Exceptions (0x06-0x09, 0x18, 0x19), tail calls (0x12, 0x13), threads (0xfe), GC and
		// the rest: wazero runs none of them by default.
		return 0, fmt.Errorf("%w (%#x)", errUnknownInstruction, op)
	}
	return 0, nil
}
