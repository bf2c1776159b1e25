// Package pybuild makes a Python handler module (issue 31): it puts a handler's .py sources,
// with the groupstate package of sdk/python, inside the CPython runtime module
// (sdk/python/runtime/python.wasm), where the interpreter imports them read-only, from its own
// memory, with no file system. It is pure Go: building a Python handler needs neither CPython
// nor a WebAssembly toolchain.
//
// The runtime's glue (sdk/python/runtime/glue.c) reserves a zero-filled area in its memory and
// describes it in a slot found by its magic: the area's address, its capacity, the length of
// the sources written there (0 in the runtime as built) and the module's ABI version
// (internal/pyslot). [Embed] encodes the sources into one blob, appends an active data segment
// that writes it into the area when an instance starts, and sets the slot's length and
// version. Nothing else in the module changes, so the runtime's code, its frozen standard
// library and its exports are byte for byte those of the committed runtime.
//
// The version is the build's decision ([Build]): an entry that is a class (a subclass of
// groupstate's StatefulProcessor, Spark 4's transformWithState) makes an ABI v2 module, an
// entry that is a function (applyInPandasWithState's) an ABI v1 module.
package pybuild

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/groupstate/groupstate/internal/pyslot"
	"github.com/groupstate/groupstate/sdk/python"
)

// ErrNoEntry is returned by [Build] when the handler's module has no entry to run.
var ErrNoEntry = errors.New("pybuild: no entry")

// EntryFile is the name, in the embedded sources, of the file that holds the handler's entry
// as "module:function"; the groupstate package reads it at init.
const EntryFile = "__groupstate_entry__"

// File is one source file to embed: Name is its import path relative to the handler's root,
// such as "logincount.py", "helpers/__init__.py" or "groupstate/__init__.py".
type File struct {
	Name string
	Data []byte
}

// Embed returns the runtime module with files and the entry ("module:function", such as
// "logincount:handle", or "module:Class" for version 2) inside, as a module of ABI version
// abiVersion (1 or 2). The runtime must be a runtime module as built, without sources.
func Embed(runtime []byte, files []File, entry string, abiVersion uint32) ([]byte, error) {
	mod, fn, ok := strings.Cut(entry, ":")
	if !ok || mod == "" || fn == "" {
		return nil, fmt.Errorf("pybuild: entry %q: want module:function", entry)
	}
	if abiVersion != 1 && abiVersion != 2 {
		return nil, fmt.Errorf("pybuild: ABI version %d: want 1 or 2", abiVersion)
	}
	blob, err := encodeFiles(append(slices.Clone(files), File{Name: EntryFile, Data: []byte(entry)}))
	if err != nil {
		return nil, err
	}
	m, err := pyslot.Parse(runtime)
	if err != nil {
		return nil, err
	}
	if err := m.SetSources(blob, abiVersion); err != nil {
		return nil, err
	}
	return m.Encode(), nil
}

// encodeFiles is the glue's blob: u32 count, then per file u32 name length, name, u32 data
// length, data, sorted by name.
func encodeFiles(files []File) ([]byte, error) {
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	out := binary.LittleEndian.AppendUint32(nil, uint32(len(files)))
	for i, f := range files {
		if f.Name == "" || path.IsAbs(f.Name) || path.Clean(f.Name) != f.Name || strings.HasPrefix(f.Name, "../") {
			return nil, fmt.Errorf("pybuild: bad source file name %q", f.Name)
		}
		if i > 0 && files[i-1].Name == f.Name {
			return nil, fmt.Errorf("pybuild: source file %s given twice", f.Name)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(f.Name)))
		out = append(out, f.Name...)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(f.Data)))
		out = append(out, f.Data...)
	}
	return out, nil
}

var (
	topDef      = regexp.MustCompile(`(?m)^(?:async[ \t]+)?def[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*\(`)
	topAssign   = regexp.MustCompile(`(?m)^([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::[^=\n]*)?=[^=]`)
	topClass    = regexp.MustCompile(`(?m)^class[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*(\([^)]*\))?[ \t]*:`)
	processorRe = regexp.MustCompile(`\bStatefulProcessor\b`)
)

// DefaultEntry is the entry function of an ABI v1 handler when the build names none.
const DefaultEntry = "handle"

// Entry decides the entry of a handler whose main module's source is src, and with it the
// module's ABI version. name is the entry the build names (--entry), or "" for the default:
// a top-level function handle (ABI v1, applyInPandasWithState), else the one top-level class
// whose bases name StatefulProcessor (ABI v2, transformWithState), else handle (v1: it may be
// imported, and the module's init fails when there is none). Two such classes and no handle
// are an error ([ErrNoEntry]). A named entry that is a
// top-level class is a processor (v2); any other name is a function (v1), checked when the
// module starts. The source is read, not run: the build needs no Python.
func Entry(src []byte, name string) (entry string, abiVersion uint32, err error) {
	classes := topClass.FindAllSubmatch(src, -1)
	if name != "" {
		for _, c := range classes {
			if string(c[1]) == name {
				return name, 2, nil
			}
		}
		return name, 1, nil
	}
	for _, d := range topDef.FindAllSubmatch(src, -1) {
		if string(d[1]) == DefaultEntry {
			return DefaultEntry, 1, nil
		}
	}
	for _, a := range topAssign.FindAllSubmatch(src, -1) {
		if string(a[1]) == DefaultEntry {
			return DefaultEntry, 1, nil
		}
	}
	var procs []string
	for _, c := range classes {
		if processorRe.Match(c[2]) {
			procs = append(procs, string(c[1]))
		}
	}
	switch len(procs) {
	case 1:
		return procs[0], 2, nil
	case 0:
		// handle may come from elsewhere (from helpers import handle): the module's init
		// says so if it does not.
		return DefaultEntry, 1, nil
	}
	return "", 0, fmt.Errorf("%w: %d StatefulProcessor subclasses (%s); name the entry (--entry)", ErrNoEntry, len(procs), strings.Join(procs, ", "))
}

// Build returns the module of a Python handler: the committed runtime module
// (sdk/python.Runtime) with the groupstate package and sources inside. sources maps import
// paths ("logincount.py", "helpers/util.py") to contents; entry is "module:name", or
// "module" (or "module:") for the default of [Entry], which also decides the ABI version. A
// source named groupstate/... is refused: the package comes with the SDK.
func Build(sources map[string][]byte, entry string) ([]byte, error) {
	mod, name, _ := strings.Cut(entry, ":")
	src, ok := sources[mod+".py"]
	if !ok {
		src, ok = sources[mod+"/__init__.py"]
	}
	if mod == "" || !ok {
		return nil, fmt.Errorf("pybuild: entry %q: no source %s.py", entry, mod)
	}
	name, version, err := Entry(src, name)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s.py)", err, mod)
	}
	sdkFiles, err := python.SDK()
	if err != nil {
		return nil, err
	}
	var files []File
	for name, data := range sdkFiles {
		files = append(files, File{Name: name, Data: data})
	}
	for name, data := range sources {
		if name == "groupstate.py" || strings.HasPrefix(name, "groupstate/") {
			return nil, fmt.Errorf("pybuild: %s: the groupstate package comes with the SDK; rename the file", name)
		}
		files = append(files, File{Name: name, Data: data})
	}
	return Embed(python.Runtime, files, mod+":"+name, version)
}
