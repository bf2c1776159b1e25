package groupstate

import (
	"errors"
	"iter"
	"slices"
	"strconv"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

// badRow never decodes: a call that ranged over its rows would fail.
type badRow struct{}

func (*badRow) UnmarshalJSON([]byte) error { return errors.New("no") }

// RowCount gives a data call's number of rows without decoding them (a row that would not
// decode does not fail the call), for each module its own, and without an allocation; any
// other iterator is counted by ranging over it.
func TestRowCount(t *testing.T) {
	proc := func() *funcProc[badRow, string] {
		return &funcProc[badRow, string]{rows: func(key Key, rows iter.Seq[badRow], _ *Timers, out *Emitter[string]) error {
			out.Emit(key.String() + ":" + strconv.Itoa(RowCount(rows)))
			return nil
		}}
	}
	m1, h1 := newProcModule(t, abi.TimeoutNone, proc())
	m2, h2 := newProcModule(t, abi.TimeoutNone, proc())
	res1 := h1.process(m1, newV2Buf(1, 0, 2).data(`"a"`, `{}`, `{}`, `{}`).data(`"b"`, `{}`).b)
	res2 := h2.process(m2, newV2Buf(1, 0, 1).data(`"c"`, `{}`, `{}`).b)
	requireOK(t, res1)
	requireOK(t, res2)
	var got []string
	for _, r := range append(res1, res2...) {
		got = append(got, r.emits...)
	}
	if want := []string{`"a:3"`, `"b:1"`, `"c:2"`}; !slices.Equal(got, want) {
		t.Fatalf("emitted %v, want %v", got, want)
	}

	if n := RowCount(slices.Values([]int{1, 2, 3, 4})); n != 4 {
		t.Fatalf("RowCount of another iterator: %d", n)
	}
	if n := RowCount[int](nil); n != 0 {
		t.Fatalf("RowCount(nil): %d", n)
	}

	buf := newV2Buf(1, 0, 1).data(`"a"`, `{}`, `{}`).b
	m1.SetStateHost(idleHost{})
	m1.Process(buf)
	counted := testing.AllocsPerRun(100, func() { m1.Process(buf) })
	ranged, hr := newProcModule(t, abi.TimeoutNone, &funcProc[struct{}, string]{rows: func(key Key, rows iter.Seq[struct{}], _ *Timers, out *Emitter[string]) error {
		n := 0
		for range rows {
			n++
		}
		out.Emit(strconv.Itoa(n))
		return nil
	}})
	_ = hr
	ranged.SetStateHost(idleHost{})
	ranged.Process(buf)
	loop := testing.AllocsPerRun(100, func() { ranged.Process(buf) })
	t.Logf("allocations per call: %v counted, %v ranged", counted, loop)
	if counted >= loop {
		t.Fatalf("a call that counts with RowCount allocates %v times, one that ranges %v", counted, loop)
	}
}

// idleHost is a StateHost for calls that make no state requests.
type idleHost struct{}

func (idleHost) GroupBegin(uint32)       {}
func (idleHost) State(_, _ []byte) int32 { return abi.StateRefused }
