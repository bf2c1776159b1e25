package host

// A reader and writers of the WebAssembly binary format, for the module checks (loading.go)
// and the instrumenter (interrupt.go).

import (
	"fmt"

	"github.com/groupstate/groupstate/internal/leb"
)

// The sections the checks and the instrumenter read or write.
const (
	sectionCustom   byte = 0
	sectionType     byte = 1
	sectionImport   byte = 2
	sectionFunction byte = 3
	sectionTable    byte = 4
	sectionMemory   byte = 5
	sectionGlobal   byte = 6
	sectionExport   byte = 7
	sectionStart    byte = 8
	sectionElement  byte = 9
	sectionCode     byte = 10
	sectionData     byte = 11
)

// section is one section of a module: its id and its content (without id and size).
type section struct {
	id      byte
	content []byte
}

// splitSections splits a module (its header checked by the caller) into its sections; it
// panics on a truncated one.
func splitSections(wasm []byte) []section {
	var out []section
	r := &wreader{b: wasm, off: 8}
	for r.off < len(r.b) {
		id := r.byte()
		n := int(r.u32())
		out = append(out, section{id, r.bytes(n)})
	}
	return out
}

// insertSection inserts s into sections at its place in the required order (after the
// custom sections that follow the section before it).
func insertSection(sections []section, s section) []section {
	at := len(sections)
	for i, t := range sections {
		if t.id != sectionCustom && order(t.id) > order(s.id) {
			at = i
			break
		}
	}
	return append(sections[:at], append([]section{s}, sections[at:]...)...)
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

// limits reads a table's or a memory's limits. Flags other than "has a maximum" (shared
// memories, 64-bit indexes) panic: the runtime runs neither.
func (r *wreader) limits() (flags byte, min, max uint32, hasMax bool) {
	flags = r.byte()
	if flags&^0x01 != 0 {
		panic(fmt.Sprintf("limits with flags %#x (shared or 64-bit memories and tables are not supported)", flags))
	}
	min = r.u32()
	if flags&0x01 != 0 {
		max, hasMax = r.u32(), true
	}
	return flags, min, max, hasMax
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

func appendSleb(b []byte, v int64) []byte { return leb.AppendS64(b, v) }

func appendU32(b []byte, v uint32) []byte { return leb.AppendU32(b, v) }
