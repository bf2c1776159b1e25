// Package hostile builds the hostile-module corpus: small hand-assembled WebAssembly modules
// that do what an attacker (or a user with a bug) would do to the runtime through its sandbox:
// recursion without loops, endless loops, stack overflows, memory and table growth, floods of
// output, state writes and logs, and modules that are costly to load. Each module is an ABI
// handler whose hostility is confined to the keys that start with "x" (or to its
// initialization), so a test can check that the other keys of a batch are processed.
//
// The generator (package hostile/gen, `make fixtures`) writes each module of [Corpus] that is
// small enough to commit to runtime/internal/host/testdata/hostile as NAME.wasm, beside
// NAME.wat, a listing of its code in the text format's instruction names; the tests build the
// large ones ([Module.Committed] false) from this package at run time.
package hostile

import (
	"fmt"
	"strings"

	"github.com/groupstate/groupstate/internal/leb"
)

// asm assembles one function body and keeps its listing.
type asm struct {
	code    []byte
	listing strings.Builder
	depth   int
}

func (a *asm) emit(text string, b ...byte) *asm {
	if strings.HasPrefix(text, "end") || strings.HasPrefix(text, "else") {
		a.depth--
	}
	fmt.Fprintf(&a.listing, "    %s%s\n", strings.Repeat("  ", max(a.depth, 0)), text)
	if strings.HasPrefix(text, "block") || strings.HasPrefix(text, "loop") || strings.HasPrefix(text, "if") || strings.HasPrefix(text, "else") {
		a.depth++
	}
	a.code = append(a.code, b...)
	return a
}

func (a *asm) i32(v int32) *asm {
	return a.emit(fmt.Sprintf("i32.const %d", v), append([]byte{0x41}, sleb(int64(v))...)...)
}
func (a *asm) i64(v int64) *asm {
	return a.emit(fmt.Sprintf("i64.const %d", v), append([]byte{0x42}, sleb(v)...)...)
}
func (a *asm) get(i uint32) *asm {
	return a.emit(fmt.Sprintf("local.get %d", i), append([]byte{0x20}, uleb(i)...)...)
}
func (a *asm) set(i uint32) *asm {
	return a.emit(fmt.Sprintf("local.set %d", i), append([]byte{0x21}, uleb(i)...)...)
}
func (a *asm) call(f uint32) *asm {
	return a.emit(fmt.Sprintf("call %d", f), append([]byte{0x10}, uleb(f)...)...)
}
func (a *asm) load32(off uint32) *asm {
	return a.emit(fmt.Sprintf("i32.load offset=%d", off), append([]byte{0x28, 0x00}, uleb(off)...)...)
}
func (a *asm) load8u(off uint32) *asm {
	return a.emit(fmt.Sprintf("i32.load8_u offset=%d", off), append([]byte{0x2d, 0x00}, uleb(off)...)...)
}
func (a *asm) store32(off uint32) *asm {
	return a.emit(fmt.Sprintf("i32.store offset=%d", off), append([]byte{0x36, 0x00}, uleb(off)...)...)
}
func (a *asm) store8(off uint32) *asm {
	return a.emit(fmt.Sprintf("i32.store8 offset=%d", off), append([]byte{0x3a, 0x00}, uleb(off)...)...)
}
func (a *asm) block() *asm { return a.emit("block", 0x02, 0x40) }
func (a *asm) loop() *asm  { return a.emit("loop", 0x03, 0x40) }
func (a *asm) if_() *asm   { return a.emit("if", 0x04, 0x40) }
func (a *asm) ifI32() *asm { return a.emit("if (result i32)", 0x04, 0x7f) }
func (a *asm) else_() *asm { return a.emit("else", 0x05) }
func (a *asm) end() *asm   { return a.emit("end", 0x0b) }
func (a *asm) br(d uint32) *asm {
	return a.emit(fmt.Sprintf("br %d", d), append([]byte{0x0c}, uleb(d)...)...)
}
func (a *asm) brIf(d uint32) *asm {
	return a.emit(fmt.Sprintf("br_if %d", d), append([]byte{0x0d}, uleb(d)...)...)
}
func (a *asm) ret() *asm         { return a.emit("return", 0x0f) }
func (a *asm) drop() *asm        { return a.emit("drop", 0x1a) }
func (a *asm) unreachable() *asm { return a.emit("unreachable", 0x00) }
func (a *asm) add() *asm         { return a.emit("i32.add", 0x6a) }
func (a *asm) sub() *asm         { return a.emit("i32.sub", 0x6b) }
func (a *asm) eqz() *asm         { return a.emit("i32.eqz", 0x45) }
func (a *asm) eq() *asm          { return a.emit("i32.eq", 0x46) }
func (a *asm) geU() *asm         { return a.emit("i32.ge_u", 0x4f) }
func (a *asm) memGrow() *asm     { return a.emit("memory.grow", 0x40, 0x00) }
func (a *asm) i64ExtendU() *asm  { return a.emit("i64.extend_i32_u", 0xad) }
func (a *asm) i64Shl() *asm      { return a.emit("i64.shl", 0x86) }
func (a *asm) i64Or() *asm       { return a.emit("i64.or", 0x84) }
func (a *asm) refNullFunc() *asm { return a.emit("ref.null func", 0xd0, 0x70) }
func (a *asm) tableGrow(t uint32) *asm {
	return a.emit(fmt.Sprintf("table.grow %d", t), append([]byte{0xfc, 0x0f}, uleb(t)...)...)
}
func (a *asm) memCopy() *asm { return a.emit("memory.copy", 0xfc, 0x0a, 0x00, 0x00) }
func (a *asm) memFill() *asm { return a.emit("memory.fill", 0xfc, 0x0b, 0x00) }

// packed pushes the i64 (ptr << 32) | len of a result buffer (abi/README.md 3.3), ptr and
// len being pushed by pushPtr and pushLen.
func (a *asm) packed(pushPtr, pushLen func(*asm)) *asm {
	pushPtr(a)
	a.i64ExtendU().i64(32).i64Shl()
	pushLen(a)
	return a.i64ExtendU().i64Or()
}

func uleb(v uint32) []byte { return leb.AppendU32(nil, v) }

func sleb(v int64) []byte { return leb.AppendS64(nil, v) }
