package host

import (
	"errors"
)

// Interrupting guest calls.
//
// wazero's WithCloseOnContextDone makes a call stoppable by leaving compiled code at every
// loop header, which costs about 3x in guest time (RATIONALE.md). Instead, instrument rewrites
// the module once, at load time: it adds two mutable i32 globals, a stop flag exported as
// [StopGlobal] and an iteration counter, and at the start of every loop body inserts
// [loopCheck]: count down, and every [fuelPerYield] iterations leave compiled code for a
// moment (so the Go runtime can preempt the goroutine) and trap if the stop flag is set.
//
// The host sets the flag when a call's deadline passes (or its context is done), and the
// guest traps within fuelPerYield iterations. Code without loops ends by itself (recursion
// ends in a stack overflow trap). A module that uses an instruction the scanner does not know
// is left as it is, and the host falls back to wazero's checks.

// StopGlobal is the name under which instrumented modules export the stop flag.
const StopGlobal = "__groupstate_stop"

var errUnknownInstruction = errors.New("host: instruction not known to the instrumenter")

// instrument returns wasm with stop checks at loop headers, or ok=false when it cannot (an
// unknown instruction or section layout); the result is deterministic in its input.
func instrument(wasm []byte) (out []byte, ok bool) {
	defer func() {
		if recover() != nil { // a malformed module: let the compiler report it
			out, ok = nil, false
		}
	}()
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || wasm[4] != 1 {
		return nil, false
	}
	type section struct {
		id      byte
		content []byte
	}
	var sections []section
	r := &wreader{b: wasm, off: 8}
	for r.off < len(r.b) {
		id := r.byte()
		n := int(r.u32())
		sections = append(sections, section{id, r.bytes(n)})
	}
	importedGlobals, globals := uint32(0), uint32(0)
	hasGlobalSection := false
	for _, s := range sections {
		switch s.id {
		case 2:
			importedGlobals = countImportedGlobals(s.content)
		case 6:
			hasGlobalSection = true
			globals = (&wreader{b: s.content}).u32()
		case 7:
			if exportsName(s.content, StopGlobal) {
				return nil, false
			}
		}
	}
	stop := importedGlobals + globals
	fuel := stop + 1
	newGlobals := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b} // stop: i32, mutable, i32.const 0, end
	newGlobals = append(newGlobals, 0x7f, 0x01, 0x41)  // fuel: i32, mutable, i32.const N, end
	newGlobals = appendSleb(newGlobals, fuelPerYield)
	newGlobals = append(newGlobals, 0x0b)

	var w []byte
	w = append(w, wasm[:8]...)
	emit := func(id byte, content []byte) {
		w = append(w, id)
		w = appendU32(w, uint32(len(content)))
		w = append(w, content...)
	}
	placedGlobal := false
	for _, s := range sections {
		// The global section comes after memory (5) and tag (13) and before export (7).
		if !hasGlobalSection && !placedGlobal && s.id != 0 && order(s.id) > order(6) {
			emit(6, append(appendU32(nil, 2), newGlobals...))
			placedGlobal = true
		}
		switch s.id {
		case 6:
			r := &wreader{b: s.content}
			n := r.u32()
			emit(6, append(append(appendU32(nil, n+2), s.content[r.off:]...), newGlobals...))
		case 7:
			r := &wreader{b: s.content}
			n := r.u32()
			c := appendU32(nil, n+1)
			c = append(c, s.content[r.off:]...)
			c = appendU32(c, uint32(len(StopGlobal)))
			c = append(c, StopGlobal...)
			c = append(c, 0x03) // global
			c = appendU32(c, stop)
			emit(7, c)
		case 10:
			c, err := instrumentCode(s.content, stop, fuel)
			if err != nil {
				return nil, false
			}
			emit(10, c)
		default:
			emit(s.id, s.content)
		}
	}
	return w, true
}

// order is the position of a section id in the required order of the binary format.
func order(id byte) int {
	switch id {
	case 13: // tag, between memory and global
		return 55
	case 12: // data count, between element and code
		return 95
	}
	return int(id) * 10
}

func countImportedGlobals(content []byte) uint32 {
	r := &wreader{b: content}
	n := r.u32()
	var globals uint32
	for range n {
		r.name()
		r.name()
		switch r.byte() {
		case 0x00: // func
			r.u32()
		case 0x01: // table
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			panic("unknown import kind")
		}
	}
	return globals
}

func exportsName(content []byte, name string) bool {
	r := &wreader{b: content}
	n := r.u32()
	for range n {
		if r.name() == name {
			return true
		}
		r.byte()
		r.u32()
	}
	return false
}

// fuelPerYield is how many loop iterations run between two yields to the host.
const fuelPerYield int64 = 1 << 16

// loopCheck is inserted at the start of every loop body: count the iteration down, and every
// fuelPerYield iterations leave compiled code (memory.grow 0 returns to the Go side of wazero,
// where the Go scheduler and garbage collector can stop the goroutine: compiled code has no
// safepoints, and a loop that never leaves it would block the whole process at the next
// stop-the-world), then trap if the stop flag is set.
func loopCheck(stop, fuel uint32) []byte {
	g := func(op byte, idx uint32) []byte { return append([]byte{op}, appendU32(nil, idx)...) }
	var c []byte
	c = append(c, g(0x23, fuel)...)       // global.get fuel
	c = append(c, 0x41, 0x01, 0x6b)       // i32.const 1; i32.sub
	c = append(c, g(0x24, fuel)...)       // global.set fuel
	c = append(c, g(0x23, fuel)...)       // global.get fuel
	c = append(c, 0x45, 0x04, 0x40)       // i32.eqz; if
	c = append(c, 0x41)                   //   i32.const N
	c = appendSleb(c, fuelPerYield)       //
	c = append(c, g(0x24, fuel)...)       //   global.set fuel
	c = append(c, 0x41, 0x00)             //   i32.const 0
	c = append(c, 0x40, 0x00, 0x1a)       //   memory.grow 0; drop
	c = append(c, g(0x23, stop)...)       //   global.get stop
	c = append(c, 0x04, 0x40, 0x00, 0x0b) // if unreachable end
	return append(c, 0x0b)                // end
}

// instrumentCode rewrites the code section.
func instrumentCode(content []byte, stop, fuel uint32) ([]byte, error) {
	r := &wreader{b: content}
	n := r.u32()
	out := appendU32(nil, n)
	check := loopCheck(stop, fuel)
	var body []byte
	for range n {
		size := int(r.u32())
		end := r.off + size
		fr := &wreader{b: r.b[:end], off: r.off}
		body = body[:0]
		// locals
		start := fr.off
		locals := fr.u32()
		for range locals {
			fr.u32()
			fr.byte()
		}
		body = append(body, fr.b[start:fr.off]...)
		for fr.off < end {
			from := fr.off
			op := fr.byte()
			isLoop := op == 0x03
			if err := skipImmediates(fr, op); err != nil {
				return nil, err
			}
			body = append(body, fr.b[from:fr.off]...)
			if isLoop {
				body = append(body, check...)
			}
		}
		r.off = end
		out = appendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out, nil
}

// skipImmediates advances r past the immediates of op.
func skipImmediates(r *wreader, op byte) error {
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04 || op == 0x06: // block loop if try
		r.blockType()
	case op == 0x07 || op == 0x08 || op == 0x09 || op == 0x18: // catch throw rethrow delegate
		r.u32()
	case op == 0x0c || op == 0x0d: // br br_if
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for range n + 1 {
			r.u32()
		}
	case op == 0x10 || op == 0x12: // call return_call
		r.u32()
	case op == 0x11 || op == 0x13: // call_indirect return_call_indirect
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
	case op == 0x41:
		r.sleb()
	case op == 0x42:
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
			return errUnknownInstruction
		}
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x19 || op == 0x1a || op == 0x1b ||
		(op >= 0x45 && op <= 0xc4) || op == 0xd1:
		// no immediates
	default:
		return errUnknownInstruction // SIMD (0xfd), threads (0xfe), GC and the rest
	}
	return nil
}

// wreader reads the binary format; it panics on truncated input (instrument recovers).
type wreader struct {
	b   []byte
	off int
}

func (r *wreader) byte() byte {
	c := r.b[r.off]
	r.off++
	return c
}

func (r *wreader) bytes(n int) []byte {
	v := r.b[r.off : r.off+n]
	r.off += n
	return v
}

func (r *wreader) u32() uint32 {
	var v uint32
	for shift := 0; ; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
		if shift > 28 {
			panic("uleb too long")
		}
	}
}

func (r *wreader) sleb() {
	for i := 0; ; i++ {
		if r.byte()&0x80 == 0 {
			return
		}
		if i > 10 {
			panic("sleb too long")
		}
	}
}

func (r *wreader) name() string {
	n := int(r.u32())
	return string(r.bytes(n))
}

func (r *wreader) limits() {
	flags := r.byte()
	r.u32()
	if flags&0x01 != 0 {
		r.u32()
	}
}

func (r *wreader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.u32()
}

func (r *wreader) blockType() {
	c := r.b[r.off]
	if c == 0x40 || (c >= 0x6f && c <= 0x7f) {
		r.off++
		return
	}
	r.sleb() // a type index as s33
}

func appendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
