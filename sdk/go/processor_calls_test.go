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

// TestPaging writes a 10k-element list and a 10k-entry map, then reads them back with a small
// max_bytes, and checks that stopping after the first element fetches one page only.
func TestPaging(t *testing.T) {
	const n = 10000
	var l *ListState[int]
	var mp *MapState[int]
	var step func() error
	p := &rawProc{
		init: func(h *ProcessorHandle) error {
			l, mp = NewListState[int](h, "l"), NewMapState[int](h, "m")
			return nil
		},
		rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error { return step() },
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	engineOf(m).pageBytes = 100
	run := func(f func() error) {
		t.Helper()
		step = f
		requireOK(t, h.process(m, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b))
	}
	run(func() error {
		vs := make([]int, n)
		for i := range vs {
			vs[i] = i
			if err := mp.Update(fmt.Sprintf("%05d", i), i); err != nil {
				return err
			}
		}
		return l.AppendAll(vs)
	})
	h.requests = nil
	run(func() error {
		i := 0
		for v := range l.All() {
			if v != i {
				return fmt.Errorf("element %d is %d", i, v)
			}
			i++
		}
		if i != n {
			return fmt.Errorf("%d elements", i)
		}
		i = 0
		for k, v := range mp.All() {
			if v != i || k != fmt.Sprintf("%05d", i) {
				return fmt.Errorf("entry %d is %s:%d", i, k, v)
			}
			i++
		}
		if i != n {
			return fmt.Errorf("%d entries", i)
		}
		return nil
	})
	// Elements take 4+4 bytes (8+4 for "1000"...), entries 4+5+4+4: about 20 and 6 per page.
	if len(h.requests) < n/20+n/6 {
		t.Fatalf("%d requests: the reads were not paged", len(h.requests))
	}
	h.sent = 0
	run(func() error {
		for range l.All() {
			break
		}
		for range mp.Keys() {
			break
		}
		return nil
	})
	if h.sent > 40 {
		t.Fatalf("reading one element fetched %d", h.sent)
	}
}

// TestRespCapRetry checks the retry of 9.5: answers bigger than the buffer are asked again
// (the reads only) with a buffer of the size the host reported; the writes are sent once.
func TestRespCapRetry(t *testing.T) {
	var v *ValueState[string]
	var l *ListState[string]
	big := strings.Repeat("x", 100)
	p := &rawProc{
		init: func(h *ProcessorHandle) error {
			v, l = NewValueState[string](h, "v"), NewListState[string](h, "l")
			return nil
		},
		rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error {
			if err := l.Append("once"); err != nil {
				return err
			}
			s, err := v.Get()
			if err != nil || s != big {
				return fmt.Errorf("Get: %.10q %v", s, err)
			}
			return nil
		},
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	engineOf(m).respMin = 16
	h.keys[`"k"`] = &keyState{vars: []varState{{val: &entry{b: []byte(`"` + big + `"`)}}, {}}}
	requireOK(t, h.process(m, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b))
	var w abi.OpWriter
	w.ListAppend(1, []byte(`"once"`))
	mark := w.Len()
	w.ValueGet(0)
	if len(h.requests) != 2 || string(h.requests[0]) != string(w.Bytes()) || string(h.requests[1]) != string(w.Bytes()[mark:]) {
		t.Fatalf("requests %q", h.requests)
	}
	requireDump(t, h, `"k"`, `v="`+big+`" l=["once"]`)
}

// TestRefusedRequest checks that a refused state request (9.5: -1) stops the call at once and
// fails its group only, whose writes the host discards.
func TestRefusedRequest(t *testing.T) {
	var v *ValueState[int]
	var mp *MapState[int]
	after := false
	p := &rawProc{
		init: func(h *ProcessorHandle) error {
			v, mp = NewValueState[int](h, "v"), NewMapState[int](h, "m")
			return nil
		},
		rows: func(key Key, _ iter.Seq[json.RawMessage], _ *Timers, out *Emitter[string]) error {
			if err := v.Update(1); err != nil {
				return err
			}
			if key.String() == "refused" {
				mp.Contains("x")
				after = true
			}
			out.Emit("ok")
			return nil
		},
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	h.refuse = func(op abi.Op) bool { return op == abi.OpMapContains }
	res := h.process(m, newV2Buf(1, 0, 2).data(`"refused"`, `{}`).data(`"fine"`, `{}`).b)
	if res[0].status != abi.StatusError || res[0].err != ErrStateRefused.Error() || after || len(res[0].ops) != 0 {
		t.Fatalf("refused group: %+v, ran on: %v", res[0], after)
	}
	if res[1].status != abi.StatusOK {
		t.Fatalf("next group: %+v", res[1])
	}
	requireDump(t, h, `"refused"`, "")
	requireDump(t, h, `"fine"`, "v=1")

	// A module driven natively without a StateHost fails its groups the same way.
	m2 := NewModule()
	RegisterProcessor(m2, p)
	requireInitOKV2(t, m2.Init(initBufV2(abi.TimeoutNone, "{}")))
	res2 := parseResultsV2(t, m2.Process(newV2Buf(1, 0, 1).data(`"refused"`, `{}`).b))
	if res2[0].err != errNoStateHost.Error() {
		t.Fatalf("without a host: %+v", res2[0])
	}
}

func requireInitOKV2(t testing.TB, b []byte) []abi.VarDecl {
	t.Helper()
	st, msg, decls, err := abi.ParseInitResultV2(b)
	if err != nil || st != abi.StatusOK {
		t.Fatalf("init: status %d, %q, %v", st, msg, err)
	}
	return decls
}

func parseResultsV2(t testing.TB, b []byte) []resultV2 {
	t.Helper()
	rr, err := abi.NewResultReaderV2(b)
	if err != nil {
		t.Fatalf("result: %v", err)
	}
	var out []resultV2
	var g abi.GroupResultV2
	for {
		ok, err := rr.Next(&g)
		if err != nil {
			t.Fatalf("result: %v", err)
		}
		if !ok {
			return out
		}
		r := resultV2{status: g.Status, err: string(g.Error), ops: append([]byte(nil), g.Ops...)}
		for e := range g.Emits() {
			r.emits = append(r.emits, string(e))
		}
		out = append(out, r)
	}
}

// TestFailingCallDiscardsWrites checks that a call that fails (error, panic, a row that does
// not decode, an emit that does not encode) has status 1 and no ops, and that the host then
// keeps the state as it was, including the writes sent with reads.
func TestFailingCallDiscardsWrites(t *testing.T) {
	var l *ListState[int]
	type row struct {
		N int `json:"n"`
	}
	p := &funcProc[row, func()]{
		init: func(h *ProcessorHandle) error { l = NewListState[int](h, "l"); return nil },
		rows: func(key Key, rows iter.Seq[row], _ *Timers, out *Emitter[func()]) error {
			for r := range rows {
				if err := l.Append(r.N); err != nil {
					return err
				}
			}
			collect(l.All()) // sends the appends
			if err := l.Append(99); err != nil {
				return err
			}
			switch key.String() {
			case "err":
				return errors.New("bad key")
			case "panic":
				panic("boom")
			case "emit":
				out.Emit(func() {})
			}
			return nil
		},
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	buf := newV2Buf(1, 0, 5).data(`"err"`, `{"n":1}`).data(`"panic"`, `{"n":1}`).data(`"row"`, `{"n":1}`, `{"n":"x"}`).
		data(`"emit"`, `{"n":1}`).data(`"ok"`, `{"n":1}`).b
	res := h.process(m, buf)
	for i, want := range []string{"bad key", "panic: boom", "row 1: json: cannot unmarshal", "emit: json: unsupported type"} {
		if res[i].status != abi.StatusError || !strings.HasPrefix(res[i].err, want) || len(res[i].ops) != 0 {
			t.Fatalf("group %d: %+v, want error %q", i, res[i], want)
		}
	}
	for _, k := range []string{`"err"`, `"panic"`, `"row"`, `"emit"`} {
		requireDump(t, h, k, "")
	}
	requireDump(t, h, `"ok"`, "l=[1 99]")
}

// TestTimers covers Timers: register, delete, list, the batch's times, a TIMERS group called
// once per timer in order with a timer deleted by an earlier call of the group skipped (and
// one deleted then registered again not skipped), and mode none.
func TestTimers(t *testing.T) {
	var fired []int64
	var listed [][]int64
	p := &rawProc{
		rows: func(key Key, _ iter.Seq[json.RawMessage], tm *Timers, out *Emitter[string]) error {
			for _, ts := range []int64{400, 100, 200, 300, 500, 100} {
				if err := tm.Register(ts); err != nil {
					return err
				}
			}
			if err := tm.Delete(500); err != nil {
				return err
			}
			listed = append(listed, tm.List())
			wm, err := tm.CurrentWatermarkMs()
			out.Emit(fmt.Sprint(tm.CurrentProcessingTimeMs(), wm, err))
			return nil
		},
		timer: func(key Key, ts int64, tm *Timers, out *Emitter[string]) error {
			fired = append(fired, ts)
			if ts == 100 {
				_ = tm.Delete(200)
				_ = tm.Delete(300)
				_ = tm.Register(300) // registered again: it fires
				_ = tm.Delete(100)   // itself: no effect on this batch
			}
			if ts == 300 {
				listed = append(listed, tm.List())
			}
			out.Emit(fmt.Sprint("fired ", ts))
			return nil
		},
	}
	m, h := newProcModule(t, abi.TimeoutProcessingTime, p)
	res := h.process(m, newV2Buf(50, 7, 1).data(`"k"`, `{}`).b)
	requireOK(t, res)
	if res[0].emits[0] != `"50 7 <nil>"` {
		t.Fatalf("emits %v", res[0].emits)
	}
	requireDump(t, h, `"k"`, "timers=[100 200 300 400]")
	res = h.process(m, newV2Buf(1000, 7, 1).timers(`"k"`, 100, 200, 300, 400).b)
	requireOK(t, res)
	if want := []int64{100, 300, 400}; !reflect.DeepEqual(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	if want := [][]int64{{100, 200, 300, 400}, {300, 400}}; !reflect.DeepEqual(listed, want) {
		t.Fatalf("listed %v, want %v", listed, want)
	}
	if want := []string{`"fired 100"`, `"fired 300"`, `"fired 400"`}; !reflect.DeepEqual(res[0].emits, want) {
		t.Fatalf("emits %v", res[0].emits)
	}

	// A failing timer call stops the group.
	fired = nil
	p.timer = func(key Key, ts int64, tm *Timers, out *Emitter[string]) error {
		fired = append(fired, ts)
		return errors.New("boom")
	}
	res = h.process(m, newV2Buf(1000, 7, 1).timers(`"k"`, 300, 400).b)
	if res[0].status != abi.StatusError || !reflect.DeepEqual(fired, []int64{300}) {
		t.Fatalf("%+v, fired %v", res[0], fired)
	}

	// Under timeout mode none, timers are refused by the SDK (before the host would).
	p.rows = func(key Key, _ iter.Seq[json.RawMessage], tm *Timers, out *Emitter[string]) error {
		if err := tm.Register(1); err != ErrTimersNotAllowed {
			return fmt.Errorf("Register: %v", err)
		}
		if err := tm.Delete(1); err != ErrTimersNotAllowed {
			return fmt.Errorf("Delete: %v", err)
		}
		if tm.List() != nil {
			return errors.New("List")
		}
		return nil
	}
	m2, h2 := newProcModule(t, abi.TimeoutNone, p)
	requireOK(t, h2.process(m2, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b))
	if len(h2.requests) != 0 {
		t.Fatalf("requests %q", h2.requests)
	}
}

// initProc is a processor with the variables of the initial-state tests.
type initProc struct {
	rawProc
	custom bool
}

func (p *initProc) HandleInitialState(key Key, initial []byte, tm *Timers, out *Emitter[string]) error {
	out.Emit(string(initial))
	return tm.Register(42)
}

// TestInitialState covers INITIAL groups: the default that sets the declared variables from
// the object, its errors, and a processor's own HandleInitialState.
func TestInitialState(t *testing.T) {
	type ev struct {
		E int `json:"e"`
	}
	p := &rawProc{
		init: func(h *ProcessorHandle) error {
			NewValueState[int](h, "count")
			NewListState[ev](h, "events")
			NewMapState[bool](h, "seen")
			NewValueState[int](h, "other")
			return nil
		},
	}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	res := h.process(m, newV2Buf(1, 0, 7).
		initial(`"a"`, `{"count": 3, "events": [{"e": 1}, {"e":2}], "seen": {"b": true, "a": false}, "other": null}`).
		initial(`"b"`, `{}`).
		initial(`"undeclared"`, `{"count": 1, "zz": 1, "yy": 2}`).
		initial(`"notarray"`, `{"events": {"e": 1}}`).
		initial(`"nullelem"`, `{"events": [null]}`).
		initial(`"badtype"`, `{"seen": {"a": 1}}`).
		initial(`"notobject"`, `[1]`).b)
	requireOK(t, res[:2])
	requireDump(t, h, `"a"`, `count=3 events=[{"e":1} {"e":2}] seen={a:false,b:true,}`)
	requireDump(t, h, `"b"`, "")
	for i, want := range []string{
		`groupstate: initial state names undeclared state variables ["yy" "zz"] (declared: count, events, seen, other)`,
		`groupstate: initial state of list events: want a JSON array, got {"e": 1}`,
		`groupstate: initial state of list events: element 0: groupstate: null is not a valid state value`,
		`groupstate: initial state of map seen: key "a": json: cannot unmarshal number into Go value of type bool`,
		`groupstate: initial state is not a JSON object of state variables: [1]`,
	} {
		if r := res[2+i]; r.status != abi.StatusError || r.err != want {
			t.Errorf("group %d: %q, want %q", 2+i, r.err, want)
		}
	}

	// A processor with HandleInitialState handles it itself.
	ip := &initProc{}
	m2, h2 := newProcModule(t, abi.TimeoutEventTime, StatefulProcessor[json.RawMessage, string](ip))
	res = h2.process(m2, newV2Buf(1, 0, 1).initial(`"a"`, `{"count":1}`).b)
	requireOK(t, res)
	if !reflect.DeepEqual(res[0].emits, []string{`"{\"count\":1}"`}) {
		t.Fatalf("emits %v", res[0].emits)
	}
	requireDump(t, h2, `"a"`, "timers=[42]")
}

// TestProcessorRegistration covers the module-level rules: one kind of handler per module,
// one processor, the ABI version, init failures.
func TestProcessorRegistration(t *testing.T) {
	mustPanic := func(what, want string, f func()) {
		t.Helper()
		defer func() {
			t.Helper()
			if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), want) {
				t.Errorf("%s: panic %v, want %q", what, v, want)
			}
		}()
		f()
	}
	p := &rawProc{}
	m := NewModule()
	if m.ABIVersion() != abi.Version {
		t.Fatal("a new module is not v1")
	}
	RegisterProcessor(m, p)
	if m.ABIVersion() != abi.Version2 {
		t.Fatal("a module with a processor is not v2")
	}
	mustPanic("HandleRaw after Process", "not both", func() { m.HandleRaw(func(*RawGroup) error { return nil }) })
	mustPanic("Process twice", "called twice", func() { RegisterProcessor(m, p) })
	m1 := NewModule()
	m1.HandleRaw(func(*RawGroup) error { return nil })
	mustPanic("Process after HandleRaw", "not both", func() { RegisterProcessor(m1, p) })
	mustPanic("nil processor", "nil processor", func() { RegisterProcessor[int, int](NewModule(), nil) })

	initErr := func(p StatefulProcessor[json.RawMessage, string], in []byte) string {
		m := NewModule()
		RegisterProcessor(m, p)
		st, msg0, decls, err := abi.ParseInitResultV2(m.Init(in))
		msg := string(msg0) // m.Process reuses the buffer
		if err != nil || (st == abi.StatusOK) != (msg == "") {
			t.Fatalf("init result: %v %v %q %v", st, err, msg, decls)
		}
		if out := m.Process(newV2Buf(1, 0, 0).b); st != abi.StatusOK && callError(t, out) != "groupstate: process called before a successful init" {
			t.Fatal("process after a failed init")
		}
		return msg
	}
	declare := func(f func(h *ProcessorHandle)) *rawProc {
		return &rawProc{init: func(h *ProcessorHandle) error { f(h); return nil }}
	}
	for _, tc := range []struct {
		p    *rawProc
		in   []byte
		want string
	}{
		{p, initBuf(abi.TimeoutNone, 0, "{}"), "groupstate: host ABI version 1, module implements version 2"},
		{p, initBufV2(3, "{}"), "groupstate: unknown timeout mode 3"},
		{p, initBufV2(0, "[]"), "groupstate: config is not a JSON object"},
		{&rawProc{init: func(*ProcessorHandle) error { return errors.New("no") }}, initBufV2(0, "{}"), "no"},
		{&rawProc{init: func(*ProcessorHandle) error { panic("oops") }}, initBufV2(0, "{}"), "groupstate: panic in Init: oops"},
		{declare(func(h *ProcessorHandle) { NewValueState[int](h, "Bad") }), initBufV2(0, "{}"), `groupstate: state variable "Bad": `},
		{declare(func(h *ProcessorHandle) { NewValueState[int](h, "a"); NewMapState[int](h, "a") }), initBufV2(0, "{}"), `groupstate: state variable "a": declared twice`},
		{declare(func(h *ProcessorHandle) { NewListState[int](h, "a", WithTTL(0)) }), initBufV2(0, "{}"), `groupstate: state variable "a": ttl 0s is not at least 1ms`},
		{declare(func(h *ProcessorHandle) {
			for i := range abi.MaxVars + 1 {
				NewValueState[int](h, fmt.Sprintf("v%d", i))
			}
		}), initBufV2(0, "{}"), "groupstate: abi: "},
		{declare(func(h *ProcessorHandle) {
			if h.Config().Name() != "test" || string(h.Config().JSON()) != `{"x":1}` {
				panic("config")
			}
			NewValueState[int](h, "a")
			NewListState[int](h, "b", WithTTL(1500*1e6))
			NewMapState[int](h, "c")
		}), initBufV2(1, `{"x":1}`), ""},
	} {
		if got := initErr(tc.p, tc.in); !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("init error %q, want %q", got, tc.want)
		}
	}

	// Declaring or using a variable outside its place panics; in a call that fails the group.
	var v *ValueState[int]
	p2 := &rawProc{init: func(h *ProcessorHandle) error { v = NewValueState[int](h, "v"); return nil }}
	p2.rows = func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error {
		NewValueState[int](&ProcessorHandle{e: engineOf(m)}, "late")
		return nil
	}
	m2, h2 := newProcModule(t, abi.TimeoutNone, p2)
	mustPanic("use outside a call", "groupstate: ValueState.Update used outside a call of the processor", func() { _ = v.Update(1) })
	res := h2.process(m2, newV2Buf(1, 0, 1).data(`"k"`, `{}`).b)
	requireErrContains(t, res[0].err, `panic: groupstate: NewValueState("late") called outside the processor's Init`)
}

// TestProcessorMalformedInput checks the whole-call errors of a v2 process buffer.
func TestProcessorMalformedInput(t *testing.T) {
	m, _ := newProcModule(t, abi.TimeoutProcessingTime, &rawProc{rows: func(Key, iter.Seq[json.RawMessage], *Timers, *Emitter[string]) error { return nil }})
	m.SetStateHost(nil)
	mixed := newV2Buf(1, 0, 2).data(`"a"`, `{}`).timers(`"b"`, 1).b
	requireErrContains(t, callError(t, m.Process(mixed)), "groupstate: process buffer: group 1: abi: malformed")
	requireErrContains(t, callError(t, m.Process([]byte{1})), "groupstate: process buffer: ")
	if res := parseResultsV2(t, m.Process(newV2Buf(1, 0, 0).b)); len(res) != 0 {
		t.Fatalf("empty call: %v", res)
	}
}

// TestProcessorFastPaths checks that rows, state values and outputs with UnmarshalJSON and
// AppendJSON (jsonobj) go through them.
func TestProcessorFastPaths(t *testing.T) {
	var sum *ValueState[fastState]
	var hist *ListState[fastState]
	var byKey *MapState[fastState]
	p := &funcProc[fastRow, fastOut]{
		init: func(h *ProcessorHandle) error {
			sum, hist, byKey = NewValueState[fastState](h, "sum"), NewListState[fastState](h, "hist"), NewMapState[fastState](h, "by")
			return nil
		},
		rows: func(key Key, rows iter.Seq[fastRow], tm *Timers, out *Emitter[fastOut]) error {
			s, _ := sum.GetOption()
			for r := range rows {
				s.Sum += r.V
			}
			out.Emit(fastOut{Key: key.JSON(), Sum: s.Sum})
			if err := hist.Append(s); err != nil {
				return err
			}
			if err := byKey.Update(key.String(), s); err != nil {
				return err
			}
			for range hist.All() {
			}
			return sum.Update(s)
		},
	}
	calls = struct{ row, stateDec, stateEnc, out int }{}
	m, h := newProcModule(t, abi.TimeoutNone, p)
	h.keys[`"a"`] = &keyState{vars: []varState{{val: &entry{b: []byte(`{"sum":10}`)}}, {}, {m: map[string]entry{}}}}
	res := h.process(m, newV2Buf(1, 0, 1).data(`"a"`, `{"v":1}`, `{"v":2}`).b)
	requireOK(t, res)
	if res[0].emits[0] != `{"key":"a","sum":13}` {
		t.Fatalf("emits %v", res[0].emits)
	}
	requireDump(t, h, `"a"`, `sum={"sum":13} hist=[{"sum":13}] by={a:{"sum":13},}`)
	// rows 2; decoded: sum 1, hist 1; encoded: hist, by, sum; out 1.
	if want := (struct{ row, stateDec, stateEnc, out int }{2, 2, 3, 1}); calls != want {
		t.Fatalf("fast paths ran %+v, want %+v", calls, want)
	}
}
