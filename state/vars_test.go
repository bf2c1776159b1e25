package state

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// Variables of the tests: indexes in testDecls.
const (
	vVal  = 0
	vList = 1
	vMap  = 2
	vTTL  = 3 // a list with a TTL of 100 ms
	vMTTL = 4 // a map with a TTL of 100 ms
	vVTTL = 5 // a value with a TTL of 100 ms
)

var testDecls = []VarDecl{
	{Name: "count", Kind: VarValue},
	{Name: "events", Kind: VarList},
	{Name: "seen", Kind: VarMap},
	{Name: "recent", Kind: VarList, TTLMs: 100},
	{Name: "cache", Kind: VarMap, TTLMs: 100},
	{Name: "last", Kind: VarValue, TTLMs: 100},
}

// openVars opens a store on disk with a deployment whose variables are declared (in
// batch 1) and returns them.
func openVars(t testing.TB) (*Store, *Deployment, *Vars, string) {
	t.Helper()
	dir := t.TempDir()
	s := openDisk(t, dir)
	t.Cleanup(func() { _ = s.Close() })
	d := s.Deployment("dep")
	b := d.NewBatch(1)
	vars, err := b.DeclareVars(testDecls)
	requireNoError(t, err)
	_, err = b.Commit()
	requireNoError(t, err)
	return s, d, vars, dir
}

func bs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func strs(bb [][]byte) []string {
	out := []string{}
	for _, b := range bb {
		out = append(out, string(b))
	}
	return out
}

// readList reads all of list v in pages of maxBytes.
func readList(t testing.TB, tx *KeyTxn, v int, maxBytes int) []string {
	t.Helper()
	out := []string{}
	var cursor uint64
	for i := 0; ; i++ {
		elems, next, err := tx.ListRead(v, cursor, maxBytes)
		requireNoError(t, err)
		out = append(out, strs(elems)...)
		if next == 0 {
			return out
		}
		if len(elems) == 0 || i > 1000 {
			t.Fatalf("ListRead: no progress at cursor %d", cursor)
		}
		cursor = next
	}
}

// readMap reads all of map v in pages of maxBytes, as "k=v" strings.
func readMap(t testing.TB, tx *KeyTxn, v int, maxBytes int) []string {
	t.Helper()
	out := []string{}
	var cursor []byte
	for i := 0; ; i++ {
		entries, next, more, err := tx.MapRead(v, cursor, maxBytes)
		requireNoError(t, err)
		for _, e := range entries {
			out = append(out, string(e.Key)+"="+string(e.Value))
		}
		if !more {
			return out
		}
		if len(entries) == 0 || i > 1000 {
			t.Fatalf("MapRead: no progress at cursor %q", cursor)
		}
		cursor = next
	}
}

// snapshotKey reads everything the txn sees of the test variables and timers.
func snapshotKey(t testing.TB, tx *KeyTxn) string {
	t.Helper()
	var sb strings.Builder
	for _, v := range []int{vVal, vVTTL} {
		val, ok, err := tx.ValueGet(v)
		requireNoError(t, err)
		ex, err := tx.ValueExists(v)
		requireNoError(t, err)
		requireEqual(t, ok, ex, "ValueExists")
		fmt.Fprintf(&sb, "v%d=%q/%v ", v, val, ok)
	}
	for _, v := range []int{vList, vTTL} {
		l := readList(t, tx, v, 1)
		requireEqual(t, l, readList(t, tx, v, 1<<20), "list pages")
		ex, err := tx.ListExists(v)
		requireNoError(t, err)
		requireEqual(t, len(l) > 0, ex, "ListExists of %v", l)
		fmt.Fprintf(&sb, "l%d=%v ", v, l)
	}
	for _, v := range []int{vMap, vMTTL} {
		m := readMap(t, tx, v, 1)
		requireEqual(t, m, readMap(t, tx, v, 1<<20), "map pages")
		ex, err := tx.MapExists(v)
		requireNoError(t, err)
		requireEqual(t, len(m) > 0, ex, "MapExists of %v", m)
		fmt.Fprintf(&sb, "m%d=%v ", v, m)
	}
	ts, err := tx.Timers()
	requireNoError(t, err)
	fmt.Fprintf(&sb, "timers=%v", ts)
	return sb.String()
}

func TestVarKindString(t *testing.T) {
	requireEqual(t, "value list map kind(9)", fmt.Sprint(VarValue, " ", VarList, " ", VarMap, " ", VarKind(9)))
}

func TestDeclareVars(t *testing.T) {
	s, d, vars, _ := openVars(t)
	requireEqual(t, len(testDecls), vars.Len())
	requireEqual(t, 2, vars.Index("seen"))
	requireEqual(t, -1, vars.Index("nope"))
	ids := append([]uint32(nil), vars.ids...)
	requireEqual(t, []uint32{1, 2, 3, 4, 5, 6}, ids)

	// Content in "events" and "seen" for two keys.
	b := d.NewBatch(2)
	for _, k := range []string{"a", "b"} {
		tx := b.Key(vars, []byte(k), 0)
		requireNoError(t, tx.ListAppend(vList, bs("x", "y")...))
		requireNoError(t, tx.MapSet(vMap, []byte("m"), []byte("1")))
		requireNoError(t, tx.Commit())
	}
	tx := b.Key(vars, []byte("c"), 0)
	requireNoError(t, tx.ListAppend(vList, []byte("only")))
	requireNoError(t, tx.Commit())
	p, err := b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(3), p.Keys)

	// A kind change is refused, by CheckVars and DeclareVars, and writes nothing.
	bad := []VarDecl{{Name: "events", Kind: VarMap}}
	err = d.CheckVars(bad)
	requireErrorIs(t, err, ErrVarKind)
	if !strings.Contains(err.Error(), "state variable events was declared list and is now map") {
		t.Fatalf("message: %v", err)
	}
	b = d.NewBatch(3)
	_, err = b.DeclareVars(bad)
	requireErrorIs(t, err, ErrVarKind)
	b.Close()
	for _, bad := range [][]VarDecl{
		{{Name: "", Kind: VarValue}},
		{{Name: "a", Kind: 0}},
		{{Name: "a", Kind: VarValue, TTLMs: -1}},
		{{Name: "a", Kind: VarValue}, {Name: "a", Kind: VarValue}},
	} {
		requireErrorIs(t, d.CheckVars(bad), ErrInvalidVar)
	}

	// Redeclare: "events" dropped, "seen" kept at a new index with a new TTL, a new
	// variable, in another order.
	next := []VarDecl{{Name: "fresh", Kind: VarList}, {Name: "seen", Kind: VarMap, TTLMs: 5}, {Name: "count", Kind: VarValue}}
	requireNoError(t, d.CheckVars(next))
	b = d.NewBatch(3)
	vars2, err := b.DeclareVars(next)
	requireNoError(t, err)
	requireEqual(t, []uint32{7, 3, 1}, vars2.ids)
	p, err = b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(2), p.Keys, "key c held only the dropped list")
	got, err := d.Vars()
	requireNoError(t, err)
	requireEqual(t, []uint32{1, 3, 7}, got.ids, "in id order")
	requireEqual(t, VarDecl{Name: "seen", Kind: VarMap, TTLMs: 5}, got.Decl(1))
	for _, k := range rawKeys(t, d) {
		if strings.HasPrefix(k, "x\x00\x00\x00\x02") {
			t.Fatalf("a key of the dropped variable is left: %q", k)
		}
	}
	ks, err := d.KeyVars([]byte("a"), 0)
	requireNoError(t, err)
	requireEqual(t, []MapEntry{{Key: []byte("m"), Value: []byte("1")}}, ks.Vars[1].Entries)

	// Declaring the dropped name again gives it a new id, and it starts empty.
	b = d.NewBatch(4)
	vars3, err := b.DeclareVars(append(next, VarDecl{Name: "events", Kind: VarList}))
	requireNoError(t, err)
	requireEqual(t, uint32(8), vars3.ids[3])
	tx = b.Key(vars3, []byte("a"), 0)
	requireEqual(t, []string{}, readList(t, tx, 3, 100))
	requireNoError(t, tx.Discard())
	b.Close()
	_ = s
}

func TestKeyTxnOps(t *testing.T) {
	_, d, vars, _ := openVars(t)
	k := []byte(`"k"`)
	type step struct {
		name string
		op   func(tx *KeyTxn) error
		want string
	}
	const empty = `v0=""/false v5=""/false l1=[] l3=[] m2=[] m4=[] timers=[]`
	steps := []step{
		{"empty", nil, empty},
		{"value set", func(tx *KeyTxn) error { return tx.ValueSet(vVal, []byte("1")) }, `v0="1"/true v5=""/false l1=[] l3=[] m2=[] m4=[] timers=[]`},
		{"empty value", func(tx *KeyTxn) error { return tx.ValueSet(vVal, nil) }, `v0=""/true v5=""/false l1=[] l3=[] m2=[] m4=[] timers=[]`},
		{"value clear", func(tx *KeyTxn) error { return tx.ValueClear(vVal) }, empty},
		{"value clear again", func(tx *KeyTxn) error { return tx.ValueClear(vVal) }, empty},
		{"append one", func(tx *KeyTxn) error { return tx.ListAppend(vList, []byte("a")) }, `v0=""/false v5=""/false l1=[a] l3=[] m2=[] m4=[] timers=[]`},
		{"append many", func(tx *KeyTxn) error { return tx.ListAppend(vList, bs("b", "", "d")...) }, `v0=""/false v5=""/false l1=[a b  d] l3=[] m2=[] m4=[] timers=[]`},
		{"append none", func(tx *KeyTxn) error { return tx.ListAppend(vList) }, `v0=""/false v5=""/false l1=[a b  d] l3=[] m2=[] m4=[] timers=[]`},
		{"put", func(tx *KeyTxn) error { return tx.ListPut(vList, bs("p", "q")...) }, `v0=""/false v5=""/false l1=[p q] l3=[] m2=[] m4=[] timers=[]`},
		{"put none", func(tx *KeyTxn) error { return tx.ListPut(vList) }, empty},
		{"list clear", func(tx *KeyTxn) error {
			if err := tx.ListAppend(vList, []byte("z")); err != nil {
				return err
			}
			return tx.ListClear(vList)
		}, empty},
		{"map set", func(tx *KeyTxn) error {
			for _, kv := range []string{"b=2", "a=1", "=e", "c=3"} {
				k, v, _ := strings.Cut(kv, "=")
				if err := tx.MapSet(vMap, []byte(k), []byte(v)); err != nil {
					return err
				}
			}
			return nil
		}, `v0=""/false v5=""/false l1=[] l3=[] m2=[=e a=1 b=2 c=3] m4=[] timers=[]`},
		{"map overwrite, remove", func(tx *KeyTxn) error {
			if err := tx.MapSet(vMap, []byte("a"), []byte("9")); err != nil {
				return err
			}
			if err := tx.MapRemove(vMap, []byte("b")); err != nil {
				return err
			}
			return tx.MapRemove(vMap, []byte("nope"))
		}, `v0=""/false v5=""/false l1=[] l3=[] m2=[=e a=9 c=3] m4=[] timers=[]`},
		{"map clear", func(tx *KeyTxn) error { return tx.MapClear(vMap) }, empty},
		{"timers", func(tx *KeyTxn) error {
			for _, ts := range []int64{30, -5, 10, 30} {
				if err := tx.TimerRegister(ts); err != nil {
					return err
				}
			}
			return tx.TimerDelete(99)
		}, `v0=""/false v5=""/false l1=[] l3=[] m2=[] m4=[] timers=[-5 10 30]`},
		{"timer delete", func(tx *KeyTxn) error { return tx.TimerDelete(10) }, `v0=""/false v5=""/false l1=[] l3=[] m2=[] m4=[] timers=[-5 30]`},
	}
	id := uint64(2)
	var want string
	for _, st := range steps {
		// Each step in its own batch, in a txn that sees the committed state; its effect
		// is checked staged, in a later txn of the batch, and committed.
		b := d.NewBatch(id)
		id++
		tx := b.Key(vars, k, 0)
		if st.op != nil {
			requireNoError(t, st.op(tx))
		}
		requireEqual(t, st.want, snapshotKey(t, tx), "%s: staged", st.name)
		requireNoError(t, tx.Commit())
		tx = b.Key(vars, k, 0)
		requireEqual(t, st.want, snapshotKey(t, tx), "%s: next txn", st.name)
		requireNoError(t, tx.Commit())
		_, err := b.Commit()
		requireNoError(t, err)
		b = d.NewBatch(id)
		id++
		tx = b.Key(vars, k, 0)
		requireEqual(t, st.want, snapshotKey(t, tx), "%s: committed", st.name)
		requireNoError(t, tx.Discard())
		b.Close()
		want = st.want
	}
	_ = want

	// Contains and Get of a map entry.
	b := d.NewBatch(id)
	tx := b.Key(vars, k, 0)
	requireNoError(t, tx.MapSet(vMap, []byte("x"), []byte("y")))
	ok, err := tx.MapContains(vMap, []byte("x"))
	requireNoError(t, err)
	requireEqual(t, true, ok)
	ok, err = tx.MapContains(vMap, []byte("z"))
	requireNoError(t, err)
	requireEqual(t, false, ok)
	v, ok, err := tx.MapGet(vMap, []byte("x"))
	requireNoError(t, err)
	requireEqual(t, "y/true", fmt.Sprintf("%s/%v", v, ok))

	// Wrong kinds and indexes.
	_, _, err = tx.ValueGet(vList)
	requireErrorIs(t, err, ErrVarOp)
	requireErrorIs(t, tx.ListAppend(vMap, nil), ErrVarOp)
	_, _, err = tx.MapGet(99, nil)
	requireErrorIs(t, err, ErrVarOp)
	_, _, err = tx.ListRead(-1, 0, 10)
	requireErrorIs(t, err, ErrVarOp)

	// One txn at a time; a done txn refuses operations.
	requireErrorIs(t, b.Key(vars, []byte("other"), 0).ValueSet(vVal, nil), ErrTxnOpen)
	_, err = b.Commit()
	requireErrorIs(t, err, ErrTxnOpen)
	_, err = b.ExpireTTL(0)
	requireErrorIs(t, err, ErrTxnOpen)
	requireNoError(t, tx.Commit())
	requireErrorIs(t, tx.Commit(), ErrTxnDone)
	requireErrorIs(t, tx.ValueSet(vVal, nil), ErrTxnDone)
	requireNoError(t, tx.Discard())
	_, err = b.Commit()
	requireNoError(t, err)
	requireErrorIs(t, b.Key(vars, k, 0).ValueSet(vVal, nil), ErrBatchDone)
}

func TestKeyTxnDiscard(t *testing.T) {
	_, d, vars, _ := openVars(t)
	b := d.NewBatch(2)
	tx := b.Key(vars, []byte("a"), 0)
	requireNoError(t, tx.ListAppend(vList, bs("1", "2")...))
	requireNoError(t, tx.MapSet(vMap, []byte("k"), []byte("v")))
	requireNoError(t, tx.TimerRegister(5))
	requireNoError(t, tx.Commit())
	before := snapshotKey(t, b.Key(vars, []byte("a"), 0))
	requireNoError(t, b.tx.Discard())

	// A failed call: every kind of write, a clear (range deletion) included, dropped.
	tx = b.Key(vars, []byte("a"), 0)
	requireNoError(t, tx.ListClear(vList))
	requireNoError(t, tx.ListAppend(vList, []byte("3")))
	requireNoError(t, tx.MapRemove(vMap, []byte("k")))
	requireNoError(t, tx.ValueSet(vVal, []byte("x")))
	requireNoError(t, tx.TimerDelete(5))
	requireNoError(t, tx.TimerRegister(6))
	requireNoError(t, tx.Discard())
	requireEqual(t, before, snapshotKey(t, b.Key(vars, []byte("a"), 0)))
	requireNoError(t, b.tx.Discard())
	// A discarded txn of a key with nothing before it.
	tx = b.Key(vars, []byte("b"), 0)
	requireNoError(t, tx.ValueSet(vVal, []byte("x")))
	requireNoError(t, tx.Discard())

	p, err := b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(1), p.Keys)
	requireEqual(t, int64(1), p.TimerKeys)
	b = d.NewBatch(3)
	defer b.Close()
	requireEqual(t, before, snapshotKey(t, b.Key(vars, []byte("a"), 0)))
	requireNoError(t, b.tx.Discard())
	requireEqual(t, `v0=""/false v5=""/false l1=[] l3=[] m2=[] m4=[] timers=[]`, snapshotKey(t, b.Key(vars, []byte("b"), 0)))

	// Discard of the very first txn of a batch.
	b2 := d.NewBatch(3)
	defer b2.Close()
	tx = b2.Key(vars, []byte("a"), 0)
	requireNoError(t, tx.ListAppend(vList, []byte("x")))
	requireNoError(t, tx.Discard())
	requireEqual(t, before, snapshotKey(t, b2.Key(vars, []byte("a"), 0)))
}

func TestListMapPages(t *testing.T) {
	_, d, vars, _ := openVars(t)
	b := d.NewBatch(2)
	tx := b.Key(vars, []byte("k"), 0)
	var want, wantMap []string
	for i := range 25 {
		e := strings.Repeat("e", i%4)
		want = append(want, e)
		requireNoError(t, tx.ListAppend(vList, []byte(e)))
		mk := fmt.Sprintf("%02d", (i*7)%25)
		requireNoError(t, tx.MapSet(vMap, []byte(mk), []byte(e)))
	}
	for i := range 25 {
		wantMap = append(wantMap, fmt.Sprintf("%02d=%s", i, strings.Repeat("e", (i*18)%25%4)))
	}
	check := func(what string) {
		for _, mb := range []int{0, 1, 5, 9, 13, 1 << 20} {
			requireEqual(t, want, readList(t, tx, vList, mb), "%s: list, maxBytes %d", what, mb)
			requireEqual(t, wantMap, readMap(t, tx, vMap, mb), "%s: map, maxBytes %d", what, mb)
		}
		if what == "mixed" {
			return
		}
		// Page sizes: at least one, then as many as fit.
		elems, next, err := tx.ListRead(vList, 0, 4+0+4+1)
		requireNoError(t, err)
		requireEqual(t, []string{"", "e"}, strs(elems))
		elems, _, err = tx.ListRead(vList, next, 0)
		requireNoError(t, err)
		requireEqual(t, []string{"ee"}, strs(elems))
		entries, nextKey, more, err := tx.MapRead(vMap, nil, 0)
		requireNoError(t, err)
		requireEqual(t, true, more)
		requireEqual(t, 1, len(entries))
		requireEqual(t, "01", string(nextKey))
	}
	check("staged")
	requireNoError(t, tx.Commit())
	tx = b.Key(vars, []byte("k"), 0)
	check("earlier txn")
	requireNoError(t, tx.Commit())
	_, err := b.Commit()
	requireNoError(t, err)
	b = d.NewBatch(3)
	defer b.Close()
	tx = b.Key(vars, []byte("k"), 0)
	check("committed")
	// Appends after the committed ones, read across the boundary.
	requireNoError(t, tx.ListAppend(vList, bs("x", "y")...))
	want = append(want, "x", "y")
	requireNoError(t, tx.MapSet(vMap, []byte("!"), []byte("first")))
	wantMap = append([]string{"!=first"}, wantMap...)
	check("mixed")
}

func TestMultiTimers(t *testing.T) {
	_, d, vars, _ := openVars(t)
	b := d.NewBatch(2)
	for _, k := range []string{"b", "a", "c"} {
		tx := b.Key(vars, []byte(k), 0)
		for _, ts := range []int64{20, 10, 10, 30} {
			requireNoError(t, tx.TimerRegister(ts))
		}
		requireNoError(t, tx.Commit())
	}
	p, err := b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(3), p.Keys)
	requireEqual(t, int64(3), p.TimerKeys)
	requireEqual(t, []timer{{"a", 10}, {"b", 10}, {"c", 10}, {"a", 20}, {"b", 20}, {"c", 20}}, expired(t, d, 30))

	b = d.NewBatch(3)
	defer b.Close()
	scan := func(from TimerPos, before int64) []timer {
		var got []timer
		requireNoError(t, b.ExpiredTimers(from, before, func(key []byte, ts int64) error {
			got = append(got, timer{string(key), ts})
			return nil
		}))
		return got
	}
	// Delete b@10 and register a@15 in the batch: the batch's scan sees it, the store's not.
	tx := b.Key(vars, []byte("b"), 0)
	requireNoError(t, tx.TimerDelete(10))
	requireNoError(t, tx.Commit())
	tx = b.Key(vars, []byte("a"), 0)
	requireNoError(t, tx.TimerRegister(15))
	requireNoError(t, tx.Commit())
	requireEqual(t, []timer{{"a", 10}, {"c", 10}, {"a", 15}, {"a", 20}, {"b", 20}, {"c", 20}}, scan(TimerPos{TimeoutMs: math.MinInt64}, 30))
	// In chunks, resuming after the last one.
	first := scan(TimerPos{TimeoutMs: math.MinInt64}, 11)
	requireEqual(t, []timer{{"a", 10}, {"c", 10}}, first)
	requireEqual(t, []timer{{"a", 15}, {"a", 20}, {"b", 20}}, scan(TimerAfter(10, []byte("c")), 21)[:3])
	requireEqual(t, []timer{{"b", 20}, {"c", 20}}, scan(TimerPos{TimeoutMs: 20, Key: "b"}, 21))
	requireEqual(t, 6, len(expired(t, d, 30)), "the store's index is unchanged until Commit")
	// Firing: delete the fired timers; key b keeps 20 and 30.
	for _, tm := range scan(TimerPos{TimeoutMs: math.MinInt64}, 21) {
		tx := b.Key(vars, []byte(tm.Key), 0)
		requireNoError(t, tx.TimerDelete(tm.Ts))
		requireNoError(t, tx.Commit())
	}
	for _, k := range []string{"a", "c"} {
		tx := b.Key(vars, []byte(k), 0)
		requireNoError(t, tx.TimerDelete(30))
		requireNoError(t, tx.Commit())
	}
	p, err = b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(1), p.Keys)
	requireEqual(t, int64(1), p.TimerKeys)
	requireEqual(t, []timer{{"b", 30}}, expired(t, d, 100))
	var keys []string
	requireNoError(t, d.VarKeys(nil, 0, func(key []byte, vars, timers int) error {
		keys = append(keys, fmt.Sprintf("%s:%d:%d", key, vars, timers))
		return nil
	}))
	requireEqual(t, []string{"b:0:1"}, keys)
}

func TestTTL(t *testing.T) {
	_, d, vars, _ := openVars(t)
	k := []byte("k")
	b := d.NewBatch(2)
	tx := b.Key(vars, k, 1000) // expiry 1100
	requireNoError(t, tx.ListAppend(vTTL, bs("a", "b")...))
	requireNoError(t, tx.MapSet(vMTTL, []byte("x"), []byte("1")))
	requireNoError(t, tx.MapSet(vMTTL, []byte("y"), []byte("2")))
	requireNoError(t, tx.ValueSet(vVTTL, []byte("v")))
	requireNoError(t, tx.ValueSet(vVal, []byte("forever")))
	requireNoError(t, tx.Commit())
	tx = b.Key(vars, k, 1050) // expiry 1150
	requireNoError(t, tx.ListAppend(vTTL, []byte("c")))
	requireNoError(t, tx.MapSet(vMTTL, []byte("y"), []byte("3")))
	requireNoError(t, tx.Commit())
	_, err := b.Commit()
	requireNoError(t, err)

	at := func(now int64) string {
		b := d.NewBatch(99)
		defer b.Close()
		tx := b.Key(vars, k, now)
		defer tx.Discard()
		return snapshotKey(t, tx)
	}
	requireEqual(t, `v0="forever"/true v5="v"/true l1=[] l3=[a b c] m2=[] m4=[x=1 y=3] timers=[]`, at(1099))
	requireEqual(t, `v0="forever"/true v5=""/false l1=[] l3=[c] m2=[] m4=[y=3] timers=[]`, at(1100))
	requireEqual(t, `v0="forever"/true v5=""/false l1=[] l3=[] m2=[] m4=[] timers=[]`, at(1150))
	ks, err := d.KeyVars(k, 1100)
	requireNoError(t, err)
	requireEqual(t, [][]byte{[]byte("c")}, ks.Vars[vTTL].Elements)
	ks, err = d.KeyVars(k, math.MinInt64)
	requireNoError(t, err)
	requireEqual(t, 3, len(ks.Vars[vTTL].Elements))

	// Removal: a, b, x and the value at 1100 (y's first write is stale: not counted).
	b = d.NewBatch(3)
	n, err := b.ExpireTTL(1099)
	requireNoError(t, err)
	requireEqual(t, 0, n)
	n, err = b.ExpireTTL(1100)
	requireNoError(t, err)
	requireEqual(t, 4, n)
	n, err = b.ExpireTTL(1100)
	requireNoError(t, err)
	requireEqual(t, 0, n)
	p, err := b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(1), p.Keys)
	requireEqual(t, `v0="forever"/true v5=""/false l1=[] l3=[c] m2=[] m4=[y=3] timers=[]`, at(1100))
	ks, err = d.KeyVars(k, math.MinInt64)
	requireNoError(t, err)
	requireEqual(t, [][]byte{[]byte("c")}, ks.Vars[vTTL].Elements)

	// The rest, and then the key is only counted for its value without TTL.
	b = d.NewBatch(4)
	n, err = b.ExpireTTL(2000)
	requireNoError(t, err)
	requireEqual(t, 2, n)
	tx = b.Key(vars, k, 2000)
	requireNoError(t, tx.ValueClear(vVal))
	requireNoError(t, tx.Commit())
	p, err = b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(0), p.Keys)
	for _, rk := range rawKeys(t, d) {
		if rk[0] != 'c' && rk[0] != 'm' {
			t.Fatalf("key left: %q", rk)
		}
	}
}

func TestMapExistsLoose(t *testing.T) {
	_, d, vars, _ := openVars(t)
	k := []byte("k")
	b := d.NewBatch(2)
	defer b.Close()
	tx := b.Key(vars, k, 0)
	requireNoError(t, tx.MapSet(vMTTL, []byte("a"), []byte("1"))) // expires 100
	requireNoError(t, tx.Commit())
	tx = b.Key(vars, k, 50)
	requireNoError(t, tx.MapSet(vMTTL, []byte("b"), []byte("2"))) // expires 150
	requireNoError(t, tx.MapRemove(vMTTL, []byte("b")))
	requireNoError(t, tx.Commit())
	for _, c := range []struct {
		now  int64
		want bool
	}{{99, true}, {100, false}, {149, false}} {
		tx = b.Key(vars, k, c.now)
		ok, err := tx.MapExists(vMTTL)
		requireNoError(t, err)
		requireEqual(t, c.want, ok, "at %d", c.now)
		requireNoError(t, tx.Discard())
	}
}

func TestVarsReplicateExportDrop(t *testing.T) {
	s, d, vars, dir := openVars(t)
	r := &collectReplicator{}
	d.SetReplicator(r)
	// The replica starts from an export (of the declarations), then follows the log.
	s2 := openMem(t)
	d2 := s2.Deployment("dep")
	_, err := d.Export(0, func(repr []byte) error { return d2.ApplyReplicated(repr) })
	requireNoError(t, err)
	b := d.NewBatch(2)
	for i := range 20 {
		tx := b.Key(vars, fmt.Appendf(nil, "k%02d", i), 1000)
		requireNoError(t, tx.ValueSet(vVal, []byte("v")))
		requireNoError(t, tx.ListAppend(vList, bs("a", "b", "c")...))
		requireNoError(t, tx.ListAppend(vTTL, bs("t")...))
		requireNoError(t, tx.MapSet(vMap, []byte("m"), []byte("1")))
		requireNoError(t, tx.TimerRegister(int64(i)))
		requireNoError(t, tx.Commit())
	}
	_, err = b.Commit()
	requireNoError(t, err)
	b = d.NewBatch(3)
	tx := b.Key(vars, []byte("k00"), 1000)
	requireNoError(t, tx.ListClear(vList))
	requireNoError(t, tx.MapClear(vMap))
	requireNoError(t, tx.Commit())
	_, err = b.ExpireTTL(1100)
	requireNoError(t, err)
	_, err = b.Commit()
	requireNoError(t, err)

	dump := func(d *Deployment) string {
		var sb strings.Builder
		p, err := d.Progress()
		requireNoError(t, err)
		fmt.Fprintf(&sb, "keys=%d timers=%d\n", p.Keys, p.TimerKeys)
		requireNoError(t, d.VarKeys(nil, 0, func(key []byte, nv, nt int) error {
			ks, err := d.KeyVars(key, 0)
			requireNoError(t, err)
			fmt.Fprintf(&sb, "%s %d %d %+v\n", key, nv, nt, ks)
			return nil
		}))
		fmt.Fprint(&sb, expired(t, d, 1000))
		return sb.String()
	}
	want := dump(d)
	if !strings.Contains(want, "keys=20 timers=20") {
		t.Fatalf("dump: %s", want)
	}

	// Replicated writes applied to another store.
	for _, w := range r.writes {
		requireNoError(t, d2.ApplyReplicated(w.Repr))
	}
	requireEqual(t, want, dump(d2), "replica")

	// Export into an empty store.
	s3 := openMem(t)
	d3 := s3.Deployment("dep")
	_, err = d.Export(256, func(repr []byte) error { return d3.ApplyReplicated(repr) })
	requireNoError(t, err)
	requireEqual(t, want, dump(d3), "export")
	requireEqual(t, rawKeys(t, d), rawKeys(t, d3))

	// Reopen.
	d.SetReplicator(nil)
	requireNoError(t, s.Close())
	s = openDisk(t, dir)
	defer s.Close()
	d = s.Deployment("dep")
	requireEqual(t, want, dump(d), "reopened")

	// Drop removes everything, replicated too.
	d.SetReplicator(r)
	requireNoError(t, d.Drop())
	requireEqual(t, []string(nil), rawKeys(t, d))
	requireNoError(t, d2.ApplyReplicated(r.writes[len(r.writes)-1].Repr))
	requireEqual(t, []string(nil), rawKeys(t, d2))
}

// collectReplicator keeps copies of every write.
type collectReplicator struct{ writes []ReplicatedWrite }

func (r *collectReplicator) Replicate(w ReplicatedWrite) error {
	w.Repr = bytes.Clone(w.Repr)
	r.writes = append(r.writes, w)
	return nil
}

func TestVarsApplyReplicatedChecks(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("dep")
	bad := [][2]string{
		{"x\x00", "v"},                          // short data key
		{"x\x00\x00\x00\x01\x01k\x07", "\x00v"}, // unknown tag
		{"x\x00\x00\x00\x01\x01k\x00", "\x02"},  // item flags
		{"k" + "key", ""},                       // empty key record
		{"j\x01k", ""},                          // key timer without ts
		{"c", "\x09"},                           // catalog
		{"e\x00", ""},                           // TTL index
	}
	for _, kv := range bad {
		pb := s.db.NewBatch()
		_ = pb.Set(append(bytes.Clone(d.prefix), kv[0]...), []byte(kv[1]), nil)
		err := d.ApplyReplicated(pb.Repr())
		_ = pb.Close()
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%q: %v", kv[0], err)
		}
	}
}

// A replicated list clear (a range deletion in section 'x') leaves the hot-state cache
// alone; a replicated Drop empties it.
func TestVarsApplyReplicatedCache(t *testing.T) {
	_, d, vars, _ := openVars(t)
	r := &collectReplicator{}
	d.SetReplicator(r)
	b := d.NewBatch(2)
	tx := b.Key(vars, []byte("k"), 0)
	requireNoError(t, tx.ListAppend(vList, []byte("a")))
	requireNoError(t, tx.Commit())
	_, err := b.Commit()
	requireNoError(t, err)
	b = d.NewBatch(3)
	tx = b.Key(vars, []byte("k"), 0)
	requireNoError(t, tx.ListClear(vList))
	requireNoError(t, tx.Commit())
	_, err = b.Commit()
	requireNoError(t, err)
	requireNoError(t, d.Drop())

	s2 := openMem(t)
	v1 := s2.Deployment("v1")
	commit(t, v1, 1, map[string]Entry{"a": val("1")})
	get(t, v1, "a")
	_, _, hit := cached(v1, "a")
	requireEqual(t, true, hit)
	d2 := s2.Deployment("dep")
	for i, w := range r.writes {
		requireNoError(t, d2.ApplyReplicated(w.Repr))
		_, _, hit := cached(v1, "a")
		requireEqual(t, i < len(r.writes)-1, hit, "after write %d (%s)", i, w.Kind)
	}
}

// ExpireTTL goes through the index in chunks.
func TestExpireTTLChunks(t *testing.T) {
	_, d, vars, _ := openVars(t)
	b := d.NewBatch(2)
	const n = 2*ttlChunk + 10
	for i := range n {
		tx := b.Key(vars, fmt.Appendf(nil, "k%d", i%3), int64(i))
		requireNoError(t, tx.ListAppend(vTTL, []byte("e")))
		requireNoError(t, tx.MapSet(vMTTL, fmt.Appendf(nil, "m%d", i%50), []byte("v")))
		requireNoError(t, tx.Commit())
	}
	p, err := b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(3), p.Keys)
	b = d.NewBatch(3)
	removed, err := b.ExpireTTL(100 + n/2 - 1) // items written before n/2 expired
	requireNoError(t, err)
	requireEqual(t, n/2, removed, "the list elements written before n/2 (every map entry was rewritten since)")
	p, err = b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(3), p.Keys)
	b = d.NewBatch(4)
	removed, err = b.ExpireTTL(100 + n)
	requireNoError(t, err)
	requireEqual(t, n-n/2+150, removed, "the other list elements and the 150 map entries (3 keys × 50 map keys)")
	p, err = b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(0), p.Keys)
	for _, rk := range rawKeys(t, d) {
		if rk[0] != 'c' && rk[0] != 'm' {
			t.Fatalf("key left: %q", rk)
		}
	}
}

// Clears of collections above pointClearMax items are range deletions; below, point
// deletions. Both read the same, staged, after a Discard and committed.
func TestClearLarge(t *testing.T) {
	_, d, vars, _ := openVars(t)
	for _, n := range []int{pointClearMax, pointClearMax + 1, 500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			key := fmt.Appendf(nil, "k%d", n)
			p, err := d.Progress()
			requireNoError(t, err)
			b := d.NewBatch(p.BatchID + 1)
			tx := b.Key(vars, key, 0)
			for i := range n {
				requireNoError(t, tx.ListAppend(vList, fmt.Appendf(nil, "%d", i)))
				requireNoError(t, tx.MapSet(vMap, fmt.Appendf(nil, "%04d", i), nil))
			}
			requireNoError(t, tx.Commit())
			_, err = b.Commit()
			requireNoError(t, err)
			b = d.NewBatch(p.BatchID + 2)
			tx = b.Key(vars, key, 0)
			requireNoError(t, tx.ListClear(vList))
			requireNoError(t, tx.MapClear(vMap))
			requireEqual(t, `v0=""/false v5=""/false l1=[] l3=[] m2=[] m4=[] timers=[]`, snapshotKey(t, tx))
			requireNoError(t, tx.Discard())
			tx = b.Key(vars, key, 0)
			requireEqual(t, n, len(readList(t, tx, vList, 1000)))
			requireEqual(t, n, len(readMap(t, tx, vMap, 1000)))
			requireNoError(t, tx.ListPut(vList, []byte("new")))
			requireNoError(t, tx.MapClear(vMap))
			requireNoError(t, tx.Commit())
			wantRange := n > pointClearMax
			gotRange := false
			for r := b.vb.Reader(); ; {
				kind, _, _, ok, err := r.Next()
				requireNoError(t, err)
				if !ok {
					break
				}
				gotRange = gotRange || kind == pebble.InternalKeyKindRangeDelete
			}
			requireEqual(t, wantRange, gotRange, "range deletion")
			_, err = b.Commit()
			requireNoError(t, err)
			b = d.NewBatch(p.BatchID + 3)
			defer b.Close()
			requireEqual(t, `v0=""/false v5=""/false l1=[new] l3=[] m2=[] m4=[] timers=[]`, snapshotKey(t, b.Key(vars, key, 0)))
			n := 0
			for _, rk := range rawKeys(t, d) {
				if strings.HasPrefix(rk, "x") && strings.Contains(rk, string(key)) {
					n++
				}
			}
			requireEqual(t, 2, n, "the list's meta record and element")
		})
	}
}
