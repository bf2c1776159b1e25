// Package pybuild makes a Python handler module (issue 31): it puts a handler's .py sources,
// with the groupstate package of sdk/python, inside the CPython runtime module
// (sdk/python/runtime/python.wasm), where the interpreter imports them read-only, from its own
// memory, with no file system. It is pure Go: building a Python handler needs neither CPython
// nor a WebAssembly toolchain.
//
// The runtime's glue (sdk/python/runtime/glue.c) reserves a zero-filled area in its memory and
// describes it in a slot found by its magic: the area's address, its capacity, the length of
// the sources written there (0 in the runtime as built) and the module's ABI version. [Embed]
// encodes the sources into one blob, appends an active data segment that writes it into the
// area when an instance starts, and sets the slot's length and version.
//
// The version is the build's decision ([Build]): an entry that is a class (a subclass of
// groupstate's StatefulProcessor, Spark 4's transformWithState) makes an ABI v2 module, an
// entry that is a function (applyInPandasWithState's) an ABI v1 module. Nothing else in the module changes, so the runtime's code, its
// frozen standard library and its exports are byte for byte those of the committed runtime.
package pybuild

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/groupstate/groupstate/internal/leb"
	"github.com/groupstate/groupstate/sdk/python"
)

// slotMagic starts the glue's gs_sources_slot: 24 bytes, then the area's address (u32), its
// capacity (u32), the sources' length (u32) and the module's ABI version (u32), little-endian.
var slotMagic = []byte("gs-python-sources-v2....")

// slotSize is the slot's size after the magic.
const slotSize = 16

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
	secs, err := parseSections(runtime)
	if err != nil {
		return nil, err
	}
	di := -1
	dci := -1
	for i, s := range secs {
		switch s.id {
		case 11:
			di = i
		case 12:
			dci = i
		}
	}
	if di < 0 {
		return nil, errors.New("pybuild: the runtime module has no data section")
	}
	segs, err := parseData(secs[di].payload)
	if err != nil {
		return nil, err
	}
	// Find the slot: exactly one occurrence of the magic in the active segments.
	var slot []byte
	var slotSeg, slotOff int
	for i, s := range segs {
		for off := 0; ; {
			j := bytes.Index(s.init[off:], slotMagic)
			if j < 0 {
				break
			}
			if slot != nil {
				return nil, errors.New("pybuild: the runtime module has two source slots")
			}
			slotSeg, slotOff = i, off+j
			slot = s.init[off+j:]
			off += j + 1
		}
	}
	if slot == nil || len(slot) < len(slotMagic)+slotSize {
		return nil, errors.New("pybuild: not a Python runtime module (no source slot)")
	}
	fields := slot[len(slotMagic):]
	area := binary.LittleEndian.Uint32(fields[0:])
	capacity := binary.LittleEndian.Uint32(fields[4:])
	if n := binary.LittleEndian.Uint32(fields[8:]); n != 0 {
		return nil, errors.New("pybuild: the module already holds a handler's sources (start from the runtime module)")
	}
	if uint64(len(blob)) > uint64(capacity) {
		return nil, fmt.Errorf("pybuild: the sources take %d bytes, more than the runtime's %d", len(blob), capacity)
	}
	if area == 0 {
		return nil, errors.New("pybuild: the runtime module's source area is at address 0")
	}
	// The slot's segment, with the length set.
	init := slices.Clone(segs[slotSeg].init)
	binary.LittleEndian.PutUint32(init[slotOff+len(slotMagic)+8:], uint32(len(blob)))
	binary.LittleEndian.PutUint32(init[slotOff+len(slotMagic)+12:], abiVersion)
	segs[slotSeg].init = init
	segs = append(segs, dataSegment{offset: area, init: blob})

	secs[di].payload = encodeData(segs)
	if dci >= 0 {
		secs[dci].payload = binary.AppendUvarint(nil, uint64(len(segs)))
	}
	out := slices.Clone(runtime[:8])
	for _, s := range secs {
		out = append(out, s.id)
		out = binary.AppendUvarint(out, uint64(len(s.payload)))
		out = append(out, s.payload...)
	}
	return out, nil
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

type section struct {
	id      byte
	payload []byte
}

func parseSections(b []byte) ([]section, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" || binary.LittleEndian.Uint32(b[4:8]) != 1 {
		return nil, errors.New("pybuild: not a WebAssembly module")
	}
	var secs []section
	for p := 8; p < len(b); {
		id := b[p]
		n, k := binary.Uvarint(b[p+1:])
		if k <= 0 || n > uint64(len(b)-p-1-k) {
			return nil, errors.New("pybuild: malformed module: bad section size")
		}
		start := p + 1 + k
		secs = append(secs, section{id: id, payload: b[start : start+int(n)]})
		p = start + int(n)
	}
	return secs, nil
}

// dataSegment is an active segment of memory 0 at a constant offset: all that wasm-ld writes
// for a module that defines its memory.
type dataSegment struct {
	offset uint32
	init   []byte
}

func parseData(b []byte) ([]dataSegment, error) {
	bad := errors.New("pybuild: the runtime's data section is not what wasm-ld writes (active segments at constant offsets)")
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, bad
	}
	b = b[k:]
	var segs []dataSegment
	for i := uint64(0); i < n; i++ {
		if len(b) < 2 || b[0] != 0 || b[1] != 0x41 { // flags 0 (active, memory 0), i32.const
			return nil, bad
		}
		off, k := sleb32(b[2:])
		if k <= 0 || len(b) < 2+k+1 || b[2+k] != 0x0b {
			return nil, bad
		}
		b = b[2+k+1:]
		size, k := binary.Uvarint(b)
		if k <= 0 || size > uint64(len(b)-k) {
			return nil, bad
		}
		segs = append(segs, dataSegment{offset: uint32(off), init: b[k : k+int(size)]})
		b = b[k+int(size):]
	}
	if len(b) != 0 {
		return nil, bad
	}
	return segs, nil
}

func encodeData(segs []dataSegment) []byte {
	out := binary.AppendUvarint(nil, uint64(len(segs)))
	for _, s := range segs {
		out = append(out, 0, 0x41)
		out = leb.AppendS64(out, int64(int32(s.offset)))
		out = append(out, 0x0b)
		out = binary.AppendUvarint(out, uint64(len(s.init)))
		out = append(out, s.init...)
	}
	return out
}

// sleb32 decodes a signed LEB128 i32 (as i32.const's immediate).
func sleb32(b []byte) (int32, int) {
	var v int64
	var shift uint
	for i := 0; i < len(b) && i < 5; i++ {
		c := b[i]
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return int32(v), i + 1
		}
	}
	return 0, -1
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
