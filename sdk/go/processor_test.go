package groupstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

// funcProc is a StatefulProcessor made of functions, for tests.
type funcProc[R, O any] struct {
	init  func(h *ProcessorHandle) error
	rows  func(key Key, rows iter.Seq[R], t *Timers, out *Emitter[O]) error
	timer func(key Key, ts int64, t *Timers, out *Emitter[O]) error
}

func (p *funcProc[R, O]) Init(h *ProcessorHandle) error {
	if p.init == nil {
		return nil
	}
	return p.init(h)
}

func (p *funcProc[R, O]) HandleInputRows(key Key, rows iter.Seq[R], t *Timers, out *Emitter[O]) error {
	return p.rows(key, rows, t, out)
}

func (p *funcProc[R, O]) HandleExpiredTimer(key Key, ts int64, t *Timers, out *Emitter[O]) error {
	if p.timer == nil {
		return errors.New("unexpected timer")
	}
	return p.timer(key, ts, t, out)
}

// rawProc is the processor most tests use: rows and emits as JSON text.
type rawProc = funcProc[json.RawMessage, string]

// v2Module returns the module's ABI v2 engine, for its test knobs.
func engineOf(m *Module) *v2Module { return m.v2.(*v2Module) }

// newProcModule registers p on a new module and initializes it against a test host.
func newProcModule[R, O any](t testing.TB, mode abi.TimeoutMode, p StatefulProcessor[R, O]) (*Module, *testHost) {
	t.Helper()
	m := NewModule()
	RegisterProcessor(m, p)
	return m, newTestHost(t, m, mode)
}

func requireOK(t testing.TB, res []resultV2) {
	t.Helper()
	for i, r := range res {
		if r.status != abi.StatusOK {
			t.Fatalf("group %d failed: %s", i, r.err)
		}
	}
}

func requireDump(t testing.TB, h *testHost, key, want string) {
	t.Helper()
	if got := strings.TrimSpace(h.dump(key)); got != want {
		t.Fatalf("state of %s:\n got  %s\n want %s", key, got, want)
	}
}

// TestValueState covers every ValueState op, its errors, and that a call reads its own
// writes.
func TestValueState(t *testing.T) {
	var count *ValueState[int]
	var ptr *ValueState[*string]
	p := &rawProc{
		init: func(h *ProcessorHandle) error {
			count = NewValueState[int](h, "count")
			ptr = NewValueState[*string](h, "ptr")
			return nil
		},
		rows: func(key Key, rows iter.Seq[json.RawMessage], tm *Timers, out *Emitter[string]) error {
			n, ok := count.GetOption()
			if _, err := count.Get(); ok == (err != nil) || (!ok && err != ErrNoState) {
				return fmt.Errorf("Get and GetOption disagree: %v %v", ok, err)
			}
			if count.Exists() != ok {
				return errors.New("Exists and GetOption disagree")
			}
			for range rows {
				n++
			}
			if err := count.Update(n); err != nil {
				return err
			}
			if got, err := count.Get(); got != n || err != nil {
				return fmt.Errorf("read own write: %d %v", got, err)
			}
			if err := ptr.Update(nil); err != ErrNullState {
				return fmt.Errorf("Update(nil): %v", err)
			}
			if key.String() == "clear" {
				count.Clear()
				if count.Exists() {
					return errors.New("exists after Clear")
				}
				if _, err := count.Get(); err != ErrNoState {
					return fmt.Errorf("Get after Clear: %v", err)
				}
			}
			out.Emit(fmt.Sprint(key.String(), "=", n))
			return nil
		},
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	for batch := 1; batch <= 2; batch++ {
		res := h.process(m, newV2Buf(1000, 0, 2).data(`"a"`, `{}`, `{}`).data(`"clear"`, `{}`).b)
		requireOK(t, res)
		if want := fmt.Sprintf("a=%d", 2*batch); res[0].emits[0] != `"`+want+`"` {
			t.Fatalf("batch %d: emits %v", batch, res[0].emits)
		}
	}
	requireDump(t, h, `"a"`, "count=4")
	requireDump(t, h, `"clear"`, "")

	// A stored value that does not decode: Get returns the error, GetOption fails the call.
	p.rows = func(key Key, rows iter.Seq[json.RawMessage], tm *Timers, out *Emitter[string]) error {
		if _, err := count.Get(); err == nil || !strings.Contains(err.Error(), "decoding state variable count") {
			return fmt.Errorf("Get: %v", err)
		}
		count.GetOption()
		return nil
	}
	h.keys[`"a"`].vars[0].val.b = []byte(`"x"`)
	res := h.process(m, newV2Buf(1000, 0, 1).data(`"a"`, `{}`).b)
	requireErrContains(t, res[0].err, "groupstate: decoding state variable count: json: cannot unmarshal string")
}

// TestOwnWritesGoWithReads checks that pending writes travel with the next read, in order,
// in one state call, and the rest in the group result.
func TestOwnWritesGoWithReads(t *testing.T) {
	var v *ValueState[int]
	var l *ListState[string]
	var mp *MapState[int]
	p := &rawProc{
		init: func(h *ProcessorHandle) error {
			v, l, mp = NewValueState[int](h, "v"), NewListState[string](h, "l"), NewMapState[int](h, "m")
			return nil
		},
		rows: func(key Key, rows iter.Seq[json.RawMessage], tm *Timers, out *Emitter[string]) error {
			if err := v.Update(3); err != nil {
				return err
			}
			if err := l.Append("x"); err != nil {
				return err
			}
			var got []string
			for s := range l.All() { // sends VALUE_SET, LIST_APPEND, LIST_READ
				got = append(got, s)
			}
			if !reflect.DeepEqual(got, []string{"x"}) {
				return fmt.Errorf("list %v", got)
			}
			if err := mp.Update("k", 7); err != nil {
				return err
			}
			if n, err := mp.Get("k"); n != 7 || err != nil { // sends MAP_SET, MAP_GET
				return fmt.Errorf("map %d %v", n, err)
			}
			l.Clear() // in the result
			return nil
		},
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	res := h.process(m, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b)
	requireOK(t, res)
	var want abi.OpWriter
	want.ValueSet(0, []byte("3"))
	want.ListAppend(1, []byte(`"x"`))
	want.ListRead(1, 0, defaultPageBytes)
	req0 := string(want.Bytes())
	want.Reset()
	want.MapSet(2, []byte("k"), []byte("7"))
	want.MapGet(2, []byte("k"))
	req1 := string(want.Bytes())
	if len(h.requests) != 2 || string(h.requests[0]) != req0 || string(h.requests[1]) != req1 {
		t.Fatalf("requests %q, want %q and %q", h.requests, req0, req1)
	}
	want.Reset()
	want.ListClear(1)
	if string(res[0].ops) != string(want.Bytes()) {
		t.Fatalf("result ops %q", res[0].ops)
	}
	requireDump(t, h, `"k"`, "v=3 m={k:7,}")
}

// TestListState covers every ListState op.
func TestListState(t *testing.T) {
	var l *ListState[int]
	var step func() error
	p := &rawProc{
		init: func(h *ProcessorHandle) error { l = NewListState[int](h, "l"); return nil },
		rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error { return step() },
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	run := func(f func() error) {
		t.Helper()
		step = f
		requireOK(t, h.process(m, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b))
	}
	all := func() []int { return collect(l.All()) }
	run(func() error {
		if l.Exists() || len(all()) != 0 {
			return errors.New("new list exists")
		}
		if err := l.AppendAll(nil); err != nil {
			return err
		}
		if err := l.Put([]int{1, 2}); err != nil {
			return err
		}
		if err := l.Append(3); err != nil {
			return err
		}
		if err := l.AppendAll([]int{4, 5}); err != nil {
			return err
		}
		if got := all(); !reflect.DeepEqual(got, []int{1, 2, 3, 4, 5}) || !l.Exists() {
			return fmt.Errorf("list %v", got)
		}
		return nil
	})
	requireDump(t, h, `"k"`, "l=[1 2 3 4 5]")
	run(func() error { return l.Put([]int{9}) })
	requireDump(t, h, `"k"`, "l=[9]")
	run(func() error {
		l.Clear()
		if l.Exists() {
			return errors.New("exists after Clear")
		}
		return nil
	})
	requireDump(t, h, `"k"`, "")
	run(func() error { return l.Put(nil) })
	requireDump(t, h, `"k"`, "")

	// Null elements and undecodable elements.
	var lp *ListState[*int]
	p2 := &rawProc{
		init: func(h *ProcessorHandle) error { lp = NewListState[*int](h, "l"); return nil },
		rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error {
			one := 1
			if err := lp.Append(nil); err != ErrNullState {
				return fmt.Errorf("Append(nil): %v", err)
			}
			if err := lp.Put([]*int{&one, nil}); !errors.Is(err, ErrNullState) || err.Error() != "element 1: "+ErrNullState.Error() {
				return fmt.Errorf("Put with nil: %v", err)
			}
			collect(lp.All())
			return nil
		},
	}
	m2, h2 := newProcModule(t, abi.TimeoutNone, p2)
	h2.keys[`"k"`] = &keyState{vars: []varState{{list: []entry{{b: []byte("1")}, {b: []byte(`"x"`)}}}}}
	res := h2.process(m2, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b)
	requireErrContains(t, res[0].err, "decoding state variable l: json: cannot unmarshal string")
	requireDump(t, h2, `"k"`, `l=[1 "x"]`)
}

// TestListDropFirst: DropFirst sends one LIST_DROP_FIRST (none for 0) and the list loses its
// front; a negative count is an error that sends nothing, and a count past the end is refused
// by the host, which fails the call and keeps the list.
func TestListDropFirst(t *testing.T) {
	var l *ListState[int]
	var step func() error
	p := &rawProc{
		init: func(h *ProcessorHandle) error { l = NewListState[int](h, "l"); return nil },
		rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error { return step() },
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	run := func(f func() error) []resultV2 {
		t.Helper()
		step = f
		return h.process(m, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b)
	}
	requireOK(t, run(func() error { return l.AppendAll([]int{1, 2, 3, 4}) }))
	res := run(func() error {
		if err := l.DropFirst(0); err != nil {
			return err
		}
		if err := l.DropFirst(2); err != nil {
			return err
		}
		if got := collect(l.All()); !reflect.DeepEqual(got, []int{3, 4}) {
			return fmt.Errorf("list %v after DropFirst(2)", got)
		}
		return l.DropFirst(1) // in the result
	})
	requireOK(t, res)
	var want abi.OpWriter
	want.ListDropFirst(0, 1)
	if string(res[0].ops) != string(want.Bytes()) {
		t.Fatalf("result ops %q, want %q", res[0].ops, want.Bytes())
	}
	requireDump(t, h, `"k"`, "l=[4]")

	// Hostile: a negative count, a count past the end.
	requireOK(t, run(func() error {
		if err := l.DropFirst(-1); err == nil || !strings.Contains(err.Error(), "-1 elements is not a count") {
			return fmt.Errorf("DropFirst(-1): %v", err)
		}
		return nil
	}))
	requireDump(t, h, `"k"`, "l=[4]")
	res = run(func() error {
		if err := l.DropFirst(2); err != nil {
			return err
		}
		collect(l.All()) // the host refuses the request
		return nil
	})
	if res[0].status == abi.StatusOK {
		t.Fatalf("DropFirst past the end: %+v, want a failed group", res[0])
	}
	requireDump(t, h, `"k"`, "l=[4]")
}

// TestMapState covers every MapState op.
func TestMapState(t *testing.T) {
	var mp *MapState[string]
	var step func() error
	p := &rawProc{
		init: func(h *ProcessorHandle) error { mp = NewMapState[string](h, "m"); return nil },
		rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error { return step() },
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	run := func(f func() error) {
		t.Helper()
		step = f
		requireOK(t, h.process(m, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b))
	}
	run(func() error {
		if mp.Exists() || mp.Contains("a") {
			return errors.New("new map exists")
		}
		if _, err := mp.Get("a"); err != ErrNoState {
			return fmt.Errorf("Get: %v", err)
		}
		for _, kv := range [][2]string{{"b", "B"}, {"a", "A"}, {"é", "E"}, {"", "empty"}, {"c", "C"}} {
			if err := mp.Update(kv[0], kv[1]); err != nil {
				return err
			}
		}
		mp.Remove("c")
		mp.Remove("nothing")
		if v, ok := mp.GetOption("a"); !ok || v != "A" || !mp.Contains("") || mp.Contains("c") || !mp.Exists() {
			return fmt.Errorf("GetOption %q %v", v, ok)
		}
		var all []string
		for k, v := range mp.All() {
			all = append(all, k+":"+v)
		}
		keys, values := collect(mp.Keys()), collect(mp.Values())
		if !reflect.DeepEqual(all, []string{":empty", "a:A", "b:B", "é:E"}) ||
			!reflect.DeepEqual(keys, []string{"", "a", "b", "é"}) ||
			!reflect.DeepEqual(values, []string{"empty", "A", "B", "E"}) {
			return fmt.Errorf("All %q Keys %q Values %q", all, keys, values)
		}
		return nil
	})
	requireDump(t, h, `"k"`, `m={:"empty",a:"A",b:"B",é:"E",}`)
	run(func() error {
		mp.Clear()
		if mp.Exists() || len(collect(mp.Keys())) != 0 {
			return errors.New("exists after Clear")
		}
		return mp.Update("z", "Z")
	})
	requireDump(t, h, `"k"`, `m={z:"Z",}`)

	// Null and undecodable values.
	var mi *MapState[*int]
	p2 := &rawProc{
		init: func(h *ProcessorHandle) error { mi = NewMapState[*int](h, "m"); return nil },
		rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error {
			if err := mi.Update("a", nil); err != ErrNullState {
				return fmt.Errorf("Update nil: %v", err)
			}
			if _, err := mi.Get("bad"); err == nil {
				return errors.New("Get of a bad value")
			}
			for range mi.All() {
			}
			return nil
		},
	}
	m2, h2 := newProcModule(t, abi.TimeoutNone, p2)
	h2.keys[`"k"`] = &keyState{vars: []varState{{m: map[string]entry{"bad": {b: []byte(`"x"`)}}}}}
	res := h2.process(m2, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b)
	requireErrContains(t, res[0].err, "decoding state variable m: json: cannot unmarshal string")
}

func collect[T any](seq iter.Seq[T]) []T {
	var out []T
	for v := range seq {
		out = append(out, v)
	}
	return out
}

// TestTTL checks that values, list elements and map entries written with a TTL are invisible
// from T + ttl on, each on its own.
func TestTTL(t *testing.T) {
	var v *ValueState[int]
	var l *ListState[int]
	var mp *MapState[int]
	var step func(T int64) error
	p := &rawProc{
		init: func(h *ProcessorHandle) error {
			v = NewValueState[int](h, "v", WithTTL(1000*1e6))
			l = NewListState[int](h, "l", WithTTL(1000*1e6))
			mp = NewMapState[int](h, "m", WithTTL(1000*1e6))
			return nil
		},
		rows: func(k Key, r iter.Seq[json.RawMessage], tm *Timers, o *Emitter[string]) error {
			return step(tm.CurrentProcessingTimeMs())
		},
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	if h.decls[0].TTLMs != 1000 {
		t.Fatalf("decls %+v", h.decls)
	}
	write := func(T int64) error {
		if err := v.Update(int(T)); err != nil {
			return err
		}
		if err := mp.Update(fmt.Sprint(T), int(T)); err != nil {
			return err
		}
		return l.Append(int(T))
	}
	var got string
	read := func(int64) error {
		n, _ := v.GetOption()
		got = fmt.Sprint(n, collect(l.All()), collect(mp.Keys()), l.Exists(), mp.Exists())
		return nil
	}
	for _, s := range []struct {
		T    int64
		f    func(int64) error
		want string
	}{
		{1000, write, ""},
		{1500, write, ""},
		{1999, read, "1500 [1000 1500] [1000 1500] true true"},
		{2000, read, "1500 [1500] [1500] true true"},
		{2500, read, "0 [] [] false false"},
	} {
		step = s.f
		requireOK(t, h.process(m, newV2Buf(s.T, 0, 1).data(`"k"`, `{}`).b))
		if s.want != "" && got != s.want {
			t.Fatalf("T=%d: got %s, want %s", s.T, got, s.want)
		}
	}
}
