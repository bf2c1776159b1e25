package pybuild

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// fakeRuntime is a module with a memory and one data segment holding the glue's slot, as
// wasm-ld lays it out: some data, the magic, the area (0x1000), the capacity and length 0.
func fakeRuntime(capacity uint32, dataCount bool) []byte {
	seg := []byte("some static data ")
	seg = append(seg, slotMagic...)
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

func TestEmbed(t *testing.T) {
	for _, dc := range []bool{false, true} {
		rt := fakeRuntime(1<<20, dc)
		files := []File{{"b.py", []byte("x = 1\n")}, {"a/__init__.py", []byte("")}}
		out, err := Embed(rt, files, "b:handle", 1)
		if err != nil {
			t.Fatal(err)
		}
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
		if len(segs) != 2 || segs[1].offset != 0x1000 {
			t.Fatalf("segments %+v, want the slot's and one at the area 0x1000", segs)
		}
		blob := segs[1].init
		i := bytes.Index(segs[0].init, slotMagic) + len(slotMagic)
		if n := binary.LittleEndian.Uint32(segs[0].init[i+8:]); n != uint32(len(blob)) {
			t.Errorf("slot length %d, want %d", n, len(blob))
		}
		if v := binary.LittleEndian.Uint32(segs[0].init[i+12:]); v != 1 {
			t.Errorf("slot ABI version %d, want 1", v)
		}
		v2, err := Embed(rt, files, "b:Proc", 2)
		if err != nil {
			t.Fatal(err)
		}
		if j := bytes.Index(v2, slotMagic) + len(slotMagic); binary.LittleEndian.Uint32(v2[j+12:]) != 2 {
			t.Error("a version 2 module's slot does not say 2")
		}
		// Sorted by name, the entry file included.
		want, _ := encodeFiles([]File{{"a/__init__.py", nil}, {EntryFile, []byte("b:handle")}, {"b.py", []byte("x = 1\n")}})
		if !bytes.Equal(blob, want) {
			t.Errorf("blob %q, want %q", blob, want)
		}
		// Deterministic: the same inputs give the same bytes.
		again, _ := Embed(rt, []File{files[1], files[0]}, "b:handle", 1)
		if !bytes.Equal(out, again) {
			t.Error("two builds of the same sources differ")
		}
		// A module that already holds sources is refused.
		if _, err := Embed(out, files, "b:handle", 1); err == nil || !strings.Contains(err.Error(), "already holds") {
			t.Errorf("embedding twice: %v", err)
		}
	}
}

func TestEmbedErrors(t *testing.T) {
	big := []File{{"a.py", bytes.Repeat([]byte("#"), 100)}}
	for _, c := range []struct {
		name, entry, want string
		rt                []byte
		files             []File
	}{
		{"too big", "a:handle", "more than the runtime's 64", fakeRuntime(64, false), big},
		{"no slot", "a:handle", "no source slot", []byte("\x00asm\x01\x00\x00\x00\x0b\x01\x00"), nil},
		{"bad entry", "a", "want module:function", fakeRuntime(1<<20, false), nil},
		{"bad name", "a:handle", "bad source file name", fakeRuntime(1<<20, false), []File{{"../a.py", nil}}},
		{"twice", "a:handle", "given twice", fakeRuntime(1<<20, false), []File{{"a.py", nil}, {"a.py", nil}}},
		{"not wasm", "a:handle", "not a WebAssembly module", []byte("hello"), nil},
	} {
		_, err := Embed(c.rt, c.files, c.entry, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestEntry(t *testing.T) {
	const proc = "from groupstate import StatefulProcessor\n\nclass Helper:\n    pass\n\nclass Carts(StatefulProcessor):\n    def handleInputRows(self, key, rows, timerValues):\n        def handle(x):\n            pass\n"
	for _, c := range []struct {
		src, name, want string
		abi             uint32
		err             string
	}{
		{"def handle(key, rows, state):\n    pass\n", "", "handle", 1, ""},
		{"async def other(): pass\nhandle = make()\n", "", "handle", 1, ""},
		{proc, "", "Carts", 2, ""},
		{proc, "Carts", "Carts", 2, ""},
		{proc, "Helper", "Helper", 2, ""},
		{proc, "f", "f", 1, ""},
		{"from helpers import handle\n", "", "handle", 1, ""},
		{proc + "class B(groupstate.StatefulProcessor):\n    pass\n", "", "", 0, "2 StatefulProcessor subclasses (Carts, B)"},
	} {
		got, abi, err := Entry([]byte(c.src), c.name)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Entry(%q, %q): %v, want an error containing %q", c.src, c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want || abi != c.abi {
			t.Errorf("Entry(%q, %q) = %q, %d, %v; want %q, %d", c.src, c.name, got, abi, err, c.want, c.abi)
		}
	}
}
