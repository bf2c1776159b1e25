package state

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// forkScript is the work of one chunk of a phase: its keys' transactions, some of them
// failing (Discard before commit, or RevertKeys after), each key written by this chunk only.
func forkScript(b *Batch, vars *Vars, keys []string, fail map[string]bool) error {
	count, events, seen := vars.Index("count"), vars.Index("events"), vars.Index("seen")
	var failed []*KeyTxn
	for i, k := range keys {
		tx := b.Key(vars, []byte(k), 1000)
		v, _, err := tx.ValueGet(count) // the value as the batch left it before the fork
		if err != nil {
			return err
		}
		elems, _, err := tx.ListRead(events, 0, 1<<20)
		if err != nil {
			return err
		}
		for _, err := range []error{
			tx.ValueSet(count, fmt.Appendf(nil, "%s+%d", v, len(elems))),
			tx.ListAppend(events, []byte(k+"x")),
			tx.MapSet(seen, []byte("m"), []byte(k)),
			tx.TimerRegister(int64(500 + i)),
		} {
			if err != nil {
				return err
			}
		}
		if fail[k] && i%2 == 0 {
			if err := tx.Discard(); err != nil {
				return err
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if fail[k] {
			failed = append(failed, tx)
		}
	}
	return b.RevertKeys(failed...)
}

// dump returns every key and value of d, after its prefix.
func dump(t *testing.T, d *Deployment) []string {
	t.Helper()
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: d.prefix, UpperBound: prefixEnd(d.prefix)})
	requireNoError(t, err)
	defer iter.Close()
	var out []string
	for ok := iter.First(); ok; ok = iter.Next() {
		out = append(out, fmt.Sprintf("%q=%q", iter.Key()[len(d.prefix):], iter.Value()))
	}
	requireNoError(t, iter.Error())
	return out
}

// TestBatchForks: the chunks of a phase run in forks of the batch at once, each seeing the
// batch's writes before the fork and its own, failed keys reverted within their fork; after
// Join the batch reads and commits exactly what running the chunks one after the other on
// the batch itself commits, and its key counters count the same keys.
func TestBatchForks(t *testing.T) {
	chunks := [][]string{{"a", "b", "c", "d"}, {"e", "f", "g"}, {"h", "i"}}
	fail := map[string]bool{"b": true, "c": true, "f": true, "i": true}
	before := func(t *testing.T, b *Batch, vars *Vars) {
		for _, k := range []string{"a", "e", "h", "z"} { // an earlier phase of the same batch
			tx := b.Key(vars, []byte(k), 1000)
			requireNoError(t, tx.ValueSet(vars.Index("count"), []byte(k)))
			requireNoError(t, tx.ListAppend(vars.Index("events"), []byte(k+"0")))
			requireNoError(t, tx.Commit())
		}
	}
	after := func(t *testing.T, b *Batch, vars *Vars) Progress {
		var timers []string
		requireNoError(t, b.ExpiredTimers(TimerPos{TimeoutMs: -1 << 63}, 1<<62, func(key []byte, ts int64) error {
			timers = append(timers, fmt.Sprintf("%s@%d", key, ts))
			return nil
		}))
		requireEqual(t, []string{"a@500", "e@500", "h@500", "g@502", "d@503"}, timers, "timers after the phase")
		tx := b.Key(vars, []byte("z"), 1000) // a later phase reads the chunks' writes
		requireNoError(t, tx.ListAppend(vars.Index("events"), []byte("z1")))
		requireNoError(t, tx.Commit())
		p, err := b.Commit()
		requireNoError(t, err)
		return p
	}

	_, serial, vars, _ := openVars(t)
	b := serial.NewBatch(2)
	before(t, b, vars)
	for _, c := range chunks {
		requireNoError(t, forkScript(b, vars, c, fail))
	}
	want := after(t, b, vars)

	_, par, pvars, _ := openVars(t)
	b = par.NewBatch(2)
	defer b.Close()
	before(t, b, pvars)
	forks, err := b.Fork(len(chunks))
	requireNoError(t, err)
	requireErrorIs(t, b.Key(pvars, []byte("a"), 1000).ValueSet(0, nil), ErrTxnOpen)
	if _, err := b.Fork(1); err != ErrTxnOpen {
		t.Fatalf("a second Fork: %v, want ErrTxnOpen", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(chunks))
	for i, c := range chunks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = forkScript(forks[i], pvars, c, fail)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		requireNoError(t, err)
	}
	if _, err := forks[0].Commit(); err != ErrBatchDone {
		t.Fatalf("a fork's Commit: %v, want ErrBatchDone", err)
	}
	requireNoError(t, b.Join(forks...))
	requireErrorIs(t, forks[1].Key(pvars, []byte("x"), 1000).ValueSet(0, nil), ErrBatchDone)
	got := after(t, b, pvars)
	requireEqual(t, want.Keys, got.Keys, "keys")
	requireEqual(t, want.TimerKeys, got.TimerKeys, "timer keys")
	requireEqual(t, int64(6), got.Keys, "keys (a, d, e, g, h and z; b, c, f and i failed)")
	requireEqual(t, dump(t, serial), dump(t, par), "the store after the batch")
	ks, err := par.KeyVars([]byte("a"), 1000)
	requireNoError(t, err)
	requireEqual(t, "a+1", string(ks.Vars[0].Value), "a's count (read the earlier phase's value and list)")
}

// TestForkSeesParentListImage: a fork reads a short list as its parent left it before the
// fork, not as the hot-state cache holds it committed. The list is committed (so the cache
// holds its image), then appended to by the batch's earlier phase; a fork's read and its
// drop of the front see the append, and the batch commits what running them on the parent
// would. (A fork once looked its image up in the cache only, and read the committed list.)
func TestForkSeesParentListImage(t *testing.T) {
	_, d, vars, _ := openVars(t)
	k, list := []byte(`"k"`), vars.Index("events")
	b := d.NewBatch(2)
	tx := b.Key(vars, k, 1000)
	requireNoError(t, tx.ListAppend(list, []byte("x")))
	requireNoError(t, tx.Commit())
	_, err := b.Commit()
	requireNoError(t, err)
	b = d.NewBatch(3)
	tx = b.Key(vars, k, 1000)
	elems, _, err := tx.ListRead(list, 0, 1<<20) // the batch's image comes from the cache
	requireNoError(t, err)
	requireEqual(t, []string{"x"}, strs(elems), "before the append")
	requireNoError(t, tx.ListAppend(list, []byte("y")))
	requireNoError(t, tx.Commit())
	forks, err := b.Fork(2)
	requireNoError(t, err)
	ftx := forks[1].Key(vars, k, 1000)
	elems, _, err = ftx.ListRead(list, 0, 1<<20)
	requireNoError(t, err)
	requireEqual(t, []string{"x", "y"}, strs(elems), "the fork's read")
	requireNoError(t, ftx.ListDropFirst(list, 1))
	requireNoError(t, ftx.Commit())
	requireNoError(t, b.Join(forks...))
	_, err = b.Commit()
	requireNoError(t, err)
	b = d.NewBatch(4)
	defer b.Close()
	tx = b.Key(vars, k, 1000)
	elems, _, err = tx.ListRead(list, 0, 1<<20)
	requireNoError(t, err)
	requireEqual(t, []string{"y"}, strs(elems), "committed, read through the cache")
	requireNoError(t, tx.Discard())
}
