package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/state"
)

// TestV2SessionRefuses: the session refuses an unknown variable, an op of the wrong kind and
// timer ops under timeout: none, answers reads with the abi encoders, fails a group whose
// result emits a row that is not JSON or holds refused writes, and reverts failed groups while
// the others keep their writes.
func TestV2SessionRefuses(t *testing.T) {
	st, err := state.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ks := st.Deployment("d")
	sb := ks.NewBatch(1)
	defer sb.Close()
	vars, err := sb.DeclareVars([]state.VarDecl{{Name: "v", Kind: state.VarValue}, {Name: "l", Kind: state.VarList}})
	if err != nil {
		t.Fatal(err)
	}
	b := &batch{T: 1000, sb: sb}
	groups := []handler.GroupV2{{Kind: abi.GroupData, Key: []byte(`"a"`)}, {Kind: abi.GroupData, Key: []byte(`"b"`)}, {Kind: abi.GroupData, Key: []byte(`"c"`)}}
	s := &v2session{b: b, vars: vars, noTimers: true}
	s.start(groups)

	var w abi.OpWriter
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	refused := func(req []byte, want string) {
		t.Helper()
		_, err := s.Apply(req, nil)
		var g *errGuest
		if !errors.As(err, &g) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Apply: %v, want a refusal containing %q", err, want)
		}
	}
	must(s.Begin(0))
	w.ValueSet(0, []byte("1"))
	w.ValueGet(0)
	ans, err := s.Apply(w.Bytes(), nil)
	must(err)
	if want := abi.AppendValueAnswer(nil, true, []byte("1")); string(ans) != string(want) {
		t.Fatalf("answers %q, want %q", ans, want)
	}
	w.Reset()
	w.ValueGet(2)
	refused(w.Bytes(), "names state variable 2; the module declared 2")
	w.Reset()
	w.ListAppend(0, []byte("x"))
	refused(w.Bytes(), "LIST_APPEND on state variable v, which is a value")
	w.Reset()
	w.TimerRegister(5)
	refused(w.Bytes(), "timer ops are refused under timeout: none")

	must(s.Begin(1))
	w.Reset()
	w.ListAppend(1, []byte("y"))
	_, err = s.Apply(w.Bytes(), nil)
	must(err)
	must(s.Begin(2))
	w.Reset()
	w.ValueSet(0, []byte("3"))
	res := []handler.ResultV2{
		{Err: errors.New("refused")},
		{Emits: [][]byte{[]byte("not json")}},
		{Ops: append([]byte(nil), w.Bytes()...)},
	}
	s.End(0, res)
	if s.fatal != nil {
		t.Fatal(s.fatal)
	}
	if res[0].Err == nil || res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "emitted row 0 is not valid JSON") || res[2].Err != nil {
		t.Fatalf("results %+v", res)
	}
	// a and b are reverted, c keeps its result's write.
	for _, tc := range []struct {
		key  string
		want string
		ok   bool
	}{{`"a"`, "", false}, {`"b"`, "", false}, {`"c"`, "3", true}} {
		txn := sb.Key(vars, []byte(tc.key), 1000)
		v, ok, err := txn.ValueGet(0)
		must(err)
		if ok != tc.ok || string(v) != tc.want {
			t.Fatalf("key %s: %q %v, want %q %v", tc.key, v, ok, tc.want, tc.ok)
		}
		ok, err = txn.ListExists(1)
		must(err)
		if ok {
			t.Fatalf("key %s has a list", tc.key)
		}
		must(txn.Discard())
	}
}

// TestV2SessionListDropFirst: LIST_DROP_FIRST removes a list's front, in a request and in a
// result; beside it, the refusals: a variable index past the declarations, a variable of
// another kind, and a count past the end (the largest u32 too: the ABI's n has no sign), each
// failing the group with a message and changing nothing.
func TestV2SessionListDropFirst(t *testing.T) {
	st, err := state.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sb := st.Deployment("d").NewBatch(1)
	defer sb.Close()
	vars, err := sb.DeclareVars([]state.VarDecl{{Name: "v", Kind: state.VarValue}, {Name: "l", Kind: state.VarList}})
	if err != nil {
		t.Fatal(err)
	}
	b := &batch{T: 1000, sb: sb}
	groups := []handler.GroupV2{{Kind: abi.GroupData, Key: []byte(`"a"`)}, {Kind: abi.GroupData, Key: []byte(`"b"`)}}
	s := &v2session{b: b, vars: vars, noTimers: true}
	s.start(groups)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var w abi.OpWriter
	list := func() string {
		t.Helper()
		w.Reset()
		w.ListRead(1, 0, 1<<20)
		ans, err := s.Apply(w.Bytes(), nil)
		must(err)
		return string(ans)
	}
	want := func(elems ...string) string {
		bb := make([][]byte, len(elems))
		for i, e := range elems {
			bb[i] = []byte(e)
		}
		return string(abi.AppendListReadAnswer(nil, bb, 0))
	}

	must(s.Begin(0))
	w.ListAppend(1, []byte("1"), []byte("2"), []byte("3"), []byte("4"))
	w.ListDropFirst(1, 0)
	w.ListDropFirst(1, 2)
	_, err = s.Apply(w.Bytes(), nil)
	must(err)
	if got := list(); got != want("3", "4") {
		t.Fatalf("after dropping 2: %q, want %q", got, want("3", "4"))
	}
	for _, tc := range []struct {
		write func()
		want  string
	}{
		{func() { w.ListDropFirst(2, 1) }, "LIST_DROP_FIRST names state variable 2; the module declared 2"},
		{func() { w.ListDropFirst(0, 1) }, "LIST_DROP_FIRST on state variable v, which is a value"},
		{func() { w.ListDropFirst(1, 3) }, "LIST_DROP_FIRST: state: invalid state variable operation: drop the first 3 elements of state variable l, which has 2"},
		{func() { w.ListDropFirst(1, 1<<32-1) }, "drop the first 4294967295 elements of state variable l, which has 2"},
	} {
		w.Reset()
		tc.write()
		_, err := s.Apply(w.Bytes(), nil)
		var g *errGuest
		if !errors.As(err, &g) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("Apply: %v, want a refusal containing %q", err, tc.want)
		}
		if got := list(); got != want("3", "4") {
			t.Fatalf("after a refusal: %q, want %q", got, want("3", "4"))
		}
	}

	// In a group's result: applied after the call.
	must(s.Begin(1))
	w.Reset()
	w.ListAppend(1, []byte("x"), []byte("y"))
	_, err = s.Apply(w.Bytes(), nil)
	must(err)
	w.Reset()
	w.ListDropFirst(1, 1)
	res := []handler.ResultV2{{}, {Ops: append([]byte(nil), w.Bytes()...)}}
	s.End(0, res)
	if s.fatal != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("fatal %v, results %+v", s.fatal, res)
	}
	for _, tc := range []struct{ key, want string }{{`"a"`, want("3", "4")}, {`"b"`, want("y")}} {
		txn := sb.Key(vars, []byte(tc.key), 1000)
		elems, _, err := txn.ListRead(1, 0, 1<<20)
		must(err)
		if got := string(abi.AppendListReadAnswer(nil, elems, 0)); got != tc.want {
			t.Fatalf("key %s: %q, want %q", tc.key, got, tc.want)
		}
		must(txn.Discard())
	}
}
