package hostile

import "bytes"

// Outcome is what the runtime must make of a module of the corpus.
type Outcome int

const (
	// Refused: loading the module (deploy, groupstate test, the runtime's start) fails with an
	// error containing Module.Message, within the call time limit plus a margin.
	Refused Outcome = iota
	// KeyFails: the module loads; in a batch, every key that starts with "x" fails with an
	// error containing Module.Message (dead-lettered, or quarantined) and every other key is
	// processed (each emits {"ok":true}).
	KeyFails
)

// Module is one module of the corpus.
type Module struct {
	// Name is the module's file name without .wasm.
	Name string
	// About says what the module does.
	About string
	// Outcome and Message say what the runtime must make of it.
	Outcome Outcome
	Message string
	// ABI is the module's ABI version (1 or 2).
	ABI int
	// MemoryBytes is the memory limit a test runs it under (0: the default).
	MemoryBytes uint64
	// Committed tells whether the module is small enough to be committed under testdata.
	Committed bool

	m *module
}

// Wasm assembles the module.
func (m Module) Wasm() []byte { return m.m.bytes() }

// Listing is the module's code in the text format's instruction names.
func (m Module) Listing() string {
	return ";; " + m.Name + ": " + m.About + "\n" + m.m.listing()
}

// Memory layout of the corpus's handlers.
const (
	cellAddr  = 16     // the group cell (abi/README.md 2.1a)
	claimAddr = 20     // when not 0, the result length gs_process returns (huge-result)
	initAddr  = 32     // the init result: v1 8 zero bytes, v2 with one declaration
	emitAddr  = 128    // {"ok":true}
	reqAddr   = 4096   // a v2 request: VALUE_SET var 0 of reqValue bytes (zeros)
	smallReq  = 3072   // a v2 request: VALUE_SET var 0 to "1", which every v2 group sends
	iovAddr   = 256    // an iovec for fd_write: {logAddr, logLen}
	logAddr   = 65536  // logLen bytes of 'A' (written by the flood itself)
	inAddr    = 131072 // the input buffer (gs_alloc), up to inMax bytes
	inMax     = 393216 // 6 pages
	resAddr   = 524288 // the result buffer
	memPages  = 16     // 1 MiB
	reqValue  = 61440  // 60 KiB per VALUE_SET
	logLen    = 16384  // 16 KiB per log call
)

var okRow = []byte(`{"ok":true}`)

// The imports of every handler of the corpus, by index.
const (
	impGroupBegin uint32 = iota
	impLog
	impFdWrite
	impState
)

// hook is where a handler is hostile.
type hook int

const (
	inCall       hook = iota // in gs_process, for the keys that start with "x"
	inInit                   // in gs_init
	inInitialize             // in _initialize
	inStart                  // in the start section's function
)

// handler builds an ABI handler (version abi) whose hostile code is hostile (a function
// named "hostile" that it calls where where says); extra adds imports and helper functions
// before the handler's functions are laid out.
func handler(abi int, where hook, hostile func(m *module, a *asm), extra func(m *module)) *module {
	return handlerOf(abi, where, true, hostile, extra)
}

// handlerOf is handler; announce tells whether the handler says which group it runs (group
// cell and group_begin).
func handlerOf(abi int, where hook, announce bool, hostile func(m *module, a *asm), extra func(m *module)) *module {
	m := &module{memMin: memPages, start: -1}
	// Every handler imports the same functions, at fixed indexes (see the imp* constants).
	m.imports = append(m.imports,
		imp{"groupstate", "group_begin", []byte{i32}, nil},
		imp{"groupstate", "log", []byte{i32, i32, i32}, nil},
		imp{"wasi_snapshot_preview1", "fd_write", []byte{i32, i32, i32, i32}, []byte{i32}},
		imp{"groupstate", "state", []byte{i32, i32, i32, i32}, []byte{i32}},
	)
	if extra != nil {
		extra(m)
	}
	m.data = append(m.data, dataSeg{emitAddr, okRow})
	if abi == 2 {
		// status 0, message 0, one declaration: "v", a value, no TTL.
		init := []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 'v', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		m.data = append(m.data, dataSeg{initAddr, init})
		req := []byte{0x02, 0, 0, 0, 0}
		req = append(req, uleb32le(reqValue)...)
		m.data = append(m.data, dataSeg{reqAddr, req})
		m.data = append(m.data, dataSeg{smallReq, []byte{0x02, 0, 0, 0, 0, 1, 0, 0, 0, '1'}})
	}

	version := &asm{}
	version.i32(int32(abi))
	alloc := &asm{}
	alloc.get(0).i32(inMax).emit("i32.gt_u", 0x4b).if_().i32(0).ret().end().i32(inAddr)
	initLen := int32(8)
	if abi == 2 {
		initLen = 29
	}
	init := &asm{}
	if where == inInit {
		init.call(0xffff) // patched below
	}
	init.packed(func(a *asm) { a.i32(initAddr) }, func(a *asm) { a.i32(initLen) })
	cell := &asm{}
	cell.i32(cellAddr)

	// gs_process: params ptr(0) len(1); locals n(2) p(3) i(4) out(5) klen(6) cnt(7).
	p := &asm{}
	p.i32(claimAddr).i32(0).store32(0)
	p.get(0).load32(0).set(2)
	p.get(0).i32(20).add().set(3)
	p.i32(resAddr).i32(0).store32(0)
	p.i32(resAddr).get(2).store32(4)
	p.i32(resAddr + 8).set(5)
	p.i32(0).set(4)
	p.block().loop()
	p.get(4).get(2).geU().brIf(1)
	if announce {
		p.i32(cellAddr).get(4).store32(0)
		p.get(4).call(impGroupBegin)
	}
	p.get(3).load32(4).set(6)
	if abi == 2 {
		// Every group writes its value variable a little: a healthy group's writes must never
		// be refused because of a hostile one's in the same call.
		p.i32(smallReq).i32(10).i32(0).i32(0).call(impState).drop()
	}
	if where == inCall {
		p.get(3).load8u(9).i32('x').eq().if_()
		p.call(0xffff) // patched below
		p.end()
	}
	p.get(3).i32(8).add().get(6).add().set(3) // past the key
	if abi == 1 {
		p.get(3).i32(4).add().get(3).load32(0).add().set(3) // past the state
	}
	p.get(3).load32(0).set(7) // rows
	p.get(3).i32(4).add().set(3)
	p.block().loop()
	p.get(7).eqz().brIf(1)
	p.get(3).i32(4).add().get(3).load32(0).add().set(3)
	p.get(7).i32(1).sub().set(7)
	p.br(0)
	p.end().end()
	// One emit of {"ok":true}, then a result with nothing else.
	p.get(5).i32(1).store32(0)
	p.get(5).i32(int32(len(okRow))).store32(4)
	p.get(5).i32(8).add().i32(emitAddr).i32(int32(len(okRow))).memCopy()
	p.get(5).i32(int32(8 + len(okRow))).add().set(5)
	rest := int32(28) // v1: status action flags timeout(8) state error
	if abi == 2 {
		rest = 12 // v2: status error ops
	}
	p.get(5).i32(0).i32(rest).memFill()
	p.get(5).i32(rest).add().set(5)
	p.get(4).i32(1).add().set(4)
	p.br(0)
	p.end().end()
	p.i32(cellAddr).i32(-1).store32(0)
	p.i32(claimAddr).load32(0).if_()
	p.packed(func(a *asm) { a.i32(resAddr) }, func(a *asm) { a.i32(claimAddr).load32(0) }).ret()
	p.end()
	p.packed(func(a *asm) { a.i32(resAddr) }, func(a *asm) { a.get(5).i32(resAddr).sub() })

	m.funcs = append(m.funcs,
		fn{name: "gs_abi_version", export: true, results: []byte{i32}, body: version},
		fn{name: "gs_alloc", export: true, params: []byte{i32}, results: []byte{i32}, body: alloc},
		fn{name: "gs_init", export: true, params: []byte{i32, i32}, results: []byte{i64}, body: init},
		fn{name: "gs_process", export: true, params: []byte{i32, i32}, results: []byte{i64}, locals: []byte{i32, i32, i32, i32, i32, i32}, body: p},
	)
	if abi == 1 && announce {
		m.funcs = append(m.funcs, fn{name: "gs_group_cell", export: true, results: []byte{i32}, body: cell})
	}
	h := &asm{}
	m.funcs = append(m.funcs, fn{name: "hostile", body: h})
	hostile(m, h)
	switch where {
	case inInitialize:
		m.funcs = append(m.funcs, fn{name: "_initialize", export: true, body: (&asm{}).call(m.index("hostile"))})
	case inStart:
		m.start = int(m.index("hostile"))
	}
	// Patch the calls of the hostile function (their index is known only now).
	idx := m.index("hostile")
	for _, a := range []*asm{init, p} {
		patched := (&asm{}).call(idx)
		a.code = bytes.ReplaceAll(a.code, (&asm{}).call(0xffff).code, patched.code)
		listing := a.listing.String()
		a.listing.Reset()
		a.listing.WriteString(replaceAll(listing, "call 65535", "call "+itoa(idx)))
	}
	return m
}

func uleb32le(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

func replaceAll(s, old, new string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte(old), []byte(new)))
}

func itoa(v uint32) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}

// addFunc appends a helper function and returns its index.
func addFunc(m *module, f fn) uint32 {
	m.funcs = append(m.funcs, f)
	return uint32(len(m.imports) + len(m.funcs) - 1)
}

// recursion: rec(n) = n == 0 ? 1 : rec(n-1) + rec(n-1), called with 44: 2^44 calls and no
// loop, the shape of a naive Fibonacci.
func recursion(m *module, h *asm) {
	r := &asm{}
	idx := addFunc(m, fn{name: "rec", params: []byte{i32}, results: []byte{i32}, body: r})
	r.get(0).eqz().ifI32().i32(1).else_().get(0).i32(1).sub().call(idx).get(0).i32(1).sub().call(idx).add().end()
	h.i32(44).call(idx).drop()
}

// endless: loop br 0 end.
func endless(_ *module, h *asm) { h.loop().br(0).end() }

// deep: deep(n) = deep(n+1) + 1, until the stack overflows.
func deep(m *module, h *asm) {
	d := &asm{}
	idx := addFunc(m, fn{name: "deep", params: []byte{i32}, results: []byte{i32}, body: d})
	d.get(0).i32(1).add().call(idx).i32(1).add()
	h.i32(0).call(idx).drop()
}

// memoryGrow grows the memory 4 MiB at a time until it fails, then traps. (wazero grows a
// memory by copying it, so growing a page at a time costs the host transient garbage of
// several times the limit; the host's bound is the limit, which this checks.)
func memoryGrow(_ *module, h *asm) {
	h.block().loop().i32(64).memGrow().i32(-1).eq().brIf(1).br(0).end().end().unreachable()
}

// tableGrow grows the table by 2^20 elements at a time until it fails, then traps: without
// a bound, the first grow alone takes 8 MB of host memory and 2^27 elements take 1 GB.
func tableGrow(m *module, h *asm) {
	m.table = true
	h.block().loop().refNullFunc().i32(1 << 20).tableGrow(0).i32(-1).eq().brIf(1).br(0).end().end().unreachable()
}

// hugeResult makes gs_process return a result that claims 2 GiB - 1 bytes (through the
// claim cell, which every handler of the corpus reads at the end of gs_process).
func hugeResult(_ *module, h *asm) {
	h.i32(claimAddr).i32(1<<31 - 1).store32(0)
}

// logFlood calls groupstate.log with 16 KiB messages until the time limit stops it.
func logFlood(m *module, h *asm) {
	h.i32(logAddr).i32('A').i32(logLen).memFill()
	h.loop().i32(0).i32(logAddr).i32(logLen).call(impLog).br(0).end()
}

// stdoutFlood writes 16 KiB to stdout with fd_write until the time limit stops it.
func stdoutFlood(m *module, h *asm) {
	h.i32(logAddr).i32('A').i32(logLen).memFill()
	h.i32(logAddr + logLen - 1).i32('\n').store8(0)
	h.i32(iovAddr).i32(logAddr).store32(0)
	h.i32(iovAddr).i32(logLen).store32(4)
	h.loop().i32(1).i32(iovAddr).i32(1).i32(iovAddr + 8).call(impFdWrite).drop().br(0).end()
}

// stateFlood (ABI v2) sets its value variable to 60 KiB again and again until the host
// refuses a request (or the time limit stops it).
func stateFlood(m *module, h *asm) {
	h.block().loop()
	h.i32(reqAddr).i32(9 + reqValue).i32(0).i32(0).call(impState).i32(-1).eq().brIf(1)
	h.br(0).end().end()
}

// Corpus returns every module of the corpus, in a fixed order.
func Corpus() []Module {
	timeLimit := "module exceeded the per-call time limit"
	mods := []Module{
		{Name: "recursion-call", About: "branching recursion (2^44 calls, no loop) for the keys that start with x", Outcome: KeyFails, Message: timeLimit, m: handler(1, inCall, recursion, nil)},
		{Name: "recursion-init", About: "branching recursion in gs_init", Outcome: Refused, Message: timeLimit, m: handler(1, inInit, recursion, nil)},
		{Name: "recursion-initialize", About: "branching recursion in _initialize", Outcome: Refused, Message: timeLimit, m: handler(1, inInitialize, recursion, nil)},
		{Name: "recursion-start", About: "branching recursion in the start section's function", Outcome: Refused, Message: timeLimit, m: handler(1, inStart, recursion, nil)},
		{Name: "loop-call", About: "an endless loop for the keys that start with x", Outcome: KeyFails, Message: timeLimit, m: handler(1, inCall, endless, nil)},
		{Name: "loop-anonymous", About: "an endless loop for the keys that start with x, in a handler that does not say which group it runs (no group cell, no group_begin)", Outcome: KeyFails, Message: timeLimit, m: handlerOf(1, inCall, false, endless, nil)},
		{Name: "loop-start", About: "an endless loop in the start section's function", Outcome: Refused, Message: timeLimit, m: handler(1, inStart, endless, nil)},
		{Name: "stack-overflow", About: "unbounded recursion for the keys that start with x: the guest stack overflows", Outcome: KeyFails, Message: "stack overflow", m: handler(1, inCall, deep, nil)},
		{Name: "memory-grow", About: "grows the memory 4 MiB at a time until it fails, then traps, for the keys that start with x", Outcome: KeyFails, Message: "unreachable", m: handler(1, inCall, memoryGrow, nil)},
		{Name: "table-grow", About: "grows a table by 2^20 elements until it fails, then traps, for the keys that start with x", Outcome: KeyFails, Message: "unreachable", m: handler(1, inCall, tableGrow, nil)},
		{Name: "log-flood", About: "logs 16 KiB messages until the time limit, for the keys that start with x", Outcome: KeyFails, Message: timeLimit, m: handler(1, inCall, logFlood, nil)},
		{Name: "stdout-flood", About: "writes 16 KiB lines to stdout until the time limit, for the keys that start with x", Outcome: KeyFails, Message: timeLimit, m: handler(1, inCall, stdoutFlood, nil)},
		{Name: "state-flood", About: "ABI v2: sets a value variable to 60 KiB over and over, for the keys that start with x", Outcome: KeyFails, Message: "state writes", ABI: 2, m: handler(2, inCall, stateFlood, nil)},
		{Name: "huge-result", About: "returns a result that claims 2 GiB from the calls with a key that starts with x", Outcome: KeyFails, Message: "exceeds the limit", m: handler(1, inCall, hugeResult, nil)},
		{Name: "unknown-import", About: "imports a function the runtime does not provide", Outcome: Refused, Message: "imports env.evil", m: handler(1, inCall, endless, func(m *module) {
			m.imports = append(m.imports, imp{"env", "evil", nil, nil})
		})},
		{Name: "reserved-export", About: "exports the name of the runtime's stop flag", Outcome: Refused, Message: `exports "__groupstate_stop", a name the runtime reserves`, m: handler(1, inCall, func(m *module, h *asm) {
			addFunc(m, fn{name: "__groupstate_stop", export: true, body: (&asm{}).emit("nop", 0x01)})
			h.emit("nop", 0x01)
		}, nil)},
	}
	for i := range mods {
		if mods[i].ABI == 0 {
			mods[i].ABI = 1
		}
		mods[i].Committed = true
	}
	return append(mods, large()...)
}

// large are the modules too large to commit: the tests build them.
func large() []Module {
	brifs := func(n int) []byte { // block (local.get 0; br_if 0) x n end: n branches to one label
		b := []byte{0x02, 0x40}
		b = append(b, bytes.Repeat([]byte{0x20, 0x00, 0x0d, 0x00}, n)...)
		return append(b, 0x0b)
	}
	branchy := func(perFunc, funcs int) func(m *module, h *asm) {
		return func(m *module, h *asm) {
			for range funcs {
				addFunc(m, fn{name: "branchy", params: []byte{i32}, raw: brifs(perFunc), rawNote: itoa(uint32(perFunc)) + " times (local.get 0; br_if 0) in one block"})
			}
			h.emit("nop", 0x01)
		}
	}
	nested := func(n int) func(m *module, h *asm) {
		return func(m *module, h *asm) {
			raw := append(bytes.Repeat([]byte{0x02, 0x40}, n), bytes.Repeat([]byte{0x0b}, n)...)
			addFunc(m, fn{name: "nested", raw: raw, rawNote: itoa(uint32(n)) + " nested blocks"})
			h.emit("nop", 0x01)
		}
	}
	return []Module{
		{Name: "branches-one-function", About: "40,000 br_if in one block of one function (160 KB; 50 s to compile unchecked)", Outcome: Refused, Message: "branches per function limit is", m: handler(1, inCall, branchy(40_000, 1), nil)},
		{Name: "branch-work", About: "20 functions of 25,000 br_if each (2 MB; minutes to compile unchecked)", Outcome: Refused, Message: "branch work limit is", m: handler(1, inCall, branchy(25_000, 20), nil)},
		{Name: "many-functions", About: "200,000 empty functions", Outcome: Refused, Message: "functions limit is", m: handler(1, inCall, func(m *module, h *asm) {
			for range 200_000 {
				addFunc(m, fn{name: "empty", raw: nil, rawNote: "empty"})
			}
			h.emit("nop", 0x01)
		}, nil)},
		{Name: "deep-nesting", About: "20,000 nested blocks in one function", Outcome: Refused, Message: "block nesting limit is", m: handler(1, inCall, nested(20_000), nil)},
		{Name: "large-data", About: "a 32 MiB data segment, with the memory to hold it, under a 16 MiB memory limit", Outcome: Refused, Message: "memory", MemoryBytes: 16 << 20, m: func() *module {
			m := handler(1, inCall, endless, nil)
			m.extraData, m.memMin = 32<<20, 32<<20/65536+memPages
			return m
		}()},
	}
}

// SlowCompile is a handler (its keys are all healthy) with one more function of n br_if in
// one block: within the loading limits up to n = 30,000, and slow to compile (wazero's time
// grows with the square of n: 20,000 take about 7.5 s on a 2-core AMD EPYC). Tests use it to
// show that one module's compilation holds no other deployment up.
func SlowCompile(n int) Module {
	raw := []byte{0x02, 0x40}
	raw = append(raw, bytes.Repeat([]byte{0x20, 0x00, 0x0d, 0x00}, n)...)
	raw = append(raw, 0x0b)
	m := handler(1, inCall, func(m *module, h *asm) {
		addFunc(m, fn{name: "branchy", params: []byte{i32}, raw: raw, rawNote: itoa(uint32(n)) + " times (local.get 0; br_if 0) in one block"})
		h.emit("nop", 0x01)
	}, nil)
	return Module{Name: "slow-compile", About: "a handler slow to compile", Outcome: KeyFails, ABI: 1, m: m}
}
