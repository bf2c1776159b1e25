package state

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// memReplicator is the log of a deployment's writes, in memory: it keeps a
// copy of every write, or refuses it with fail.
type memReplicator struct {
	writes []ReplicatedWrite
	fail   error
}

func (r *memReplicator) Replicate(w ReplicatedWrite) error {
	if r.fail != nil {
		return r.fail
	}
	w.Repr = append([]byte(nil), w.Repr...)
	r.writes = append(r.writes, w)
	return nil
}

// last returns the last write replicated.
func (r *memReplicator) last(t testing.TB) ReplicatedWrite {
	t.Helper()
	if len(r.writes) == 0 {
		t.Fatal("nothing replicated")
	}
	return r.writes[len(r.writes)-1]
}

// applyAll applies writes to d in order.
func applyAll(t testing.TB, d *Deployment, writes []ReplicatedWrite) {
	t.Helper()
	for i, w := range writes {
		if err := d.ApplyReplicated(w.Repr); err != nil {
			t.Fatalf("write %d (%s of batch %d): %v", i, w.Kind, w.BatchID, err)
		}
	}
}

// rawScan returns every key (after the deployment prefix) and value of d, in order.
func rawScan(t testing.TB, d *Deployment) [][2]string {
	t.Helper()
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: d.prefix, UpperBound: prefixEnd(d.prefix)})
	requireNoError(t, err)
	defer iter.Close()
	var kvs [][2]string
	for ok := iter.First(); ok; ok = iter.Next() {
		v, err := iter.ValueAndErr()
		requireNoError(t, err)
		kvs = append(kvs, [2]string{string(iter.Key()[len(d.prefix):]), string(v)})
	}
	requireNoError(t, iter.Error())
	return kvs
}

// depState is everything a deployment's readers see.
type depState struct {
	Raw      [][2]string
	Progress Progress
	Keys     map[string]Entry
	Expired  []timer
	Outbox   []OutboxEntry
	Skipped  []string
	Gets     map[string]*Entry // of the keys asked for; nil when not found
}

// stateOf reads d with every reader, Get of each of keys included (through the hot-state
// cache, when it holds them).
func stateOf(t testing.TB, d *Deployment, keys []string) depState {
	t.Helper()
	st := depState{Raw: rawScan(t, d), Keys: allKeys(t, d), Expired: expired(t, d, math.MaxInt64), Gets: map[string]*Entry{}}
	var err error
	st.Progress, err = d.Progress()
	requireNoError(t, err)
	requireNoError(t, d.Outbox(func(e OutboxEntry) error { st.Outbox = append(st.Outbox, e); return nil }))
	requireNoError(t, d.SkippedTimeouts(func(key []byte) error { st.Skipped = append(st.Skipped, string(key)); return nil }))
	for _, k := range keys {
		e, found, err := d.Get([]byte(k))
		requireNoError(t, err)
		if found {
			st.Gets[k] = &e
		} else {
			st.Gets[k] = nil
		}
	}
	return st
}

// TestReplicaConverges is the replication property: applying every ReplicatedWrite of a
// deployment, in order, to the deployment of the same name in an empty store yields the
// same keyspace and the same reads, whatever the sequence of batches (sets, deletions,
// timeouts, outbox entries, chunked open batches, generations), acknowledgements and
// drops. The replica is compared at random points, its reads between them filling its
// hot-state cache, which the writes applied next must keep right. Neither the source's
// other deployment nor the replica's other deployments are touched.
func TestReplicaConverges(t *testing.T) {
	for seed := uint64(1); seed <= 25; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { replicaConverges(t, seed) })
	}
}

func replicaConverges(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	src, dst := openMem(t), openMem(t)
	x, other := src.Deployment("x"), src.Deployment("x-other")
	rep := &memReplicator{}
	x.SetReplicator(rep)
	commit(t, other, 1, map[string]Entry{`"o"`: val("other")})

	// The replica's neighbours: names that sort around x, and one x's prefix is a prefix of.
	neighbours := []string{"w", "x0", "xx", "y"}
	for i, n := range neighbours {
		commit(t, dst.Deployment(n), 1, map[string]Entry{`"n"`: valT(n, int64(i+1))})
	}
	neighbourState := func() []depState {
		var sts []depState
		for _, n := range neighbours {
			sts = append(sts, stateOf(t, dst.Deployment(n), []string{`"n"`}))
		}
		return sts
	}
	wantNeighbours := neighbourState()
	wantOther := stateOf(t, other, []string{`"o"`})

	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%d"`, i)
	}
	randEntry := func() Entry {
		var e Entry
		if rng.IntN(4) > 0 {
			e.HasValue = true
			e.Value = fmt.Appendf(nil, "v%d", rng.IntN(1000))
			if rng.IntN(2) == 0 {
				e.UpdatedMs = int64(rng.IntN(100) + 1)
			}
		}
		if rng.IntN(2) == 0 {
			e.TimeoutMs = int64(rng.IntN(50)) - 10 // negative ones too; 0 is none
		}
		return e
	}
	nextID := uint64(1)
	applied := 0
	x2 := dst.Deployment("x")
	check := func() {
		t.Helper()
		applyAll(t, x2, rep.writes[applied:])
		applied = len(rep.writes)
		requireEqual(t, stateOf(t, x, keys), stateOf(t, x2, keys), "replica after %d writes", applied)
	}
	for op := 0; op < 80; op++ {
		before, err := x.Progress()
		requireNoError(t, err)
		n := len(rep.writes)
		switch r := rng.IntN(100); {
		case r < 70: // a batch
			b := x.NewBatch(nextID)
			cur := map[string]Entry{} // as left by the batch's Sets: several may set one key
			for range rng.IntN(8) {
				k := keys[rng.IntN(len(keys))]
				prev, ok := cur[k]
				if !ok {
					prev, _, err = x.Get([]byte(k))
					requireNoError(t, err)
				}
				next := randEntry()
				b.Set([]byte(k), prev, next)
				cur[k] = next
			}
			for range rng.IntN(3) {
				b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte(keys[rng.IntN(len(keys))]),
					Payload: fmt.Appendf(nil, `{"n":%d}`, rng.IntN(100)), Sequence: uint64(rng.IntN(3))})
			}
			if rng.IntN(2) == 0 {
				b.SetProgress(int64(rng.IntN(100)), uint64(op))
			}
			if rng.IntN(4) == 0 { // a chunk of an open batch
				b.SkipTimeout([]byte(keys[rng.IntN(len(keys))]))
				b.SetOpen(OpenBatch{ProcessingTimeMs: int64(op), NextWatermarkMs: int64(op + 1), Next: TimerAfter(int64(rng.IntN(40)), []byte(keys[rng.IntN(len(keys))]))})
			}
			if rng.IntN(15) == 0 {
				b.SetGeneration(before.Generation + 1)
			}
			if rng.IntN(15) == 0 {
				b.SetInputCreated(int64(op))
			}
			p, err := b.Commit()
			requireNoError(t, err)
			w := rep.last(t)
			requireEqual(t, ReplicatedWrite{Kind: WriteBatch, BatchID: nextID}, ReplicatedWrite{Kind: w.Kind, BatchID: w.BatchID})
			requireEqual(t, nextID, p.BatchID)
			nextID++
		case r < 90: // an acknowledgement
			var ids []OutboxID
			requireNoError(t, x.Outbox(func(e OutboxEntry) error { ids = append(ids, e.ID); return nil }))
			if len(ids) == 0 {
				requireNoError(t, x.AckOutbox(OutboxID{BatchID: nextID}))
				requireEqual(t, n, len(rep.writes), "an ack of nothing writes nothing")
				continue
			}
			requireNoError(t, x.AckOutbox(ids[rng.IntN(len(ids))]))
			w := rep.last(t)
			requireEqual(t, ReplicatedWrite{Kind: WriteAck, BatchID: before.BatchID}, ReplicatedWrite{Kind: w.Kind, BatchID: w.BatchID})
		case r < 95:
			requireNoError(t, x.Drop())
			w := rep.last(t)
			requireEqual(t, ReplicatedWrite{Kind: WriteDrop, BatchID: before.BatchID}, ReplicatedWrite{Kind: w.Kind, BatchID: w.BatchID})
			nextID = 1
		default:
			check()
		}
		if rng.IntN(3) == 0 {
			check()
		}
	}
	check()
	// A second replica, restored from the whole log at once.
	fresh := openMem(t).Deployment("x")
	applyAll(t, fresh, rep.writes)
	requireEqual(t, stateOf(t, x, keys), stateOf(t, fresh, keys), "restored replica")

	requireEqual(t, wantNeighbours, neighbourState(), "the replica's other deployments")
	requireEqual(t, wantOther, stateOf(t, other, []string{`"o"`}), "the source's other deployment")
}

// TestReplicateError: a write whose Replicate fails applies nothing locally (Pebble, the
// progress, the hot-state cache and the outbox floor are as before) and returns an error
// wrapping ErrReplication and the Replicator's; the next commit of the same batch id works.
func TestReplicateError(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("x")
	rep := &memReplicator{}
	d.SetReplicator(rep)
	keys := []string{`"a"`, `"b"`}
	b := d.NewBatch(1)
	b.Set([]byte(`"a"`), Entry{}, valT("1", 10))
	b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte(`"a"`), Payload: []byte(`1`)})
	b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte(`"a"`), Payload: []byte(`2`)})
	requireNoError(t, commitErr(b))
	requireNoError(t, d.AckOutbox(OutboxID{BatchID: 1, Seq: 0})) // the store knows its floor now
	before := stateOf(t, d, keys)                                // Gets fill the cache: "a" present, "b" absent
	cached := s.cache.len()
	requireEqual(t, 2, cached)

	boom := errors.New("boom")
	rep.fail = boom
	n := len(rep.writes)
	b = d.NewBatch(2)
	b.Set([]byte(`"a"`), valT("1", 10), valT("2", 20))
	b.Set([]byte(`"b"`), Entry{}, val("3"))
	b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte(`"b"`), Payload: []byte(`3`)})
	b.SetProgress(5, 5)
	err := commitErr(b)
	requireErrorIs(t, err, ErrReplication)
	requireErrorIs(t, err, boom)
	err = d.AckOutbox(OutboxID{BatchID: 1, Seq: 1})
	requireErrorIs(t, err, ErrReplication)
	requireErrorIs(t, err, boom)
	err = d.Drop()
	requireErrorIs(t, err, ErrReplication)
	requireErrorIs(t, err, boom)
	requireEqual(t, n, len(rep.writes))
	requireEqual(t, cached, s.cache.len(), "cached entries")
	requireEqual(t, before, stateOf(t, d, keys), "after failed writes")
	s.cache.clear()
	requireEqual(t, before, stateOf(t, d, keys), "after failed writes, read from Pebble")

	rep.fail = nil
	b = d.NewBatch(2)
	b.Set([]byte(`"a"`), valT("1", 10), valT("2", 20))
	requireNoError(t, commitErr(b))
	e, _, err := d.Get([]byte(`"a"`))
	requireNoError(t, err)
	requireEqual(t, valT("2", 20), e)
	requireNoError(t, d.AckOutbox(OutboxID{BatchID: 1, Seq: 1}))
	requireEqual(t, ReplicatedWrite{Kind: WriteAck, BatchID: 2}, ReplicatedWrite{Kind: rep.last(t).Kind, BatchID: rep.last(t).BatchID})

	replica := openMem(t).Deployment("x")
	applyAll(t, replica, rep.writes)
	requireEqual(t, stateOf(t, d, keys), stateOf(t, replica, keys))
}

// TestApplyReplicatedRefuses: a write holding any key outside the deployment's keyspace, or
// malformed, is refused whole, and the store is left as it was.
func TestApplyReplicatedRefuses(t *testing.T) {
	s := openMem(t)
	d, y := s.Deployment("x"), s.Deployment("y")
	commit(t, d, 1, map[string]Entry{`"a"`: val("1")})
	commit(t, y, 1, map[string]Entry{`"a"`: val("y")})
	keys := []string{`"a"`, `"b"`}
	wantD, wantY := stateOf(t, d, keys), stateOf(t, y, keys)

	repr := func(f func(b *pebble.Batch)) []byte {
		b := s.db.NewBatch()
		defer b.Close()
		f(b)
		return append([]byte(nil), b.Repr()...)
	}
	entry := func(e Entry) []byte { return appendEntry(nil, e) }
	good := func(b *pebble.Batch) { _ = b.Set(valueKey(nil, d.prefix, []byte(`"b"`)), entry(val("2")), nil) }
	foreign := map[string][]byte{
		"another deployment's key": repr(func(b *pebble.Batch) {
			good(b)
			_ = b.Set(valueKey(nil, y.prefix, []byte(`"a"`)), entry(val("evil")), nil)
		}),
		"a longer name's key": repr(func(b *pebble.Batch) {
			good(b)
			_ = b.Delete(valueKey(nil, deploymentPrefix("x0"), []byte(`"a"`)), nil)
		}),
		"a store key":     repr(func(b *pebble.Batch) { good(b); _ = b.Set(formatKey, formatValue(9), nil) }),
		"the bare prefix": repr(func(b *pebble.Batch) { good(b); _ = b.Set(d.prefix, nil, nil) }),
		"a range over the store": repr(func(b *pebble.Batch) {
			good(b)
			_ = b.DeleteRange(d.prefix, []byte{0xff}, nil)
		}),
		"a range from before": repr(func(b *pebble.Batch) {
			good(b)
			_ = b.DeleteRange([]byte("d"), prefixEnd(d.prefix), nil)
		}),
	}
	for name, r := range foreign {
		requireErrorIs(t, d.ApplyReplicated(r), ErrForeignWrite)
		requireEqual(t, wantD, stateOf(t, d, keys), name)
		requireEqual(t, wantY, stateOf(t, y, keys), name)
	}

	ok := repr(good)
	corrupt := map[string][]byte{
		"no header":       ok[:8],
		"truncated":       ok[:len(ok)-1],
		"count too high":  func() []byte { r := append([]byte(nil), ok...); r[8]++; return r }(),
		"count too low":   func() []byte { r := append([]byte(nil), ok...); r[8]--; return r }(),
		"unknown kind":    func() []byte { r := append([]byte(nil), ok...); r[12] = byte(pebble.InternalKeyKindMerge); return r }(),
		"bad entry":       repr(func(b *pebble.Batch) { _ = b.Set(valueKey(nil, d.prefix, []byte(`"b"`)), []byte{1}, nil) }),
		"empty entry":     repr(func(b *pebble.Batch) { _ = b.Set(valueKey(nil, d.prefix, []byte(`"b"`)), entry(Entry{}), nil) }),
		"bad progress":    repr(func(b *pebble.Batch) { _ = b.Set(sectionKey(nil, d.prefix, sectionProgress), []byte{1, 2}, nil) }),
		"bad outbox key":  repr(func(b *pebble.Batch) { _ = b.Delete(sectionKey(nil, d.prefix, sectionOutbox), nil) }),
		"unknown section": repr(func(b *pebble.Batch) { good(b); _ = b.Set(sectionKey(nil, d.prefix, 'z'), nil, nil) }),
		"log data":        repr(func(b *pebble.Batch) { good(b); _ = b.LogData([]byte("x"), nil) }),
	}
	for name, r := range corrupt {
		requireErrorIs(t, d.ApplyReplicated(r), ErrCorrupt)
		requireEqual(t, wantD, stateOf(t, d, keys), name)
	}

	// The store still works: a good write applies.
	requireNoError(t, d.ApplyReplicated(ok))
	e, found, err := d.Get([]byte(`"b"`))
	requireNoError(t, err)
	requireEqual(t, true, found)
	requireEqual(t, val("2"), e)
	requireEqual(t, wantY, stateOf(t, y, keys))
}

// TestApplyReplicatedCache: applied writes replace what the hot-state cache holds (values,
// absences), and a range deletion (Drop) empties it.
func TestApplyReplicatedCache(t *testing.T) {
	src := openMem(t)
	sd := src.Deployment("x")
	rep := &memReplicator{}
	sd.SetReplicator(rep)
	dst := openMem(t)
	d := dst.Deployment("x")
	get := func(k string) *Entry {
		t.Helper()
		e, found, err := d.Get([]byte(k))
		requireNoError(t, err)
		if !found {
			return nil
		}
		return &e
	}

	commit(t, sd, 1, map[string]Entry{`"a"`: val("1")})
	applyAll(t, d, rep.writes)
	requireEqual(t, &Entry{Value: []byte("1"), HasValue: true}, get(`"a"`))
	requireEqual(t, (*Entry)(nil), get(`"b"`))
	if dst.cache.len() != 2 {
		t.Fatalf("cache holds %d entries, want 2", dst.cache.len())
	}

	n := len(rep.writes)
	commit(t, sd, 2, map[string]Entry{`"a"`: valT("2", 7), `"b"`: val("3")})
	applyAll(t, d, rep.writes[n:])
	requireEqual(t, &Entry{Value: []byte("2"), HasValue: true, TimeoutMs: 7}, get(`"a"`))
	requireEqual(t, &Entry{Value: []byte("3"), HasValue: true}, get(`"b"`))

	n = len(rep.writes)
	commit(t, sd, 3, map[string]Entry{`"b"`: {}})
	applyAll(t, d, rep.writes[n:])
	requireEqual(t, (*Entry)(nil), get(`"b"`))

	n = len(rep.writes)
	requireNoError(t, sd.Drop())
	applyAll(t, d, rep.writes[n:])
	requireEqual(t, 0, dst.cache.len())
	requireEqual(t, (*Entry)(nil), get(`"a"`))
	requireEqual(t, Progress{}, stateOf(t, d, nil).Progress)
}

// TestReplicatedCommitsNoSync: with a Replicator, commits, acknowledgements and drops are
// not synced locally, so a power loss loses them; the local copy then catches up from the
// log (here from its start, and again from an earlier write: applying again is harmless).
// Without one, a commit is synced.
func TestReplicatedCommitsNoSync(t *testing.T) {
	s, crash := crashOpen(t)
	d := s.Deployment("x")
	rep := &memReplicator{}
	d.SetReplicator(rep)
	keys := []string{`"a"`, `"b"`}
	b := d.NewBatch(1)
	b.Set([]byte(`"a"`), Entry{}, valT("1", 5))
	b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Payload: []byte(`1`)})
	requireNoError(t, commitErr(b))
	commit(t, d, 2, map[string]Entry{`"b"`: val("2")})
	requireNoError(t, d.AckOutbox(OutboxID{BatchID: 1}))
	requireNoError(t, d.SyncAcks()) // nothing to do with a Replicator

	c := crash().Deployment("x")
	requireEqual(t, depState{Keys: map[string]Entry{}, Gets: map[string]*Entry{`"a"`: nil, `"b"`: nil}}, stateOf(t, c, keys), "after a power loss")
	applyAll(t, c, rep.writes)
	want := stateOf(t, d, keys)
	requireEqual(t, want, stateOf(t, c, keys), "caught up from the log")
	applyAll(t, c, rep.writes[1:])
	requireEqual(t, want, stateOf(t, c, keys), "caught up again from write 1")

	d.SetReplicator(nil)
	commit(t, d, 3, map[string]Entry{`"a"`: val("3")})
	requireEqual(t, stateOf(t, d, keys), stateOf(t, crash().Deployment("x"), keys), "a synced commit after the Replicator was removed")
}

// TestApplyReplicatedOutboxFloor: a store that acknowledged a deployment's entries knows
// where its outbox starts (the floor); applying writes that put entries below it (another
// owner's batches, counted from 1 again after a Drop) makes it forget, so that its next
// AckOutbox deletes them too.
func TestApplyReplicatedOutboxFloor(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("x")
	for id := uint64(1); id <= 3; id++ {
		b := d.NewBatch(id)
		b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Payload: []byte(`old`)})
		requireNoError(t, commitErr(b))
	}
	requireNoError(t, d.AckOutbox(OutboxID{BatchID: 3}))
	if s.outboxFloor("x") == nil {
		t.Fatal("no floor after an ack")
	}

	src := openMem(t).Deployment("x")
	rep := &memReplicator{}
	src.SetReplicator(rep)
	for _, id := range []uint64{1, 5} {
		b := src.NewBatch(id)
		b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Payload: []byte(`new`)})
		requireNoError(t, commitErr(b))
	}
	// Without the Drop that would come first in a log; the entry of batch 1 is below the floor.
	applyAll(t, d, rep.writes)
	requireNoError(t, d.AckOutbox(OutboxID{BatchID: 5}))
	requireEqual(t, []OutboxEntry(nil), stateOf(t, d, nil).Outbox, "outbox after acknowledging it all")
	requireEqual(t, [][2]string{{"m", string(appendProgress(nil, Progress{BatchID: 5}))}}, rawScan(t, d))
}
