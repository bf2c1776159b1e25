// Package pyslot reads and writes the sources slot of the Python runtime module (issue 31):
// the glue (sdk/python/runtime/glue.c) reserves a zero-filled area in its memory for a
// handler's sources and describes it in a slot of its initialized data, found by its magic:
// the area's address, its capacity, the length of the sources written there and the module's
// ABI version. internal/pybuild fills it ([Module.SetSources]): the sources become one more
// active data segment at the area. The runtime's host takes it out again ([Split]) so that
// every Python handler compiles to the same code, the runtime's, and writes the sources into
// each instance's memory itself.
package pyslot

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/groupstate/groupstate/internal/leb"
)

// Magic starts the glue's gs_sources_slot: 24 bytes, then the area's address (u32), its
// capacity (u32), the sources' length (u32) and the module's ABI version (u32), little-endian.
var Magic = []byte("gs-python-sources-v2....")

// fieldsSize is the slot's size after the magic.
const fieldsSize = 16

// ErrNoSlot is returned by [Parse] for a module without a sources slot (not a Python runtime
// module).
var ErrNoSlot = errors.New("pyslot: not a Python runtime module (no source slot)")

// Module is a parsed Python runtime module: its sections and the slot's fields.
type Module struct {
	header   []byte
	secs     []section
	dataIdx  int // the data section's index in secs
	countIdx int // the data count section's, or -1
	segs     []dataSegment
	slotSeg  int // the segment holding the slot, and the slot's offset in it
	slotOff  int

	// Area is the address of the sources area in the module's memory, Cap its size.
	Area, Cap uint32
	// Len is the length of the sources written into the area (0 in the runtime as built),
	// ABI the module's ABI version (0 as built, read as 1).
	Len, ABI uint32
}

// SlotAddr is the address of the slot's fields (the area's address, then Cap, Len, ABI) in
// the module's memory.
func (m *Module) SlotAddr() uint32 {
	return m.segs[m.slotSeg].offset + uint32(m.slotOff) + uint32(len(Magic))
}

// Parse parses a Python runtime module, with or without sources.
func Parse(wasm []byte) (*Module, error) {
	secs, err := parseSections(wasm)
	if err != nil {
		return nil, err
	}
	m := &Module{header: wasm[:8], secs: secs, dataIdx: -1, countIdx: -1}
	for i, s := range secs {
		switch s.id {
		case 11:
			m.dataIdx = i
		case 12:
			m.countIdx = i
		}
	}
	if m.dataIdx < 0 {
		return nil, ErrNoSlot
	}
	if m.segs, err = parseData(secs[m.dataIdx].payload); err != nil {
		return nil, err
	}
	// The slot: exactly one occurrence of the magic in the active segments.
	var slot []byte
	for i, s := range m.segs {
		for off := 0; ; {
			j := bytes.Index(s.init[off:], Magic)
			if j < 0 {
				break
			}
			if slot != nil {
				return nil, errors.New("pyslot: the module has two source slots")
			}
			m.slotSeg, m.slotOff = i, off+j
			slot = s.init[off+j:]
			off += j + 1
		}
	}
	if slot == nil || len(slot) < len(Magic)+fieldsSize {
		return nil, ErrNoSlot
	}
	f := slot[len(Magic):]
	m.Area = binary.LittleEndian.Uint32(f[0:])
	m.Cap = binary.LittleEndian.Uint32(f[4:])
	m.Len = binary.LittleEndian.Uint32(f[8:])
	m.ABI = binary.LittleEndian.Uint32(f[12:])
	return m, nil
}

// setFields writes Len and ABI into the slot's segment.
func (m *Module) setFields() {
	init := slices.Clone(m.segs[m.slotSeg].init)
	at := m.slotOff + len(Magic)
	binary.LittleEndian.PutUint32(init[at+8:], m.Len)
	binary.LittleEndian.PutUint32(init[at+12:], m.ABI)
	m.segs[m.slotSeg].init = init
}

// SetSources makes the module hold blob at the area, as an ABI abiVersion module: one more
// active data segment, and the slot's length and version set. The module must hold none yet.
func (m *Module) SetSources(blob []byte, abiVersion uint32) error {
	if m.Len != 0 {
		return errors.New("pyslot: the module already holds a handler's sources (start from the runtime module)")
	}
	if uint64(len(blob)) > uint64(m.Cap) {
		return fmt.Errorf("pyslot: the sources take %d bytes, more than the runtime's %d", len(blob), m.Cap)
	}
	if m.Area == 0 {
		return errors.New("pyslot: the runtime module's source area is at address 0")
	}
	m.Len, m.ABI = uint32(len(blob)), abiVersion
	m.setFields()
	m.segs = append(m.segs, dataSegment{offset: m.Area, init: blob})
	return nil
}

// Encode returns the module's bytes.
func (m *Module) Encode() []byte {
	m.secs[m.dataIdx].payload = encodeData(m.segs)
	if m.countIdx >= 0 {
		m.secs[m.countIdx].payload = binary.AppendUvarint(nil, uint64(len(m.segs)))
	}
	out := slices.Clone(m.header)
	for _, s := range m.secs {
		out = append(out, s.id)
		out = binary.AppendUvarint(out, uint64(len(s.payload)))
		out = append(out, s.payload...)
	}
	return out
}

// Sources are a handler's sources taken out of its module by [Split]: what an instance's
// memory must hold before the module's _initialize runs.
type Sources struct {
	// Area is where Blob goes; SlotAddr is where the slot's fields are (the area's address,
	// its capacity, then Len and ABI, which go there).
	Area, SlotAddr uint32
	Blob           []byte
	Len, ABI       uint32
}

// Write puts the sources into an instance's memory through write (such as wazero's
// api.Memory.Write), and reports whether every write was inside the memory.
func (s *Sources) Write(write func(offset uint32, b []byte) bool) bool {
	var f [8]byte
	binary.LittleEndian.PutUint32(f[0:], s.Len)
	binary.LittleEndian.PutUint32(f[4:], s.ABI)
	return write(s.Area, s.Blob) && write(s.SlotAddr+8, f[:])
}

// Split takes a Python handler's sources out of its module: it returns the runtime module
// without them (the same bytes for every handler built from one runtime) and the sources that
// each instance's memory must then be given. ok is false for any other module (not a Python
// runtime module, or one whose sources are not where internal/pybuild puts them: the last
// data segment, at the area, of the slot's length).
func Split(wasm []byte) (runtime []byte, src Sources, ok bool) {
	if !bytes.Contains(wasm, Magic) { // every other module, at the cost of one scan
		return nil, Sources{}, false
	}
	m, err := Parse(wasm)
	if err != nil || m.Len == 0 || len(m.segs) < 2 {
		return nil, Sources{}, false
	}
	last := m.segs[len(m.segs)-1]
	if last.offset != m.Area || uint32(len(last.init)) != m.Len || m.Len > m.Cap {
		return nil, Sources{}, false
	}
	// Writing the slot's fields after instantiation gives the memory the module's own segments
	// would only if no later segment writes over them.
	lo := uint64(m.SlotAddr())
	for _, s := range m.segs[m.slotSeg+1:] {
		if start := uint64(s.offset); start < lo+fieldsSize && lo < start+uint64(len(s.init)) {
			return nil, Sources{}, false
		}
	}
	src = Sources{Area: m.Area, SlotAddr: m.SlotAddr(), Blob: last.init, Len: m.Len, ABI: m.ABI}
	m.segs = m.segs[:len(m.segs)-1]
	m.Len, m.ABI = 0, 0
	m.setFields()
	return m.Encode(), src, true
}

type section struct {
	id      byte
	payload []byte
}

func parseSections(b []byte) ([]section, error) {
	if len(b) < 8 || string(b[:4]) != "\x00asm" || binary.LittleEndian.Uint32(b[4:8]) != 1 {
		return nil, errors.New("pyslot: not a WebAssembly module")
	}
	var secs []section
	for p := 8; p < len(b); {
		id := b[p]
		n, k := binary.Uvarint(b[p+1:])
		if k <= 0 || n > uint64(len(b)-p-1-k) {
			return nil, errors.New("pyslot: malformed module: bad section size")
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
	bad := errors.New("pyslot: the data section is not what wasm-ld writes (active segments at constant offsets)")
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
