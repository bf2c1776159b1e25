package state

import "testing"

// TestRevertKeys: committed transactions of failed group calls, reverted later and in any
// order, leave nothing of their writes or of their key counts; the others commit as they
// were, and the batch goes on.
func TestRevertKeys(t *testing.T) {
	_, d, vars, _ := openVars(t)
	items := vars.Index("events")
	b := d.NewBatch(2)
	defer b.Close()
	var txns []*KeyTxn
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		tx := b.Key(vars, []byte(k), 1000)
		requireNoError(t, tx.ListAppend(items, bs(k+"1", k+"2")...))
		requireNoError(t, tx.TimerRegister(5000))
		requireNoError(t, tx.Commit())
		txns = append(txns, tx)
	}
	requireNoError(t, b.RevertKeys(txns[4], txns[1], txns[3])) // e, b and d: any order
	if err := b.RevertKeys(txns[1]); err == nil {
		t.Fatal("a second revert of the same transaction was accepted")
	}
	if err := b.RevertKeys(txns[0]); err == nil {
		t.Fatal("a revert of a transaction committed before the last revert was accepted")
	}
	for _, k := range []string{"f", "g"} { // the batch goes on
		tx := b.Key(vars, []byte(k), 1000)
		requireNoError(t, tx.ListAppend(items, []byte(k+"1")))
		requireNoError(t, tx.Commit())
		txns = append(txns, tx)
	}
	requireNoError(t, b.RevertKeys(txns[6]))
	p, err := b.Commit()
	requireNoError(t, err)
	requireEqual(t, int64(3), p.Keys, "keys after reverting b, d, e and g")
	requireEqual(t, int64(2), p.TimerKeys, "timer keys after reverting b, d, e and g")
	for _, tc := range []struct {
		key  string
		want []string
	}{{"a", []string{"a1", "a2"}}, {"b", nil}, {"c", []string{"c1", "c2"}}, {"d", nil}, {"e", nil}, {"f", []string{"f1"}}, {"g", nil}} {
		ks, err := d.KeyVars([]byte(tc.key), 1000)
		requireNoError(t, err)
		var got []string
		for _, v := range ks.Vars {
			if v.Decl.Name == "events" {
				got = strs(v.Elements)
			}
		}
		if len(got) == 0 {
			got = nil
		}
		requireEqual(t, tc.want, got, "key %s", tc.key)
	}
}
