package host

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/groupstate/groupstate/abi"
)

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// requiredExports are the functions every module exports, with their signatures.
var requiredExports = []struct {
	name            string
	params, results []api.ValueType
}{
	{abi.ExportABIVersion, nil, []api.ValueType{i32}},
	{abi.ExportAlloc, []api.ValueType{i32}, []api.ValueType{i32}},
	{abi.ExportInit, []api.ValueType{i32, i32}, []api.ValueType{i64}},
	{abi.ExportProcess, []api.ValueType{i32, i32}, []api.ValueType{i64}},
}

// optionalExports are the functions a module may export, with the signatures they must then
// have.
var optionalExports = []struct {
	name            string
	params, results []api.ValueType
}{
	{abi.ExportGroupCell, nil, []api.ValueType{i32}},
}

// hostImports are the functions of the groupstate import module. groupstate.state is ABI v2's
// (abi/README.md 9.5); the host defines it for every module, and a v1 module simply does not
// import it (if one does, its calls are refused: a v1 call has no state session).
var hostImports = map[string]struct{ params, results []api.ValueType }{
	abi.ImportGroupBegin: {[]api.ValueType{i32}, nil},
	abi.ImportLog:        {[]api.ValueType{i32, i32, i32}, nil},
	abi.ImportState:      {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}},
}

// importsGroupBegin tells whether a compiled module imports groupstate.group_begin, which ABI
// v2 requires (abi/README.md 9.1).
func importsGroupBegin(cm wazero.CompiledModule) bool {
	for _, def := range cm.ImportedFunctions() {
		if mod, name, _ := def.Import(); mod == abi.ImportModule && name == abi.ImportGroupBegin {
			return true
		}
	}
	return false
}

// validate checks a compiled module's exports and imports against the ABI (sections 2.1, 2.2
// and 9.1). It returns every problem found, so a user fixes them in one round.
func validate(cm wazero.CompiledModule) error {
	var problems []string
	exports := cm.ExportedFunctions()
	for _, want := range requiredExports {
		def, ok := exports[want.name]
		if !ok {
			problems = append(problems, fmt.Sprintf("missing export %q with signature %s", want.name, signature(want.params, want.results)))
			continue
		}
		if !sameTypes(def.ParamTypes(), want.params) || !sameTypes(def.ResultTypes(), want.results) {
			problems = append(problems, fmt.Sprintf("export %q has signature %s, want %s", want.name,
				signature(def.ParamTypes(), def.ResultTypes()), signature(want.params, want.results)))
		}
	}
	for _, opt := range optionalExports {
		def, ok := exports[opt.name]
		if ok && (!sameTypes(def.ParamTypes(), opt.params) || !sameTypes(def.ResultTypes(), opt.results)) {
			problems = append(problems, fmt.Sprintf("export %q has signature %s, want %s", opt.name,
				signature(def.ParamTypes(), def.ResultTypes()), signature(opt.params, opt.results)))
		}
	}
	if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
		problems = append(problems, fmt.Sprintf("missing export %q (the module's linear memory)", abi.ExportMemory))
	}
	if len(cm.ImportedMemories()) > 0 {
		problems = append(problems, "imports a memory; a module must define and export its own")
	}
	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		switch mod {
		case abi.WASIModule:
			// wazero implements all of WASI preview 1; the sandbox (no files, env, network)
			// is enforced by the module configuration, not by refusing imports.
		case abi.ImportModule:
			want, ok := hostImports[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("imports unknown host function %s.%s", mod, name))
			} else if !sameTypes(def.ParamTypes(), want.params) || !sameTypes(def.ResultTypes(), want.results) {
				problems = append(problems, fmt.Sprintf("imports %s.%s with signature %s, want %s", mod, name,
					signature(def.ParamTypes(), def.ResultTypes()), signature(want.params, want.results)))
			}
		default:
			problems = append(problems, fmt.Sprintf("imports %s.%s: only %q and %q imports are allowed", mod, name, abi.WASIModule, abi.ImportModule))
		}
	}
	if _, ok := exports["_start"]; ok {
		if _, ok := exports[abi.ExportInitialize]; !ok {
			problems = append(problems, "the module is a WASI command (it exports _start); build a reactor instead (Go: -buildmode=c-shared; C: -mexec-model=reactor)")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	sort.Strings(problems)
	return fmt.Errorf("%w: %s", ErrInvalidModule, strings.Join(problems, "; "))
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func signature(params, results []api.ValueType) string {
	name := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(s, ", ") + ")"
	}
	return name(params) + " -> " + name(results)
}
