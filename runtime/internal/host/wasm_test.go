package host

// A tiny WebAssembly binary writer for tests that need malformed or minimal modules, which no
// SDK would produce.

type wasmFunc struct {
	export          string // "" for none
	params, results []byte // value types: 0x7f i32, 0x7e i64
	body            []byte // instructions, without the final end
	locals          []byte // the type of each local after the parameters
}

type wasmImport struct {
	module, name    string
	params, results []byte
}

type wasmModule struct {
	imports []wasmImport
	funcs   []wasmFunc
	memory  bool // define and export "memory"
}

const (
	tI32 = 0x7f
	tI64 = 0x7e
)

// uleb and sleb reuse the instrumenter's encoders (interrupt.go).
func uleb(v uint64) []byte { return appendU32(nil, uint32(v)) }
func sleb(v int64) []byte  { return appendSleb(nil, v) }

func name(s string) []byte { return append(uleb(uint64(len(s))), s...) }

func vec(items [][]byte) []byte {
	b := uleb(uint64(len(items)))
	for _, it := range items {
		b = append(b, it...)
	}
	return b
}

func sectionBytes(id byte, content []byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(content)))...), content...)
}

func functype(params, results []byte) []byte {
	b := append([]byte{0x60}, uleb(uint64(len(params)))...)
	b = append(b, params...)
	b = append(b, uleb(uint64(len(results)))...)
	return append(b, results...)
}

func i32Const(v int32) []byte { return append([]byte{0x41}, sleb(int64(v))...) }
func i64Const(v int64) []byte { return append([]byte{0x42}, sleb(v)...) }

var unreachable = []byte{0x00}

func (m wasmModule) bytes() []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	var types, imports, funcs, exports, codes [][]byte
	for _, im := range m.imports {
		imports = append(imports, append(append(append(name(im.module), name(im.name)...), 0x00), uleb(uint64(len(types)))...))
		types = append(types, functype(im.params, im.results))
	}
	for i, f := range m.funcs {
		funcs = append(funcs, uleb(uint64(len(types))))
		types = append(types, functype(f.params, f.results))
		if f.export != "" {
			exports = append(exports, append(append(name(f.export), 0x00), uleb(uint64(len(m.imports)+i))...))
		}
		body := uleb(uint64(len(f.locals)))
		for _, t := range f.locals {
			body = append(body, 0x01, t)
		}
		body = append(body, f.body...)
		body = append(body, 0x0b)
		codes = append(codes, append(uleb(uint64(len(body))), body...))
	}
	if m.memory {
		exports = append(exports, append(name("memory"), 0x02, 0x00))
	}
	out = append(out, sectionBytes(1, vec(types))...)
	if len(imports) > 0 {
		out = append(out, sectionBytes(2, vec(imports))...)
	}
	out = append(out, sectionBytes(3, vec(funcs))...)
	if m.memory {
		out = append(out, sectionBytes(5, vec([][]byte{{0x00, 0x01}}))...)
	}
	out = append(out, sectionBytes(7, vec(exports))...)
	out = append(out, sectionBytes(10, vec(codes))...)
	return out
}

// stubModule is a module with every ABI export, doing nothing, reporting version.
func stubModule(version int32) wasmModule {
	return wasmModule{memory: true, funcs: []wasmFunc{
		{export: "gs_abi_version", results: []byte{tI32}, body: i32Const(version)},
		{export: "gs_alloc", params: []byte{tI32}, results: []byte{tI32}, body: i32Const(0)},
		{export: "gs_init", params: []byte{tI32, tI32}, results: []byte{tI64}, body: i64Const(0)},
		{export: "gs_process", params: []byte{tI32, tI32}, results: []byte{tI64}, body: i64Const(0)},
	}}
}
