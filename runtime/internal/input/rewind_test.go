package input

import "testing"

// TestSourceRewindBehindAckFloor: Rewind takes the consumer back behind its ack floor (as a
// state store restored from a backup needs), and a new Source sees the lowered ack floor.
func TestSourceRewindBehindAckFloor(t *testing.T) {
	e := newEnv(t)
	ctx, js := e.ctx, e.js
	stream := newInput(t, e)
	publishN(t, e, "in.a", 0, 10)
	src, err := NewSource(ctx, js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	ms := fetchAll(t, e, src, 10, 10)
	if err := src.Ack(ctx, ms[9]); err != nil {
		t.Fatal(err)
	}
	if floor, err := src.AckFloor(ctx); err != nil || floor != 10 {
		t.Fatalf("ack floor %d, %v; want 10", floor, err)
	}
	if err := src.Rewind(ctx, 4); err != nil {
		t.Fatal(err)
	}
	again := fetchAll(t, e, src, 7, 10)
	checkSeqs(t, again, 4)
	src2, err := NewSource(ctx, js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	if floor, err := src2.AckFloor(ctx); err != nil || floor != 3 {
		t.Fatalf("ack floor after rewind %d, %v; want 3", floor, err)
	}
}
