package state

import (
	"errors"
	"maps"
	"testing"
)

// TestInputWatermarks: the record commits with its batch, replicates, a later batch that
// sets none keeps it and one that sets it replaces it whole.
func TestInputWatermarks(t *testing.T) {
	d := openMem(t).Deployment("dep")
	log := &memReplicator{}
	d.SetReplicator(log)
	if w, err := d.InputWatermarks(); err != nil || len(w) != 0 {
		t.Fatalf("a new deployment's input watermarks: %v %v", w, err)
	}
	b := d.NewBatch(1)
	b.SetInputWatermarks(map[string]int64{"impressions": 7200000, "clicks": -5, "x": 0})
	_, err := b.Commit()
	requireNoError(t, err)
	_, err = d.NewBatch(2).Commit()
	requireNoError(t, err)
	want := map[string]int64{"impressions": 7200000, "clicks": -5, "x": 0}
	replica := openMem(t).Deployment("dep")
	for _, w := range log.writes {
		requireNoError(t, replica.ApplyReplicated(w.Repr))
	}
	for _, dep := range []*Deployment{d, replica} {
		got, err := dep.InputWatermarks()
		requireNoError(t, err)
		if !maps.Equal(got, want) {
			t.Fatalf("input watermarks %v, want %v", got, want)
		}
	}
	b = d.NewBatch(3)
	b.SetInputWatermarks(map[string]int64{"clicks": 9})
	_, err = b.Commit()
	requireNoError(t, err)
	if got, _ := d.InputWatermarks(); !maps.Equal(got, map[string]int64{"clicks": 9}) {
		t.Fatalf("after a replacing record: %v", got)
	}
}

func TestDecodeInputWatermarksCorrupt(t *testing.T) {
	for _, v := range [][]byte{nil, {1}, {1, 3, 'a'}, {1, 1, 'a', 0, 0, 0}, {0, 0}, {0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, err := decodeInputWatermarks(v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decode %x: %v, want ErrCorrupt", v, err)
		}
	}
}
