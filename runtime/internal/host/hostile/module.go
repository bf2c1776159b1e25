package hostile

import (
	"fmt"
	"strings"
)

// Value types.
const (
	i32 byte = 0x7f
	i64 byte = 0x7e
)

// fn is one function of a module.
type fn struct {
	name            string // the export name, or a name for the listing only when export is false
	export          bool
	params, results []byte
	locals          []byte // the type of each local after the parameters
	body            *asm   // nil: raw
	raw             []byte // a body too large to list (with rawNote in the listing)
	rawNote         string
}

type imp struct {
	module, name    string
	params, results []byte
}

type dataSeg struct {
	offset uint32
	bytes  []byte
}

// module is a module to assemble: functions are indexed after the imports, in order.
type module struct {
	imports   []imp
	funcs     []fn
	memMin    uint32 // pages; the memory is exported as "memory"
	table     bool   // one funcref table, minimum 1, no maximum
	data      []dataSeg
	start     int // the index of the start function, or -1
	extraData int // a data segment of this many zero bytes at offset 0, not listed byte by byte
}

// index returns the function index of the function named name.
func (m *module) index(name string) uint32 {
	for i, f := range m.funcs {
		if f.name == name {
			return uint32(len(m.imports) + i)
		}
	}
	panic("no function " + name)
}

func vec(items [][]byte) []byte {
	b := uleb(uint32(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func name(s string) []byte { return append(uleb(uint32(len(s))), s...) }

func functype(params, results []byte) []byte {
	b := append([]byte{0x60}, uleb(uint32(len(params)))...)
	b = append(b, params...)
	b = append(b, uleb(uint32(len(results)))...)
	return append(b, results...)
}

func section(id byte, content []byte) []byte {
	return append(append([]byte{id}, uleb(uint32(len(content)))...), content...)
}

// bytes assembles the module.
func (m *module) bytes() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	var types, imports, funcs, exports, codes [][]byte
	typeIndex := map[string]uint32{}
	typeOf := func(params, results []byte) []byte {
		t := functype(params, results)
		i, ok := typeIndex[string(t)]
		if !ok {
			i = uint32(len(types))
			typeIndex[string(t)] = i
			types = append(types, t)
		}
		return uleb(i)
	}
	for _, im := range m.imports {
		imports = append(imports, append(append(append(name(im.module), name(im.name)...), 0x00), typeOf(im.params, im.results)...))
	}
	for i, f := range m.funcs {
		funcs = append(funcs, typeOf(f.params, f.results))
		if f.export {
			exports = append(exports, append(append(name(f.name), 0x00), uleb(uint32(len(m.imports)+i))...))
		}
		var body []byte
		body = append(body, uleb(uint32(len(f.locals)))...)
		for _, t := range f.locals {
			body = append(body, 0x01, t)
		}
		if f.body != nil {
			body = append(body, f.body.code...)
		} else {
			body = append(body, f.raw...)
		}
		body = append(body, 0x0b)
		codes = append(codes, append(uleb(uint32(len(body))), body...))
	}
	exports = append(exports, append(name("memory"), 0x02, 0x00))
	out = append(out, section(1, vec(types))...)
	if len(imports) > 0 {
		out = append(out, section(2, vec(imports))...)
	}
	out = append(out, section(3, vec(funcs))...)
	if m.table {
		out = append(out, section(4, vec([][]byte{{0x70, 0x00, 0x01}}))...)
	}
	out = append(out, section(5, vec([][]byte{append([]byte{0x00}, uleb(m.memMin)...)}))...)
	out = append(out, section(7, vec(exports))...)
	if m.start >= 0 {
		out = append(out, section(8, uleb(uint32(m.start)))...)
	}
	out = append(out, section(10, vec(codes))...)
	var segs [][]byte
	for _, d := range m.data {
		seg := append([]byte{0x00, 0x41}, sleb(int64(d.offset))...)
		seg = append(seg, 0x0b)
		seg = append(seg, uleb(uint32(len(d.bytes)))...)
		segs = append(segs, append(seg, d.bytes...))
	}
	if m.extraData > 0 {
		seg := []byte{0x00, 0x41, 0x00, 0x0b}
		seg = append(seg, uleb(uint32(m.extraData))...)
		segs = append(segs, append(seg, make([]byte, m.extraData)...))
	}
	if len(segs) > 0 {
		out = append(out, section(11, vec(segs))...)
	}
	return out
}

// listing is the module in the text format's instruction names: a listing to read beside the
// binary, not a file for a WAT assembler.
func (m *module) listing() string {
	var b strings.Builder
	types := func(kw string, ts []byte) string {
		if len(ts) == 0 {
			return ""
		}
		s := " (" + kw
		for _, t := range ts {
			if t == i64 {
				s += " i64"
			} else {
				s += " i32"
			}
		}
		return s + ")"
	}
	b.WriteString("(module\n")
	for i, im := range m.imports {
		fmt.Fprintf(&b, "  (import %q %q (func $%d%s%s))\n", im.module, im.name, i, types("param", im.params), types("result", im.results))
	}
	if m.table {
		b.WriteString("  (table 1 funcref)\n")
	}
	fmt.Fprintf(&b, "  (memory (export \"memory\") %d)\n", m.memMin)
	for _, d := range m.data {
		fmt.Fprintf(&b, "  (data (i32.const %d) %q)\n", d.offset, d.bytes)
	}
	if m.extraData > 0 {
		fmt.Fprintf(&b, "  (data (i32.const 0) \"\\00\" ...) ;; %d zero bytes\n", m.extraData)
	}
	if m.start >= 0 {
		fmt.Fprintf(&b, "  (start $%d)\n", m.start)
	}
	for i, f := range m.funcs {
		export := ""
		if f.export {
			export = fmt.Sprintf(" (export %q)", f.name)
		}
		fmt.Fprintf(&b, "  (func $%d%s ;; %s\n   %s%s%s\n", len(m.imports)+i, export, f.name, types("param", f.params), types("result", f.results), types("local", f.locals))
		if f.body != nil {
			b.WriteString(f.body.listing.String())
		} else {
			fmt.Fprintf(&b, "    ;; %s\n", f.rawNote)
		}
		b.WriteString("  )\n")
	}
	b.WriteString(")\n")
	return b.String()
}
