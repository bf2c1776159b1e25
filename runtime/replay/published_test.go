package replay

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
)

// TestPublishedOnDisk: the published outputs are kept by side, partition and batch, in the
// order read, their duplicates told apart by message id; and they are on disk: reading 80 MB
// of outputs leaves the heap about as it was (issue 30, item 5: a replay held every compared
// output in memory).
func TestPublishedOnDisk(t *testing.T) {
	s, err := openPublished()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	add := func(side byte, part int, batch uint64, key, row string) {
		t.Helper()
		if err := s.add(side, part, batch, key, []byte(row)); err != nil {
			t.Fatal(err)
		}
	}
	add(sideOld, 0, 7, "a", "1")
	add(sideOld, 0, 8, "a", "3")
	add(sideOld, 0, 7, "b", "2")
	add(sideOld, 0, 7, "a", "4")
	add(sideOld, 1, 7, "a", "other partition")
	add(sideNew, 0, 7, "a", "other side")
	got, err := s.of(sideOld, 0, []uint64{7, 8})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][][]byte{"a": {[]byte("1"), []byte("4"), []byte("3")}, "b": {[]byte("2")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("of: %q, want %q", got, want)
	}
	for i, w := range []bool{true, false, true} {
		side := []byte{sideOld, sideOld, sideNew}[i]
		if first, err := s.firstSeen(side, "id1"); err != nil || first != w {
			t.Fatalf("firstSeen %d: %v %v, want %v", i, first, err, w)
		}
	}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	row := make([]byte, 10<<10)
	const n = 8_000 // 80 MB
	for i := range n {
		add(sideOld, 2, uint64(i/100), fmt.Sprint(i%100), string(row))
		if _, err := s.firstSeen(sideOld, fmt.Sprint("m", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 40<<20 {
		t.Errorf("the heap grew by %d MB holding %d MB of outputs", grew>>20, n*len(row)>>20)
	}
	got, err = s.of(sideOld, 2, []uint64{50})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 100 || len(got["3"]) != 1 || len(got["3"][0]) != len(row) {
		t.Fatalf("batch 50: %d keys", len(got))
	}
}
