package state

import (
	"testing"
)

// openVarsNoCache is openVars on a store without the hot-state cache: a transaction's reads
// go through its batch to Pebble, so that a record written behind the batch's back shows
// whether a transaction read it.
func openVarsNoCache(t *testing.T) (*Deployment, *Vars) {
	t.Helper()
	s, err := Open(t.TempDir(), &Options{Logger: quietLogger(), StateCacheSize: -1})
	requireNoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	d := s.Deployment("dep")
	b := d.NewBatch(1)
	vars, err := b.DeclareVars(testDecls)
	requireNoError(t, err)
	_, err = b.Commit()
	requireNoError(t, err)
	return d, vars
}

// behind writes key's value of variable v, and a key record counting it, straight to Pebble,
// behind every batch's back.
func behind(t *testing.T, d *Deployment, vars *Vars, key string, v int, value string) {
	t.Helper()
	head := varHeadKey(nil, d.prefix, vars.ids[v], []byte(key))
	requireNoError(t, d.s.db.Set(head, appendItem(nil, 0, []byte(value)), nil))
	requireNoError(t, d.s.db.Set(keyRecKey(nil, d.prefix, []byte(key)), appendKeyRec(nil, keyRec{vars: 1}), nil))
}

// A continuation of a committed transaction (the writes of an ABI v2 group's result, after
// its guest call) knows what the transaction read: it does not read the key's record or a
// value's head again. Written behind the batch's back after the first transaction, the key's
// value and record are not what the continuation's write counts from; a transaction begun
// anew reads them, and so does a continuation after the batch reverted transactions.
func TestContinueKnowsWhatItRead(t *testing.T) {
	d, vars := openVarsNoCache(t)

	b := d.NewBatch(2)
	defer b.Close()
	tx := b.Key(vars, []byte("k"), 0)
	_, ok, err := tx.ValueGet(vVal)
	requireNoError(t, err)
	requireEqual(t, false, ok)
	requireNoError(t, tx.Commit())
	behind(t, d, vars, "k", vVal, "behind")

	c := tx.Continue()
	requireNoError(t, c.ValueSet(vVal, []byte("set")))
	requireNoError(t, c.Commit())
	requireEqual(t, int64(1), b.keysDelta, "keys the batch counts: the continuation's write makes k a key, as its transaction read none")
	requireEqual(t, keyRec{vars: 1}, c.rec, "the continuation's record")

	// A transaction begun anew reads the value stored behind the batch's back.
	b2 := d.NewBatch(3)
	defer b2.Close()
	behind(t, d, vars, "j", vVal, "behind")
	tx = b2.Key(vars, []byte("j"), 0)
	requireNoError(t, tx.ValueSet(vVal, []byte("set")))
	requireNoError(t, tx.Commit())
	requireEqual(t, int64(0), b2.keysDelta, "a new transaction reads j's record")

	// After a RevertKeys the continuation knows nothing and reads.
	b3 := d.NewBatch(4)
	defer b3.Close()
	tx = b3.Key(vars, []byte("m"), 0)
	_, _, err = tx.ValueGet(vVal)
	requireNoError(t, err)
	requireNoError(t, tx.Commit())
	other := b3.Key(vars, []byte("other"), 0)
	requireNoError(t, other.ValueSet(vVal, []byte("x")))
	requireNoError(t, other.Commit())
	requireNoError(t, b3.RevertKeys(other))
	behind(t, d, vars, "m", vVal, "behind")
	c = tx.Continue()
	requireNoError(t, c.ValueSet(vVal, []byte("set")))
	requireNoError(t, c.Commit())
	requireEqual(t, int64(0), b3.keysDelta, "a continuation after a revert reads m's record")
}

// A key whose record is absent holds nothing: a transaction that loaded it reads none of the
// key's value heads, meta records or map entries (what a store written only by transactions
// holds; written behind the batch's back without a record, a value is not seen).
func TestNoKeyRecordNoReads(t *testing.T) {
	d, vars := openVarsNoCache(t)
	head := varHeadKey(nil, d.prefix, vars.ids[vVal], []byte("k"))
	requireNoError(t, d.s.db.Set(head, appendItem(nil, 0, []byte("behind")), nil))

	b := d.NewBatch(2)
	defer b.Close()
	tx := b.Key(vars, []byte("k"), 0)
	_, ok, err := tx.ValueGet(vVal)
	requireNoError(t, err)
	requireEqual(t, false, ok, "a value of a key without a record")
	requireNoError(t, tx.Discard())

	// With the record, the value is read.
	requireNoError(t, d.s.db.Set(keyRecKey(nil, d.prefix, []byte("k")), appendKeyRec(nil, keyRec{vars: 1}), nil))
	tx = b.Key(vars, []byte("k"), 0)
	v, ok, err := tx.ValueGet(vVal)
	requireNoError(t, err)
	requireEqual(t, true, ok)
	requireEqual(t, "behind", string(v))
	requireNoError(t, tx.Discard())
}

// A value the batch's overlay or the hot-state cache holds is read from there alone: the
// key's record is loaded only when the store itself would be read.
func TestCachedHeadNeedsNoKeyRecord(t *testing.T) {
	_, d, vars, _ := openVars(t)
	b := d.NewBatch(2)
	tx := b.Key(vars, []byte("k"), 0)
	requireNoError(t, tx.ValueSet(vVal, []byte("v")))
	requireNoError(t, tx.Commit())
	_, err := b.Commit()
	requireNoError(t, err)

	b = d.NewBatch(3)
	defer b.Close()
	tx = b.Key(vars, []byte("k"), 0)
	v, ok, err := tx.ValueGet(vVal)
	requireNoError(t, err)
	requireEqual(t, true, ok)
	requireEqual(t, "v", string(v))
	requireEqual(t, false, tx.recLoaded, "the key's record loaded for a cached value")
	requireNoError(t, tx.Discard())
}
