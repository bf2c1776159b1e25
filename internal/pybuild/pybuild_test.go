package pybuild

import (
	"bytes"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/internal/pyslot"
	"github.com/groupstate/groupstate/sdk/python"
)

// TestEmbed: the sources, the groupstate package and the entry file go into the runtime
// module's slot (internal/pyslot), sorted by name, with the ABI version; the same sources give
// the same bytes.
func TestEmbed(t *testing.T) {
	files := []File{{"b.py", []byte("x = 1\n")}, {"a/__init__.py", []byte("")}}
	out, err := Embed(python.Runtime, files, "b:Proc", 2)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pyslot.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := encodeFiles([]File{{"a/__init__.py", nil}, {EntryFile, []byte("b:Proc")}, {"b.py", []byte("x = 1\n")}})
	if m.ABI != 2 || m.Len != uint32(len(want)) {
		t.Errorf("slot: ABI %d, length %d; want 2, %d", m.ABI, m.Len, len(want))
	}
	_, src, ok := pyslot.Split(out)
	if !ok || !bytes.Equal(src.Blob, want) {
		t.Errorf("blob %q, want %q", src.Blob, want)
	}
	if again, _ := Embed(python.Runtime, []File{files[1], files[0]}, "b:Proc", 2); !bytes.Equal(out, again) {
		t.Error("two builds of the same sources differ")
	}
	for _, c := range []struct {
		name, entry, want string
		abi               uint32
		files             []File
	}{
		{"bad entry", "a", "want module:function", 1, nil},
		{"bad version", "a:h", "ABI version 3", 3, nil},
		{"bad name", "a:handle", "bad source file name", 1, []File{{"../a.py", nil}}},
		{"twice", "a:handle", "given twice", 1, []File{{"a.py", nil}, {"a.py", nil}}},
	} {
		_, err := Embed(python.Runtime, c.files, c.entry, c.abi)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := Embed(out, files, "b:Proc", 2); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("embedding twice: %v", err)
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

// TestSplitShared: two handlers' modules split into the same runtime bytes (what the host
// compiles, once for every Python handler), which are the committed runtime's.
func TestSplitShared(t *testing.T) {
	a, err := Build(map[string][]byte{"a.py": []byte("def handle(key, rows, state):\n    pass\n")}, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(map[string][]byte{"b.py": []byte("from groupstate import StatefulProcessor\nclass B(StatefulProcessor):\n    pass\n")}, "b")
	if err != nil {
		t.Fatal(err)
	}
	ra, _, oka := pyslot.Split(a)
	rb, sb, okb := pyslot.Split(b)
	if !oka || !okb || !bytes.Equal(ra, rb) || sb.ABI != 2 {
		t.Fatalf("split: %v %v, same runtime %v, ABI %d", oka, okb, bytes.Equal(ra, rb), sb.ABI)
	}
	if !bytes.Equal(ra, python.Runtime) {
		t.Errorf("the split runtime (%d bytes) is not the committed runtime (%d bytes)", len(ra), len(python.Runtime))
	}
}
