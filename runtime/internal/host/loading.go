package host

import (
	"errors"
	"fmt"
	"time"
)

// ErrLoadLimit is wrapped by the error of a module that declares more than a loading limit
// allows. The message names the limit and its value.
var ErrLoadLimit = errors.New("runtime: module beyond a loading limit")

// LoadLimits bound what a module may declare, so that loading one (checking, rewriting and
// compiling it) takes bounded time and memory whatever its bytes. wasmparser's and
// wasmtime's limits are the guide; each default is several times what the largest module
// of this repository's SDKs needs (docs/guarantees.md, "The sandbox"). The zero value takes
// every default.
type LoadLimits struct {
	// ModuleBytes caps the module's size. Default [DefaultModuleBytes] (64 MiB).
	ModuleBytes int
	// Functions caps the functions a module imports and defines. Default 100,000.
	Functions int
	// FunctionBytes caps one function body. Default 8 MiB.
	FunctionBytes int
	// Locals caps the locals one function declares. Default 50,000.
	Locals int
	// Nesting caps how deep blocks, loops and ifs nest in one function. Default 10,000.
	Nesting int
	// Branches caps the branch targets of one function (one per br, br_if and if, a
	// br_table's table size plus one). wazero's compiler takes time that grows with the
	// square of a function's branches (20,000 br_if in one function take 7.5 s on a 2-core AMD
	// EPYC), so Branches bounds one function and BranchWork, the sum over the functions of
	// the square of their branches, the module. Defaults 30,000 and 1,000,000,000 (about
	// 20 s of compilation on that machine; the Go SDK's modules have at most 1,632 branches
	// in a function and about 30,000,000 of work).
	Branches   int
	BranchWork int64
	// TableElements caps each table: a larger minimum is refused, and a table never grows
	// beyond it (table.grow fails, as when it reaches a declared maximum). Default 100,000
	// (800 KB of host memory per table and instance; a Go module's table has about 6,400).
	TableElements uint32
	// Types, Globals and Exports cap those declarations (default 100,000 each); Segments
	// caps the element and the data segments each (default 1,000,000: the Go toolchain
	// writes about 40,000 data segments).
	Types, Globals, Exports, Segments int
	// CompileTimeout bounds the compilation of a module that passed every check. Default 60s.
	CompileTimeout time.Duration
	// StackBytes caps the guest's call stack, as the instrumenter estimates it: each frame of a
	// function that calls others counts 32 bytes plus 8 per parameter and local; a call that
	// would pass it traps (stack overflow). Default [DefaultStackBytes] (8 MiB). Without it
	// the stack grows to wazero's fixed ceiling of about 100 MB per instance.
	StackBytes int
}

// The defaults of [LoadLimits].
const (
	DefaultModuleBytes    = 64 << 20
	DefaultFunctions      = 100_000
	DefaultFunctionBytes  = 8 << 20
	DefaultLocals         = 50_000
	DefaultNesting        = 10_000
	DefaultBranches       = 30_000
	DefaultBranchWork     = 1_000_000_000
	DefaultTableElements  = 100_000
	DefaultDeclarations   = 100_000
	DefaultSegments       = 1_000_000
	DefaultCompileTimeout = 60 * time.Second
	DefaultStackBytes     = 8 << 20
)

// MaxModuleBytes is the default cap of a module's size ([LoadLimits].ModuleBytes).
const MaxModuleBytes = DefaultModuleBytes

func (l LoadLimits) withDefaults() LoadLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ModuleBytes, DefaultModuleBytes)
	def(&l.Functions, DefaultFunctions)
	def(&l.FunctionBytes, DefaultFunctionBytes)
	def(&l.Locals, DefaultLocals)
	def(&l.Nesting, DefaultNesting)
	def(&l.Branches, DefaultBranches)
	def(&l.Types, DefaultDeclarations)
	def(&l.Globals, DefaultDeclarations)
	def(&l.Exports, DefaultDeclarations)
	def(&l.Segments, DefaultSegments)
	def(&l.StackBytes, DefaultStackBytes)
	if l.BranchWork <= 0 {
		l.BranchWork = DefaultBranchWork
	}
	if l.TableElements == 0 {
		l.TableElements = DefaultTableElements
	}
	if l.CompileTimeout <= 0 {
		l.CompileTimeout = DefaultCompileTimeout
	}
	return l
}

// exceeded is the error of a module beyond a limit: what (a format with one %d, given
// got), the limit's name and its value.
func (LoadLimits) exceeded(what string, got int, limit string, value int) error {
	return fmt.Errorf("%w: %s; the %s limit is %d", ErrLoadLimit, fmt.Sprintf(what, got), limit, value)
}

// declarations is what scanDeclarations learns of a module for the instrumenter.
type declarations struct {
	importedFuncs, importedGlobals uint32
	globals                        uint32 // defined globals
	hasGlobals, hasExports         bool   // the module has a global section, an export section
	hasStart                       bool
	start                          uint32   // the start function, when hasStart
	params                         []uint32 // per defined function, its parameter count
	types                          uint32   // types declared
	hasMemory                      bool     // the module defines or imports a memory
}

// scanDeclarations checks every section but the code against lim and returns what the
// instrumenter needs. It panics on truncated sections (instrument recovers).
func scanDeclarations(sections []section, lim LoadLimits) (declarations, error) {
	var d declarations
	count := func(r *wreader, what string, max int) (uint32, error) {
		n := r.u32()
		if uint64(n) > uint64(max) {
			return 0, lim.exceeded("the module declares %d "+what, int(min(n, 1<<31-1)), what, max)
		}
		return n, nil
	}
	funcs := 0
	var typeParams []uint32 // per type, its parameter count
	var typeEmpty []bool    // per type, whether it is [] -> []
	var funcEmpty []bool    // per function (imported, then defined), whether its type is [] -> []
	for _, s := range sections {
		r := &wreader{b: s.content}
		switch s.id {
		case sectionType:
			n, err := count(r, "types", lim.Types)
			if err != nil {
				return d, err
			}
			d.types = n
			for range n {
				if form := r.byte(); form != 0x60 {
					return d, fmt.Errorf("%w: a type of form %#x (only function types are supported)", ErrInvalidModule, form)
				}
				params := r.u32()
				for range params {
					r.byte()
				}
				results := r.u32()
				for range results {
					r.byte()
				}
				typeParams = append(typeParams, params)
				typeEmpty = append(typeEmpty, params == 0 && results == 0)
			}
		case sectionImport:
			n, err := count(r, "imports", lim.Functions+lim.Globals)
			if err != nil {
				return d, err
			}
			for range n {
				r.name()
				r.name()
				switch kind := r.byte(); kind {
				case 0x00: // func
					t := r.u32()
					funcEmpty = append(funcEmpty, int(t) < len(typeEmpty) && typeEmpty[t])
					d.importedFuncs++
				case 0x01: // table
					r.byte()
					r.limits()
				case 0x02: // memory
					r.limits()
					d.hasMemory = true
				case 0x03: // global
					r.byte()
					r.byte()
					d.importedGlobals++
				case 0x04: // tag
					r.byte()
					r.u32()
				default:
					return d, fmt.Errorf("%w: an import of unknown kind %#x", ErrInvalidModule, kind)
				}
			}
			funcs += int(d.importedFuncs)
		case sectionFunction:
			n, err := count(r, "functions", lim.Functions)
			if err != nil {
				return d, err
			}
			funcs += int(n)
			for range n {
				t := r.u32()
				if int(t) >= len(typeParams) {
					return d, fmt.Errorf("%w: a function of type %d, which the module does not declare", ErrInvalidModule, t)
				}
				d.params = append(d.params, typeParams[t])
				funcEmpty = append(funcEmpty, typeEmpty[t])
			}
		case sectionTable:
			n := r.u32()
			for i := range n {
				r.byte()
				_, min, _, _ := r.limits()
				if min > lim.TableElements {
					return d, lim.exceeded(fmt.Sprintf("table %d starts with %%d elements", i), int(min), "table elements", int(lim.TableElements))
				}
			}
		case sectionGlobal:
			n, err := count(r, "globals", lim.Globals)
			if err != nil {
				return d, err
			}
			d.globals, d.hasGlobals = n, true
		case sectionExport:
			n, err := count(r, "exports", lim.Exports)
			if err != nil {
				return d, err
			}
			d.hasExports = true
			for range n {
				if name := r.name(); name == StopGlobal || name == StartExport || name == StackGlobal {
					return d, fmt.Errorf("%w: the module exports %q, a name the runtime reserves", ErrInvalidModule, name)
				}
				r.byte()
				r.u32()
			}
		case sectionMemory:
			d.hasMemory = d.hasMemory || r.u32() > 0
		case sectionStart:
			d.start, d.hasStart = r.u32(), true
		case sectionElement:
			if _, err := count(r, "element segments", lim.Segments); err != nil {
				return d, err
			}
		case sectionData:
			if _, err := count(r, "data segments", lim.Segments); err != nil {
				return d, err
			}
		}
	}
	if d.hasStart && (int(d.start) >= len(funcEmpty) || !funcEmpty[d.start]) {
		return d, fmt.Errorf("%w: the start function %d does not exist or takes parameters or returns results", ErrInvalidModule, d.start)
	}
	if !d.hasMemory {
		return d, fmt.Errorf("%w: missing export %q (the module's linear memory)", ErrInvalidModule, "memory")
	}
	if funcs > lim.Functions {
		return d, lim.exceeded("the module has %d functions", funcs, "functions", lim.Functions)
	}
	if uint64(d.importedGlobals)+uint64(d.globals) > uint64(lim.Globals) {
		return d, lim.exceeded("the module has %d globals", int(d.importedGlobals+d.globals), "globals", lim.Globals)
	}
	return d, nil
}
