package groupstate

import (
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

// TestMultipleGroups runs several groups in one call and checks each sees its own key, rows,
// state and flags, and that results come back in order with emits in emission order.
func TestMultipleGroups(t *testing.T) {
	h := func(g *RawGroup) error {
		st := g.State()
		prefix := g.Key().String()
		if st.HasTimedOut() {
			g.Emit([]byte(prefix + ":timeout"))
			st.Remove()
			return nil
		}
		n := 0
		for row := range g.Rows() {
			g.Emit([]byte(prefix + ":" + string(row)))
			n++
		}
		if n != g.RowCount() {
			return fmt.Errorf("iterated %d rows, RowCount %d", n, g.RowCount())
		}
		old, _ := st.GetOption()
		return st.Update(append(append([]byte{}, old...), byte('0'+n)))
	}
	res := run(t, abi.TimeoutNone, 0, 1, 0, h,
		group{key: `"a"`, rows: []string{`1`, `2`, `3`}},
		group{key: `"b"`, state: []byte("s"), rows: []string{`4`}},
		group{key: `7`, flags: abi.GroupTimedOut, state: []byte("t")},
		group{key: `"d"`, rows: []string{`5`, `6`}},
	)
	want := []result{
		{action: abi.ActionUpdate, state: "3", emits: []string{"a:1", "a:2", "a:3"}},
		{action: abi.ActionUpdate, state: "s1", emits: []string{"b:4"}},
		{action: abi.ActionRemove, emits: []string{"7:timeout"}},
		{action: abi.ActionUpdate, state: "2", emits: []string{"d:5", "d:6"}},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("got  %+v\nwant %+v", res, want)
	}
}

// TestHandlerFailures checks that an error or a panic fails only its group, with its message,
// and that the module keeps working.
func TestHandlerFailures(t *testing.T) {
	h := func(g *RawGroup) error {
		g.Emit([]byte("before"))
		switch g.Key().String() {
		case "err":
			return errors.New("bad key")
		case "panic":
			panic("boom")
		case "nil":
			var m map[string]int
			//lint:ignore SA5000 the point: a runtime error, recovered like any panic
			m["x"] = 1
		}
		return g.State().Update([]byte("ok"))
	}
	m := newTestModule(t, abi.TimeoutNone, 0, "{}", h)
	for range 2 {
		res := parseResults(t, m.Process(processBuf(1, 0,
			group{key: `"err"`}, group{key: `"a"`}, group{key: `"panic"`}, group{key: `"nil"`}, group{key: `"b"`})))
		if len(res) != 5 {
			t.Fatalf("got %d results", len(res))
		}
		for i, want := range []string{"bad key", "", "panic: boom", "panic: assignment to entry in nil map", ""} {
			if want == "" {
				if res[i].status != abi.StatusOK || res[i].state != "ok" {
					t.Fatalf("group %d: %+v", i, res[i])
				}
				continue
			}
			if res[i].status != abi.StatusError || res[i].err != want {
				t.Fatalf("group %d: got %+v, want error %q", i, res[i], want)
			}
		}
	}
}

// TestKey checks Key's JSON and String forms.
func TestKey(t *testing.T) {
	tests := []struct{ json, str string }{
		{`"alice"`, "alice"},
		{`"a\"b\u00e9"`, `a"bé`},
		{`42`, "42"},
		{`-1.5e3`, "-1.5e3"},
		{`""`, ""},
	}
	for _, tc := range tests {
		var gotJSON, gotStr string
		var isStr bool
		run(t, abi.TimeoutNone, 0, 1, 0, func(g *RawGroup) error {
			gotJSON, gotStr, isStr = string(g.Key().JSON()), g.Key().String(), g.Key().IsString()
			return nil
		}, group{key: tc.json})
		if gotJSON != tc.json || gotStr != tc.str || isStr != strings.HasPrefix(tc.json, `"`) {
			t.Errorf("key %s: JSON %s, String %q, IsString %v", tc.json, gotJSON, gotStr, isStr)
		}
	}
}

// TestInit covers init successes and failures.
func TestInit(t *testing.T) {
	ok := func(g *RawGroup) error { return nil }
	tests := []struct {
		name    string
		handler RawHandler
		onInit  func(Config) error
		buf     []byte
		wantErr string
	}{
		{"ok", ok, nil, initBuf(abi.TimeoutEventTime, abi.InitHasWatermark, `{"a":1}`), ""},
		{"empty config", ok, nil, initBuf(abi.TimeoutNone, 0, ``), ""},
		{"no handler", nil, nil, initBuf(abi.TimeoutNone, 0, `{}`), "no handler registered"},
		{"malformed", ok, nil, []byte{1, 2, 3}, "abi: malformed buffer"},
		{"wrong version", ok, nil, abi.AppendInit(nil, abi.Init{ABIVersion: 99, Config: []byte("{}")}), "host ABI version 99"},
		{"unknown mode", ok, nil, initBuf(7, 0, `{}`), "unknown timeout mode 7"},
		{"config not an object", ok, nil, initBuf(abi.TimeoutNone, 0, `[1]`), "config is not a JSON object"},
		{"OnInit error", ok, func(Config) error { return errors.New("bad gap") }, initBuf(abi.TimeoutNone, 0, `{}`), "bad gap"},
		{"OnInit panic", ok, func(Config) error { panic("oops") }, initBuf(abi.TimeoutNone, 0, `{}`), "panic in OnInit: oops"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewModule()
			m.HandleRaw(tc.handler)
			var seen Config
			m.OnInit(func(c Config) error { seen = c; return nil })
			if tc.onInit != nil {
				m.OnInit(tc.onInit)
			}
			st, msg, err := abi.ParseInitResult(m.Init(tc.buf))
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr == "" {
				if st != abi.StatusOK {
					t.Fatalf("init failed: %s", msg)
				}
				if seen.Name() != "test" || seen.JSON() == nil {
					t.Fatalf("OnInit saw %+v", seen)
				}
				return
			}
			if st != abi.StatusError {
				t.Fatalf("init succeeded, want %q", tc.wantErr)
			}
			requireErrContains(t, string(msg), tc.wantErr)
			requireErrContains(t, callError(t, m.Process(processBuf(1, 0))), "before a successful init")
		})
	}
}

// TestMalformedProcess checks that bad process buffers fail the whole call.
func TestMalformedProcess(t *testing.T) {
	m := newTestModule(t, abi.TimeoutNone, 0, "{}", func(g *RawGroup) error { return nil })
	good := processBuf(1, 0, group{key: `"a"`, rows: []string{"1"}})
	tests := map[string][]byte{
		"empty":         nil,
		"short header":  good[:10],
		"truncated":     good[:len(good)-1],
		"trailing":      append(append([]byte{}, good...), 0),
		"too many":      append([]byte{9, 0, 0, 0}, good[4:]...),
		"huge row len":  append(processBuf(1, 0)[:abi.ProcessHeaderSize:abi.ProcessHeaderSize], 0xff),
		"count no data": {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	}
	for name, b := range tests {
		requireErrContains(t, callError(t, m.Process(b)), "groupstate: process buffer")
		_ = name
	}
	if res := parseResults(t, m.Process(good)); len(res) != 1 || res[0].status != abi.StatusOK {
		t.Fatalf("module broken after bad buffers: %+v", res)
	}
}

// TestRawAllocations checks that the raw layer allocates nothing per call, group or row. (A
// range-over-func loop in the handler costs the handler two allocations per loop, whatever the
// number of rows: the Go compiler moves the loop body to the heap when the iterator is not
// known statically.)
func TestRawAllocations(t *testing.T) {
	state := []byte(`{"n":1}`)
	handlers := map[string]struct {
		h        RawHandler
		perGroup float64
	}{
		"no loop": {func(g *RawGroup) error {
			g.Emit(g.Key().JSON())
			s := g.State()
			v, _ := s.GetOption()
			if err := s.Update(v); err != nil {
				return err
			}
			return s.SetTimeoutDuration(1000000000)
		}, 0},
		"range rows": {func(g *RawGroup) error {
			for row := range g.Rows() {
				g.Emit(row)
			}
			return nil
		}, 2},
	}
	for name, tc := range handlers {
		for _, rows := range []int{1, 10} {
			m := newTestModule(t, abi.TimeoutProcessingTime, 0, "{}", tc.h)
			var groups []group
			for i := range 100 {
				g := group{key: fmt.Sprintf(`"k%d"`, i), state: state}
				for j := range rows {
					g.rows = append(g.rows, fmt.Sprintf(`{"a":%d}`, j))
				}
				groups = append(groups, g)
			}
			buf := processBuf(1, 0, groups...)
			m.Process(buf)
			if n := testing.AllocsPerRun(100, func() { m.Process(buf) }); n != 100*tc.perGroup {
				t.Errorf("%s, %d rows per group: %v allocations per call of 100 groups, want %v", name, rows, n, 100*tc.perGroup)
			}
		}
	}
}

// BenchmarkProcessRaw measures the raw layer per group.
func BenchmarkProcessRaw(b *testing.B) {
	h := func(g *RawGroup) error {
		for row := range g.Rows() {
			g.Emit(row)
		}
		return g.State().Update([]byte(`{"n":2}`))
	}
	m := newTestModule(b, abi.TimeoutNone, 0, "{}", h)
	var groups []group
	for i := range 1000 {
		groups = append(groups, group{key: fmt.Sprintf(`"k%d"`, i), state: []byte(`{"n":1}`), rows: []string{`{"a":1}`}})
	}
	buf := processBuf(1, 0, groups...)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.Process(buf)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/group")
}

// FuzzProcess feeds arbitrary bytes to Process: it must never panic, and must return either a
// call error or a well-formed result buffer.
func FuzzProcess(f *testing.F) {
	f.Add(processBuf(1, 0, group{key: `"a"`, rows: []string{`{"x":1}`}}))
	f.Add(processBuf(5, 3, group{key: `1`, flags: abi.GroupTimedOut, state: []byte(`{"n":1}`)}, group{key: `"b"`, rows: []string{`[`, `{}`}}))
	f.Add([]byte{})
	h := Typed(func(key Key, rows iter.Seq[map[string]any], st *GroupState[map[string]any], out *Emitter[map[string]any]) error {
		v, _ := st.GetOption()
		for r := range rows {
			out.Emit(r)
		}
		if st.HasTimedOut() {
			st.Remove()
			return nil
		}
		if v == nil {
			v = map[string]any{}
		}
		_ = st.SetTimeoutTimestamp(st.CurrentProcessingTimeMs())
		return st.Update(v)
	})
	m := newTestModule(f, abi.TimeoutEventTime, abi.InitHasWatermark, "{}", h)
	f.Fuzz(func(t *testing.T, b []byte) {
		out := m.Process(b)
		rr, err := abi.NewResultReader(out)
		var ce *abi.CallError
		if errors.As(err, &ce) {
			return
		}
		if err != nil {
			t.Fatalf("bad result: %v", err)
		}
		var g abi.GroupResult
		for {
			ok, err := rr.Next(&g)
			if err != nil {
				t.Fatalf("bad result: %v", err)
			}
			if !ok {
				break
			}
		}
	})
}
