package state

import (
	"strings"
	"testing"
)

// TestListDropFirst: ListDropFirst removes a list's front, staged, in the batch's next
// transaction and once committed; removing every element leaves the key without the list
// (and without a record); expired elements are not counted and go with the front; and when
// the elements removed held the largest expiry, ListExists follows what is left.
func TestListDropFirst(t *testing.T) {
	_, d, vars, _ := openVars(t)
	k := []byte(`"k"`)
	const base = `v0=""/false v5=""/false `
	id := uint64(2)
	// step runs op in a batch of its own at now and checks what every reader sees.
	step := func(what string, now int64, op func(tx *KeyTxn) error, want string) Progress {
		t.Helper()
		b := d.NewBatch(id)
		id++
		tx := b.Key(vars, k, now)
		requireNoError(t, op(tx))
		requireEqual(t, want, snapshotKey(t, tx), "%s: staged", what)
		requireNoError(t, tx.Commit())
		tx = b.Key(vars, k, now)
		requireEqual(t, want, snapshotKey(t, tx), "%s: next txn", what)
		requireNoError(t, tx.Commit())
		p, err := b.Commit()
		requireNoError(t, err)
		b = d.NewBatch(id)
		id++
		tx = b.Key(vars, k, now)
		requireEqual(t, want, snapshotKey(t, tx), "%s: committed", what)
		requireNoError(t, tx.Discard())
		b.Close()
		return p
	}
	step("append", 0, func(tx *KeyTxn) error { return tx.ListAppend(vList, bs("a", "b", "c", "d", "e")...) },
		base+`l1=[a b c d e] l3=[] m2=[] m4=[] timers=[]`)
	step("drop 0, drop 2", 0, func(tx *KeyTxn) error {
		if err := tx.ListDropFirst(vList, 0); err != nil {
			return err
		}
		return tx.ListDropFirst(vList, 2)
	}, base+`l1=[c d e] l3=[] m2=[] m4=[] timers=[]`)
	step("drop 1, append, drop 1", 0, func(tx *KeyTxn) error {
		if err := tx.ListDropFirst(vList, 1); err != nil {
			return err
		}
		if err := tx.ListAppend(vList, []byte("f")); err != nil {
			return err
		}
		return tx.ListDropFirst(vList, 1)
	}, base+`l1=[e f] l3=[] m2=[] m4=[] timers=[]`)
	p := step("drop all", 0, func(tx *KeyTxn) error { return tx.ListDropFirst(vList, 2) }, base+`l1=[] l3=[] m2=[] m4=[] timers=[]`)
	requireEqual(t, int64(0), p.Keys, "keys once the list is empty")
	for _, rk := range rawKeys(t, d) {
		if rk[0] != 'c' && rk[0] != 'm' { // the catalog, the progress record
			t.Fatalf("key left: %q", rk)
		}
	}

	// TTL (100 ms): a and b expire at 1100, c at 1150. At 1100 the first element is c, and
	// dropping it takes the expired a and b along.
	step("ttl append", 1000, func(tx *KeyTxn) error { return tx.ListAppend(vTTL, bs("a", "b")...) }, base+`l1=[] l3=[a b] m2=[] m4=[] timers=[]`)
	step("ttl append later", 1050, func(tx *KeyTxn) error { return tx.ListAppend(vTTL, bs("c", "d")...) }, base+`l1=[] l3=[a b c d] m2=[] m4=[] timers=[]`)
	step("ttl drop", 1100, func(tx *KeyTxn) error { return tx.ListDropFirst(vTTL, 1) }, base+`l1=[] l3=[d] m2=[] m4=[] timers=[]`)
	p = step("ttl expired", 1150, func(tx *KeyTxn) error { return nil }, base+`l1=[] l3=[] m2=[] m4=[] timers=[]`)
	requireEqual(t, int64(1), p.Keys, "d is stored until ExpireTTL removes it")

	// A TTL made shorter: "long" holds the largest expiry; once it is dropped, the list no
	// longer exists when what is left expired. Dropping an element that does not hold it
	// keeps the bound.
	long := append([]VarDecl(nil), testDecls...)
	long[vTTL].TTLMs = 1000
	declare := func(decls []VarDecl) *Batch {
		b := d.NewBatch(id)
		id++
		vs, err := b.DeclareVars(decls)
		requireNoError(t, err)
		vars = vs
		return b
	}
	inBatch := func(b *Batch, now int64, op func(tx *KeyTxn) error, want string) {
		t.Helper()
		tx := b.Key(vars, k, now)
		requireNoError(t, op(tx))
		requireEqual(t, want, snapshotKey(t, tx))
		requireNoError(t, tx.Commit())
		_, err := b.Commit()
		requireNoError(t, err)
	}
	inBatch(declare(long), 2000, func(tx *KeyTxn) error { return tx.ListAppend(vTTL, []byte("long")) }, base+`l1=[] l3=[long] m2=[] m4=[] timers=[]`) // expiry 3000
	inBatch(declare(testDecls), 2010, func(tx *KeyTxn) error {
		if err := tx.ListAppend(vTTL, []byte("short")); err != nil { // expiry 2110
			return err
		}
		return tx.ListDropFirst(vTTL, 1) // d (expired, not counted) and long
	}, base+`l1=[] l3=[short] m2=[] m4=[] timers=[]`)
	step("largest expiry dropped", 2110, func(tx *KeyTxn) error { return nil }, base+`l1=[] l3=[] m2=[] m4=[] timers=[]`)
	inBatch(declare(long), 2020, func(tx *KeyTxn) error { return tx.ListAppend(vTTL, []byte("z")) }, base+`l1=[] l3=[short z] m2=[] m4=[] timers=[]`) // expiry 3020
	inBatch(declare(testDecls), 2030, func(tx *KeyTxn) error {
		if err := tx.ListAppend(vTTL, []byte("w")); err != nil { // expiry 2130
			return err
		}
		return tx.ListDropFirst(vTTL, 1) // short
	}, base+`l1=[] l3=[z w] m2=[] m4=[] timers=[]`)
	step("largest expiry kept", 2200, func(tx *KeyTxn) error { return nil }, base+`l1=[] l3=[z] m2=[] m4=[] timers=[]`)
}

// TestListDropFirstRefused: a bad variable index, a variable of another kind, a negative
// count and a count past the end (expired elements not counted) are refused with ErrVarOp
// and change nothing.
func TestListDropFirstRefused(t *testing.T) {
	_, d, vars, _ := openVars(t)
	k := []byte(`"k"`)
	b := d.NewBatch(2)
	tx := b.Key(vars, k, 1000)
	requireNoError(t, tx.ListAppend(vList, bs("a", "b", "c")...))
	requireNoError(t, tx.ListAppend(vTTL, bs("t1", "t2")...)) // expiry 1100
	requireNoError(t, tx.Commit())
	_, err := b.Commit()
	requireNoError(t, err)

	b = d.NewBatch(3)
	defer b.Close()
	tx = b.Key(vars, k, 1050)
	requireNoError(t, tx.ListAppend(vTTL, []byte("t3"))) // expiry 1150
	requireNoError(t, tx.Commit())
	tx = b.Key(vars, k, 1100) // t1, t2 expired
	before := snapshotKey(t, tx)
	for _, tc := range []struct {
		v, n int
		want string
	}{
		{99, 1, "no variable 99"},
		{-1, 1, "no variable -1"},
		{vMap, 1, "is a map, not a list"},
		{vVal, 1, "is a value, not a list"},
		{vList, -1, "drop the first -1 elements of state variable events: a negative count"},
		{vList, 4, "drop the first 4 elements of state variable events, which has 3"},
		{vList, 1 << 40, "which has 3"},
		{vTTL, 2, "drop the first 2 elements of state variable recent, which has 1"},
	} {
		err := tx.ListDropFirst(tc.v, tc.n)
		requireErrorIs(t, err, ErrVarOp)
		if !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("ListDropFirst(%d, %d): %v, want %q", tc.v, tc.n, err, tc.want)
		}
	}
	requireEqual(t, before, snapshotKey(t, tx), "after the refusals")
	requireEqual(t, `v0=""/false v5=""/false l1=[a b c] l3=[t3] m2=[] m4=[] timers=[]`, before)
	requireNoError(t, tx.Commit())
}
