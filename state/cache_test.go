package state

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// pebbleEntry reads key straight from Pebble, past the cache.
func pebbleEntry(t testing.TB, d *Deployment, key string) (Entry, bool) {
	t.Helper()
	v, found, err := d.s.readValue(valueKey(nil, d.prefix, []byte(key)))
	requireNoError(t, err)
	if !found {
		return Entry{}, false
	}
	e, err := decodeEntry(v)
	requireNoError(t, err)
	return e, true
}

// cached looks key up in the cache only; hit is false when it holds nothing for key.
func cached(d *Deployment, key string) (e Entry, found, hit bool) {
	e, found, hit, _ = d.s.cache.get(d.name, []byte(key), nil)
	return e, found, hit
}

// requireCoherent checks that Get and the cache (where it holds the key) agree with Pebble.
func requireCoherent(t testing.TB, d *Deployment, keys ...string) {
	t.Helper()
	for _, k := range keys {
		want, wantFound := pebbleEntry(t, d, k)
		if e, found, hit := cached(d, k); hit {
			requireEqual(t, wantFound, found, "cached presence of %q", k)
			requireEqual(t, want, e, "cached entry of %q", k)
		}
		got, found, err := d.Get([]byte(k))
		requireNoError(t, err)
		requireEqual(t, wantFound, found, "presence of %q", k)
		requireEqual(t, want, got, "entry of %q", k)
	}
}

// requireCached checks that the cache holds key with want (found false: as absent).
func requireCached(t testing.TB, d *Deployment, key string, want Entry, wantFound bool) {
	t.Helper()
	e, found, hit := cached(d, key)
	if !hit {
		t.Fatalf("%q is not cached", key)
	}
	requireEqual(t, wantFound, found, "cached presence of %q", key)
	requireEqual(t, want, e, "cached entry of %q", key)
}

func get(t testing.TB, d *Deployment, key string) Entry {
	t.Helper()
	e, _, err := d.Get([]byte(key))
	requireNoError(t, err)
	return e
}

// TestCacheCoherence runs sequences of commits and reads and checks after each that the
// cache says what Pebble says, and that it holds what the sequence should have left in it.
func TestCacheCoherence(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, s *Store, d *Deployment)
	}{
		{"a commit updates a cached entry", func(t *testing.T, s *Store, d *Deployment) {
			commit(t, d, 1, map[string]Entry{"a": val("v1")})
			requireEqual(t, val("v1"), get(t, d, "a"))
			commit(t, d, 2, map[string]Entry{"a": val("v2")})
			requireCached(t, d, "a", val("v2"), true)
		}},
		{"a commit caches keys never read", func(t *testing.T, s *Store, d *Deployment) {
			commit(t, d, 1, map[string]Entry{"a": val("v1"), "b": {TimeoutMs: 9}})
			requireCached(t, d, "a", val("v1"), true)
			requireCached(t, d, "b", Entry{TimeoutMs: 9}, true)
		}},
		{"a remove caches the absence", func(t *testing.T, s *Store, d *Deployment) {
			commit(t, d, 1, map[string]Entry{"a": valT("v1", 10)})
			get(t, d, "a")
			commit(t, d, 2, map[string]Entry{"a": {}})
			requireCached(t, d, "a", Entry{}, false)
			requireEqual(t, []timer(nil), expired(t, d, math.MaxInt64))
		}},
		{"a read miss caches the absence, a commit replaces it", func(t *testing.T, s *Store, d *Deployment) {
			_, found, err := d.Get([]byte("new"))
			requireNoError(t, err)
			requireEqual(t, false, found)
			requireCached(t, d, "new", Entry{}, false)
			commit(t, d, 1, map[string]Entry{"new": val("here")})
			requireCached(t, d, "new", val("here"), true)
		}},
		{"timeouts move with the timer index", func(t *testing.T, s *Store, d *Deployment) {
			commit(t, d, 1, map[string]Entry{"a": valT("x", 100), "b": valT("y", 300)})
			get(t, d, "a")
			commit(t, d, 2, map[string]Entry{"a": valT("x", 200)})
			requireCached(t, d, "a", valT("x", 200), true)
			requireEqual(t, []timer(nil), expired(t, d, 150))
			requireEqual(t, []timer{{"a", 200}}, expired(t, d, 250))
			commit(t, d, 3, map[string]Entry{"a": val("x")}) // timeout cleared
			requireCached(t, d, "a", val("x"), true)
			requireEqual(t, []timer{{"b", 300}}, expired(t, d, math.MaxInt64))
		}},
		{"the last Set of a key in a batch wins", func(t *testing.T, s *Store, d *Deployment) {
			b := d.NewBatch(1)
			b.Set([]byte("a"), Entry{}, valT("1", 10))
			b.Set([]byte("a"), valT("1", 10), valT("2", 20))
			b.Set([]byte("r"), Entry{}, val("gone"))
			b.Set([]byte("r"), val("gone"), Entry{})
			requireNoError(t, commitErr(b))
			requireCached(t, d, "a", valT("2", 20), true)
			requireCached(t, d, "r", Entry{}, false)
		}},
		{"empty values and update times", func(t *testing.T, s *Store, d *Deployment) {
			commit(t, d, 1, map[string]Entry{
				"e": {Value: []byte{}, HasValue: true},
				"u": {Value: []byte("v"), HasValue: true, UpdatedMs: 77},
				"n": {TimeoutMs: 5, UpdatedMs: 77}, // no value: the update time is not kept
			})
			requireCached(t, d, "e", Entry{Value: []byte{}, HasValue: true}, true)
			requireCached(t, d, "u", Entry{Value: []byte("v"), HasValue: true, UpdatedMs: 77}, true)
			requireCached(t, d, "n", Entry{TimeoutMs: 5}, true)
		}},
		{"a refused batch changes nothing", func(t *testing.T, s *Store, d *Deployment) {
			commit(t, d, 1, map[string]Entry{"a": val("v1")})
			b := d.NewBatch(1) // not after the last committed batch
			b.Set([]byte("a"), val("v1"), val("refused"))
			requireErrorIs(t, commitErr(b), ErrBatchOrder)
			requireCached(t, d, "a", val("v1"), true)
		}},
		{"a discarded batch changes nothing", func(t *testing.T, s *Store, d *Deployment) {
			commit(t, d, 1, map[string]Entry{"a": val("v1")})
			b := d.NewBatch(2)
			b.Set([]byte("a"), val("v1"), val("discarded"))
			b.Close()
			requireErrorIs(t, commitErr(b), ErrBatchDone)
			requireCached(t, d, "a", val("v1"), true)
		}},
		{"Drop empties it", func(t *testing.T, s *Store, d *Deployment) {
			commit(t, d, 1, map[string]Entry{"a": val("v1")})
			requireNoError(t, d.Drop())
			requireEqual(t, 0, s.cache.len())
			_, found, err := d.Get([]byte("a"))
			requireNoError(t, err)
			requireEqual(t, false, found)
		}},
		{"deployments do not share entries", func(t *testing.T, s *Store, d *Deployment) {
			other := s.Deployment("other")
			commit(t, d, 1, map[string]Entry{"a": val("mine")})
			commit(t, other, 1, map[string]Entry{"a": val("theirs")})
			requireCached(t, d, "a", val("mine"), true)
			requireCached(t, other, "a", val("theirs"), true)
			commit(t, other, 2, map[string]Entry{"a": {}})
			requireCached(t, d, "a", val("mine"), true)
			requireCached(t, other, "a", Entry{}, false)
			requireCoherent(t, other, "a")
		}},
		{"a second handle of the deployment sees the first's commits", func(t *testing.T, s *Store, d *Deployment) {
			again := s.Deployment(d.Name())
			commit(t, d, 1, map[string]Entry{"a": val("v1")})
			requireEqual(t, val("v1"), get(t, again, "a"))
			commit(t, again, 2, map[string]Entry{"a": val("v2")})
			requireEqual(t, val("v2"), get(t, d, "a"))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openMem(t)
			d := s.Deployment("cache")
			tc.run(t, s, d)
			requireCoherent(t, d, "a", "b", "e", "n", "r", "u", "new", "never-written")
		})
	}
}

// TestCacheCommitFailure: a failed commit empties the cache, the failed store serves nothing
// from it, and the reopened store starts empty and reads what reached disk.
func TestCacheCommitFailure(t *testing.T) {
	mem := vfs.NewMem()
	toggle := &errorfs.Toggle{Injector: errorfs.ErrInjected.If(errorfs.And(errorfs.Writes, errorfs.PathMatch("db/*.log")))}
	s, err := Open("db", &Options{FS: errorfs.Wrap(mem, toggle), Logger: quietLogger()})
	requireNoError(t, err)
	d := s.Deployment("fail")
	commit(t, d, 1, map[string]Entry{"a": valT("a1", 100), "b": val("b1")})
	get(t, d, "a")
	if s.cache.len() == 0 {
		t.Fatal("nothing cached after a commit and a read")
	}

	toggle.On()
	b := d.NewBatch(2)
	b.Set([]byte("a"), valT("a1", 100), valT("a2", 200))
	b.Set([]byte("b"), val("b1"), Entry{})
	b.Set([]byte("c"), Entry{}, val("c2"))
	requireErrorIs(t, commitErr(b), ErrFailed)
	requireEqual(t, 0, s.cache.len(), "entries cached after a failed commit")
	_, _, err = d.Get([]byte("a"))
	requireErrorIs(t, err, ErrFailed)
	_ = s.Close()
	toggle.Off()

	s, err = Open("db", &Options{FS: mem, Logger: quietLogger()})
	requireNoError(t, err)
	defer s.Close()
	requireEqual(t, 0, s.cache.len(), "a reopened store starts with entries cached")
	d = s.Deployment("fail")
	requireEqual(t, valT("a1", 100), get(t, d, "a"))
	requireEqual(t, val("b1"), get(t, d, "b"))
	requireCoherent(t, d, "a", "b", "c")
	commit(t, d, 2, map[string]Entry{"a": valT("a2", 200), "c": val("c2")})
	requireCached(t, d, "a", valT("a2", 200), true)
	requireCoherent(t, d, "a", "b", "c")
}

// TestCacheReopen: a store reopened on disk starts with an empty cache and reads what was
// committed.
func TestCacheReopen(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	d := s.Deployment("reopen")
	commit(t, d, 1, map[string]Entry{"a": valT("v1", 5), "b": val("x")})
	commit(t, d, 2, map[string]Entry{"b": {}})
	requireNoError(t, s.Close())

	s = openDisk(t, dir)
	defer s.Close()
	requireEqual(t, 0, s.cache.len())
	d = s.Deployment("reopen")
	requireCoherent(t, d, "a", "b")
	requireCached(t, d, "a", valT("v1", 5), true)
	requireCached(t, d, "b", Entry{}, false)
}

// TestCacheFillAfterCommit: a read that missed before a commit does not store what it read
// once the commit began; a read during a commit bypasses the cache.
func TestCacheFillAfterCommit(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("race")
	commit(t, d, 1, map[string]Entry{"a": val("old")})
	s.cache.clear()

	tok := d.stripe.startRead() // a reader misses and reads "old" from Pebble...
	old, _ := pebbleEntry(t, d, "a")
	commit(t, d, 2, map[string]Entry{"a": val("new")})          // ...a commit runs...
	s.cache.fill(d.stripe, tok, d.name, []byte("a"), old, true) // ...and the reader fills
	requireCached(t, d, "a", val("new"), true)

	s.cache.clear()
	tok = d.stripe.startRead()
	d.stripe.beginWrite() // a commit in progress
	if d.stripe.startRead().ok {
		t.Fatal("a read during a write may use the cache")
	}
	requireEqual(t, val("new"), get(t, d, "a"))
	requireEqual(t, 0, s.cache.len(), "a read during a write filled the cache")
	d.stripe.gen.Add(1)
	d.stripe.active.Add(-1)
	s.cache.fill(d.stripe, tok, d.name, []byte("a"), old, true)
	requireEqual(t, 0, s.cache.len(), "a read from before a write filled the cache")
}

// TestCacheEviction: a small cache stays within its budget and stays coherent.
func TestCacheEviction(t *testing.T) {
	const budget = 8 << 10
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quietLogger(), StateCacheSize: budget})
	requireNoError(t, err)
	defer s.Close()
	d := s.Deployment("evict")
	var keys []string
	for i := range 500 {
		keys = append(keys, fmt.Sprintf("key-%03d", i))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for batch := uint64(1); batch <= 20; batch++ {
		sets := map[string]Entry{}
		for range 50 {
			k := keys[r.IntN(len(keys))]
			switch r.IntN(4) {
			case 0:
				sets[k] = Entry{}
			case 1:
				sets[k] = Entry{TimeoutMs: int64(r.IntN(1000) + 1)}
			default:
				sets[k] = valT(string(bytes.Repeat([]byte{'v'}, r.IntN(200))), int64(r.IntN(1000)))
			}
		}
		commit(t, d, batch, sets)
		for range 100 {
			get(t, d, keys[r.IntN(len(keys))])
		}
		for i := range s.cache.shards {
			sh := &s.cache.shards[i]
			if sh.used > sh.budget || sh.used < 0 {
				t.Fatalf("batch %d: shard %d uses %d bytes of %d", batch, i, sh.used, sh.budget)
			}
			requireShardConsistent(t, sh)
		}
	}
	if n := s.cache.len(); n == 0 || n >= len(keys) {
		t.Fatalf("%d entries cached of %d keys in %d bytes", n, len(keys), budget)
	}
	requireCoherent(t, d, keys...)
	// An entry larger than the whole cache is not cached, and stays readable.
	big := val(string(bytes.Repeat([]byte{'b'}, 2*budget)))
	commit(t, d, 21, map[string]Entry{"big": big})
	if _, _, hit := cached(d, "big"); hit {
		t.Fatal("an entry over the budget was cached")
	}
	requireEqual(t, big, get(t, d, "big"))
}

// TestCacheDisabled: a negative StateCacheSize turns the cache off.
func TestCacheDisabled(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quietLogger(), StateCacheSize: -1})
	requireNoError(t, err)
	defer s.Close()
	if s.cache != nil {
		t.Fatal("cache present")
	}
	d := s.Deployment("off")
	commit(t, d, 1, map[string]Entry{"a": valT("v", 3)})
	requireEqual(t, valT("v", 3), get(t, d, "a"))
	requireNoError(t, d.Drop())
}

// TestGetAppend: values are appended to the buffer, stay valid when it grows, and cannot
// be overwritten through the returned slice; with and without the cache, hit or miss.
func TestGetAppend(t *testing.T) {
	for _, size := range []int64{0, -1} {
		t.Run(fmt.Sprintf("cache=%d", size), func(t *testing.T) {
			s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quietLogger(), StateCacheSize: size})
			requireNoError(t, err)
			defer s.Close()
			d := s.Deployment("append")
			sets := map[string]Entry{"t": {TimeoutMs: 4}, "e": {Value: []byte{}, HasValue: true}}
			for i := range 40 {
				sets[strconv.Itoa(i)] = val(fmt.Sprintf("value-%d", i))
			}
			commit(t, d, 1, sets)
			for round := range 2 { // first a miss where there is a cache, then a hit
				buf := []byte("prefix")
				var got []Entry
				for i := range 40 {
					e, found, nbuf, err := d.GetAppend(buf, []byte(strconv.Itoa(i)))
					requireNoError(t, err)
					requireEqual(t, true, found)
					requireEqual(t, len(buf)+len(e.Value), len(nbuf), "round %d: appended", round)
					requireEqual(t, len(e.Value), cap(e.Value), "round %d: capacity cut", round)
					buf = nbuf
					got = append(got, e)
				}
				for i, e := range got {
					requireEqual(t, fmt.Sprintf("value-%d", i), string(e.Value), "round %d", round)
				}
				requireEqual(t, "prefix", string(buf[:6]))
				_ = append(got[0].Value, "clobber"...)
				requireEqual(t, "value-1", string(got[1].Value))

				e, found, nbuf, err := d.GetAppend(buf, []byte("missing"))
				requireNoError(t, err)
				requireEqual(t, false, found)
				requireEqual(t, Entry{}, e)
				requireEqual(t, len(buf), len(nbuf))
				e, _, _, err = d.GetAppend(nil, []byte("e"))
				requireNoError(t, err)
				requireEqual(t, Entry{Value: []byte{}, HasValue: true}, e)
				e, _, _, err = d.GetAppend(buf, []byte("t"))
				requireNoError(t, err)
				requireEqual(t, Entry{TimeoutMs: 4}, e)
			}
		})
	}
}

// TestGetAppendHitAllocs: a read served by the cache allocates nothing.
func TestGetAppendHitAllocs(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("allocs")
	commit(t, d, 1, map[string]Entry{`"user-1"`: valT(`{"n":1}`, 9)})
	key := []byte(`"user-1"`)
	buf := make([]byte, 0, 64)
	if _, _, hit := cached(d, string(key)); !hit {
		t.Fatal("not cached")
	}
	n := testing.AllocsPerRun(100, func() {
		if _, _, _, err := d.GetAppend(buf[:0], key); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per cached read", n)
	}
}

// TestCacheMonotonicReads runs readers against a writer over a small cache (so entries are
// evicted and refilled all the time). Every batch writes its id to every key, so a reader
// must never read an id lower than one it read before, of any key: a stale fill would.
func TestCacheMonotonicReads(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quietLogger(), StateCacheSize: 4 << 10})
	requireNoError(t, err)
	defer s.Close()
	d := s.Deployment("mono")
	const nKeys, nBatches = 32, 150
	key := func(i int) []byte { return []byte(fmt.Sprintf("k%02d", i)) }
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(r), 9))
			seen := uint64(0)
			var buf []byte
			for !done.Load() {
				k := key(rnd.IntN(nKeys))
				e, found, nbuf, err := d.GetAppend(buf[:0], k)
				buf = nbuf
				if err == nil && !found && seen > 0 {
					err = fmt.Errorf("%s is missing after reading batch %d", k, seen)
				}
				var id uint64
				if err == nil && found {
					id, err = strconv.ParseUint(string(e.Value), 10, 64)
				}
				if err == nil && id < seen {
					err = fmt.Errorf("read %s = batch %d after reading batch %d", k, id, seen)
				}
				if err != nil {
					errc <- err
					return
				}
				seen = id
			}
		}()
	}
	prev := make([]Entry, nKeys)
	for batch := uint64(1); batch <= nBatches; batch++ {
		b := d.NewBatch(batch)
		for i := range nKeys {
			next := valT(strconv.FormatUint(batch, 10), int64(batch))
			b.Set(key(i), prev[i], next)
			prev[i] = next
		}
		requireNoError(t, commitErr(b))
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for i := range nKeys {
		requireEqual(t, valT(strconv.Itoa(nBatches), nBatches), get(t, d, string(key(i))))
	}
}

// TestSetOrderWithinBatch: Commit writes a batch's Sets sorted by key, and writes of one key
// keep their order: a timer moved away and back, a key removed and set again, or set and
// removed, end as the last Set says, in the entries, the timer index and the cache.
func TestSetOrderWithinBatch(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("order")
	commit(t, d, 1, map[string]Entry{"m": valT("m0", 5), "r": val("r0"), "z": val("z0")})
	b := d.NewBatch(2)
	b.Set([]byte("z"), val("z0"), Entry{})           // removed...
	b.Set([]byte("z"), Entry{}, valT("z2", 1))       // ...and set again
	b.Set([]byte("m"), valT("m0", 5), valT("m1", 7)) // timer moved away...
	b.Set([]byte("m"), valT("m1", 7), valT("m2", 5)) // ...and back
	b.Set([]byte("r"), val("r0"), valT("r1", 3))     // set...
	b.Set([]byte("r"), valT("r1", 3), Entry{})       // ...and removed
	b.Set([]byte("a"), Entry{}, Entry{TimeoutMs: 5}) // a new timer tied with m's
	// Many writes of one key, so the sort sees long runs of ties.
	prev := Entry{}
	for i := range 102 {
		next := valT(fmt.Sprint("x", i), int64(5+2*(i%2)))
		if i%3 == 1 {
			next = Entry{}
		}
		b.Set([]byte("x"), prev, next)
		y := Entry{}
		if i >= 7 {
			y = Entry{TimeoutMs: 5} // as the earlier Set of the same y key left it
		}
		b.Set([]byte(fmt.Sprint("y", i%7)), y, Entry{TimeoutMs: 5})
		prev = next
	}
	requireNoError(t, commitErr(b))
	if prev.TimeoutMs == 0 {
		t.Fatal("the test should end with x set")
	}
	requireEqual(t, prev, get(t, d, "x"))
	x, _ := pebbleEntry(t, d, "x")
	requireEqual(t, prev, x)
	timers := []timer{{"z", 1}, {"a", 5}, {"m", 5}, {"x", prev.TimeoutMs}}
	for i := range 7 {
		timers = append(timers, timer{fmt.Sprint("y", i), 5})
	}
	requireEqual(t, sortedTimers(timers), expired(t, d, math.MaxInt64))
	for i := range 7 {
		b := d.NewBatch(uint64(100 + i)) // clear the y keys again
		b.Set([]byte(fmt.Sprint("y", i)), Entry{TimeoutMs: 5}, Entry{})
		requireNoError(t, commitErr(b))
	}
	b = d.NewBatch(200)
	b.Set([]byte("x"), prev, Entry{})
	requireNoError(t, commitErr(b))
	requireEqual(t, []timer{{"z", 1}, {"a", 5}, {"m", 5}}, expired(t, d, math.MaxInt64))
	want := map[string]Entry{"a": {TimeoutMs: 5}, "m": valT("m2", 5), "z": valT("z2", 1)}
	requireEqual(t, want, allKeys(t, d))
	for k, e := range want {
		requireCached(t, d, k, e, true)
	}
	requireCached(t, d, "r", Entry{}, false)
	p, err := d.Progress()
	requireNoError(t, err)
	requireEqual(t, Progress{BatchID: 200, Keys: 2, TimerKeys: 3}, p)
	requireCoherent(t, d, "a", "m", "r", "z")
}

// sortedTimers orders timers by timeout, then key (as Expired does), for comparisons.
func sortedTimers(ts []timer) []timer {
	return slices.SortedFunc(slices.Values(ts), func(a, b timer) int {
		if c := cmp.Compare(a.Ts, b.Ts); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}
