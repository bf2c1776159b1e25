package state

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestStoreID(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("a", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	s.Close()
	if len(id) != 16 {
		t.Fatalf("id %q", id)
	}
	s, err = Open("a", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() != id {
		t.Fatalf("id changed across reopen: %q -> %q", id, s.ID())
	}
	s.Close()
	other, err := Open("b", &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if other.ID() == id {
		t.Fatal("two stores share an id")
	}
}
