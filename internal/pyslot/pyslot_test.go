package pyslot

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// fakeRuntime is a module with a memory and one data segment holding the glue's slot, as
// wasm-ld lays it out: some data, the magic, the area (0x1000), the capacity, length 0 and
// version 0.
func fakeRuntime(capacity uint32, dataCount bool) []byte {
	seg := []byte("some static data ")
	seg = append(seg, Magic...)
	seg = binary.LittleEndian.AppendUint32(seg, 0x1000)
	seg = binary.LittleEndian.AppendUint32(seg, capacity)
	seg = binary.LittleEndian.AppendUint32(seg, 0)
	seg = binary.LittleEndian.AppendUint32(seg, 0)
	data := encodeData([]dataSegment{{offset: 0x400, init: seg}})
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, 5, 3, 1, 0, 1) // memory section: one memory, min 1 page
	if dataCount {
		m = append(m, 12, 1, 1)
	}
	m = append(m, 11)
	m = binary.AppendUvarint(m, uint64(len(data)))
	return append(m, data...)
}

func withSources(t *testing.T, rt, blob []byte, abi uint32) []byte {
	t.Helper()
	m, err := Parse(rt)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetSources(blob, abi); err != nil {
		t.Fatal(err)
	}
	return m.Encode()
}

func TestSetSources(t *testing.T) {
	for _, dc := range []bool{false, true} {
		rt := fakeRuntime(1<<20, dc)
		out := withSources(t, rt, []byte("the blob"), 2)
		secs, err := parseSections(out)
		if err != nil {
			t.Fatal(err)
		}
		var segs []dataSegment
		for _, s := range secs {
			switch s.id {
			case 11:
				if segs, err = parseData(s.payload); err != nil {
					t.Fatal(err)
				}
			case 12:
				if n, _ := binary.Uvarint(s.payload); n != 2 {
					t.Errorf("data count %d, want 2", n)
				}
			}
		}
		if len(segs) != 2 || segs[1].offset != 0x1000 || string(segs[1].init) != "the blob" {
			t.Fatalf("segments %+v, want the slot's and the blob at the area 0x1000", segs)
		}
		m, err := Parse(out)
		if err != nil {
			t.Fatal(err)
		}
		if m.Len != 8 || m.ABI != 2 || m.Area != 0x1000 || m.Cap != 1<<20 || m.SlotAddr() != 0x400+17+24 {
			t.Errorf("slot %+v (at %#x)", m, m.SlotAddr())
		}
		// Deterministic, and a module that already holds sources is refused.
		if again := withSources(t, rt, []byte("the blob"), 2); !bytes.Equal(out, again) {
			t.Error("two builds of the same sources differ")
		}
		if err := m.SetSources([]byte("x"), 1); err == nil || !strings.Contains(err.Error(), "already holds") {
			t.Errorf("embedding twice: %v", err)
		}
	}
}

// TestSplit: a handler's module splits into the runtime (the same bytes for any sources) and
// its sources, which Write puts where the module's own data segment would have.
func TestSplit(t *testing.T) {
	rt := fakeRuntime(1<<20, true)
	a, b := withSources(t, rt, []byte("handler a"), 1), withSources(t, rt, []byte("handler b, longer"), 2)
	ra, sa, oka := Split(a)
	rb, sb, okb := Split(b)
	if !oka || !okb {
		t.Fatal("a handler's module does not split")
	}
	if !bytes.Equal(ra, rb) {
		t.Error("two handlers' runtimes differ")
	}
	if m, err := Parse(ra); err != nil || m.Len != 0 || m.ABI != 0 || len(m.segs) != 1 {
		t.Errorf("the split runtime: %+v, %v", m, err)
	}
	if string(sb.Blob) != "handler b, longer" || sb.Len != 17 || sb.ABI != 2 || sb.Area != 0x1000 || sb.SlotAddr != 0x400+17+24 || sa.ABI != 1 {
		t.Errorf("sources %+v", sb)
	}
	mem := make([]byte, 0x2000)
	write := func(off uint32, p []byte) bool {
		if uint64(off)+uint64(len(p)) > uint64(len(mem)) {
			return false
		}
		copy(mem[off:], p)
		return true
	}
	if !sb.Write(write) || string(mem[0x1000:0x1000+17]) != "handler b, longer" ||
		binary.LittleEndian.Uint32(mem[sb.SlotAddr+8:]) != 17 || binary.LittleEndian.Uint32(mem[sb.SlotAddr+12:]) != 2 {
		t.Error("Write did not put the sources and the slot's fields in place")
	}
	small := func(off uint32, p []byte) bool { return false }
	if sb.Write(small) {
		t.Error("a write outside the memory was not reported")
	}
	// Not split: the runtime itself, another module, sources not at the area.
	if _, _, ok := Split(rt); ok {
		t.Error("the runtime without sources splits")
	}
	if _, _, ok := Split([]byte("\x00asm\x01\x00\x00\x00")); ok {
		t.Error("an empty module splits")
	}
	m, _ := Parse(a)
	m.segs[len(m.segs)-1].offset = 0x1800
	if _, _, ok := Split(m.Encode()); ok {
		t.Error("sources away from the area split")
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		name, want string
		wasm       []byte
	}{
		{"no slot", "no source slot", []byte("\x00asm\x01\x00\x00\x00\x0b\x01\x00")},
		{"not wasm", "not a WebAssembly module", []byte("hello")},
	} {
		_, err := Parse(c.wasm)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	m, err := Parse(fakeRuntime(64, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetSources(bytes.Repeat([]byte("#"), 100), 1); err == nil || !strings.Contains(err.Error(), "more than the runtime's 64") {
		t.Errorf("too big: %v", err)
	}
}

// TestSplitMalformed: the host runs Split on every module it loads, so truncated or altered
// modules must not panic it; they do not split.
func TestSplitMalformed(t *testing.T) {
	a := withSources(t, fakeRuntime(1<<20, true), []byte("handler a"), 1)
	for n := range len(a) {
		if _, _, ok := Split(a[:n]); ok && n < len(a) {
			t.Errorf("a module cut at %d bytes splits", n)
		}
		b := bytes.Clone(a)
		b[n] ^= 0xff
		Split(b) // must not panic
	}
}

// FuzzSplit: Split never panics, and what it splits reassembles into a module with the same
// sources.
func FuzzSplit(f *testing.F) {
	f.Add(fakeRuntime(1<<20, true))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		rt, src, ok := Split(wasm)
		if !ok {
			return
		}
		m, err := Parse(rt)
		if err != nil || m.Len != 0 {
			t.Fatalf("the split runtime does not parse as one without sources: %v", err)
		}
		if uint32(len(src.Blob)) != src.Len {
			t.Fatalf("blob of %d bytes, length %d", len(src.Blob), src.Len)
		}
	})
}

// TestSplitOverlap: sources written over the slot do not split (the host's writes after
// instantiation would not give the memory the module's segments give).
func TestSplitOverlap(t *testing.T) {
	m, err := Parse(fakeRuntime(1<<20, true))
	if err != nil {
		t.Fatal(err)
	}
	m.Area = m.SlotAddr() - 4 // the blob covers the slot's fields
	if err := m.SetSources([]byte("0123456789abcdef0123"), 1); err != nil {
		t.Fatal(err)
	}
	// SetSources wrote the area's segment at the parsed Area; the slot still names 0x1000,
	// so point the slot at the new area too.
	at := m.slotOff + len(Magic)
	binary.LittleEndian.PutUint32(m.segs[m.slotSeg].init[at:], m.Area)
	if _, _, ok := Split(m.Encode()); ok {
		t.Error("sources over the slot split")
	}
}
