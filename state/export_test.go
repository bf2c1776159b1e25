package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// collectExport runs ExportAt and returns copies of the reprs it handed over.
func collectExport(t testing.TB, d *Deployment, chunkBytes int, at func(Progress) error) ([][]byte, Progress) {
	t.Helper()
	var reprs [][]byte
	p, err := d.ExportAt(chunkBytes, at, func(repr []byte) error {
		reprs = append(reprs, append([]byte(nil), repr...))
		return nil
	})
	requireNoError(t, err)
	return reprs, p
}

// applyReprs applies reprs to d in order.
func applyReprs(t testing.TB, d *Deployment, reprs [][]byte) {
	t.Helper()
	for i, r := range reprs {
		if err := d.ApplyReplicated(r); err != nil {
			t.Fatalf("repr %d of %d: %v", i, len(reprs), err)
		}
	}
}

// reprOps decodes a batch repr into its operations' kinds and keys.
func reprOps(t testing.TB, repr []byte) (kinds []pebble.InternalKeyKind, keys [][]byte) {
	t.Helper()
	count := binary.LittleEndian.Uint32(repr[8:12])
	r := repr[12:]
	str := func() []byte {
		n, w := binary.Uvarint(r)
		if w <= 0 || n > uint64(len(r)-w) {
			t.Fatalf("malformed repr")
		}
		s := r[w : w+int(n)]
		r = r[w+int(n):]
		return s
	}
	for len(r) > 0 {
		kind := pebble.InternalKeyKind(r[0])
		r = r[1:]
		key := str()
		if kind == pebble.InternalKeyKindSet || kind == pebble.InternalKeyKindRangeDelete {
			str()
		}
		kinds, keys = append(kinds, kind), append(keys, append([]byte(nil), key...))
	}
	requireEqual(t, int(count), len(kinds), "operations in the repr")
	return kinds, keys
}

// fillExportable commits batches of many kinds to d (values, timeouts, outbox entries, an
// acknowledgement, an open batch with skipped timeouts) and returns the keys it used.
func fillExportable(t testing.TB, d *Deployment, rng *rand.Rand, batches int, firstID uint64) []string {
	t.Helper()
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"k%02d"`, i)
	}
	for n := range batches {
		b := d.NewBatch(firstID + uint64(n))
		seen := map[string]Entry{}
		for range 1 + rng.IntN(10) {
			k := keys[rng.IntN(len(keys))]
			prev, ok := seen[k]
			if !ok {
				var err error
				prev, _, err = d.Get([]byte(k))
				requireNoError(t, err)
			}
			var next Entry
			if rng.IntN(6) > 0 {
				next.HasValue, next.Value = true, fmt.Appendf(nil, "v%d-%d", n, rng.IntN(1000))
			}
			if rng.IntN(2) == 0 {
				next.TimeoutMs = int64(rng.IntN(100)) - 20
			}
			b.Set([]byte(k), prev, next)
			seen[k] = next
		}
		for range rng.IntN(3) {
			b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte(keys[rng.IntN(len(keys))]), Payload: fmt.Appendf(nil, `{"n":%d}`, n)})
		}
		b.SetProgress(int64(n), uint64(n))
		requireNoError(t, commitErr(b))
	}
	return keys
}

// TestExportApply: an export taken while another goroutine commits, applied to an empty
// store and to one holding other content of the same deployment, yields exactly the
// source at the exported point (every reader, the hot-state cache included), and the
// Progress ExportAt returns is that point's; the target's other deployments and the
// source's are untouched; applying only some of the reprs leaves no progress record.
func TestExportApply(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	src := openMem(t)
	x, other := src.Deployment("x"), src.Deployment("x-other")
	rep := &memReplicator{}
	x.SetReplicator(rep)
	commit(t, other, 1, map[string]Entry{`"o"`: val("other")})
	keys := fillExportable(t, x, rng, 60, 1)
	requireNoError(t, x.AckOutbox(OutboxID{BatchID: 20}))
	b := x.NewBatch(61) // an open batch: skipped timeouts and its progress
	b.Set([]byte(`"k00"`), mustGet(t, x, `"k00"`), valT("open", 5))
	b.SkipTimeout([]byte(`"k01"`))
	b.SetOpen(OpenBatch{ProcessingTimeMs: 9, NextWatermarkMs: 10, Next: TimerAfter(3, []byte(`"k02"`))})
	requireNoError(t, commitErr(b))

	// A writer that goes on committing, with its own random stream, from the moment the
	// export has fixed its point (its first commit waits for at).
	var commits atomic.Int64
	stop, fixed := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-fixed
		wrng := rand.New(rand.NewPCG(8, 8))
		for id := uint64(62); ; id++ {
			select {
			case <-stop:
				return
			default:
			}
			fillExportable(t, x, wrng, 1, id)
			commits.Add(1)
		}
	}()

	var want depState
	var atCommits int64
	var reprs [][]byte
	p, err := x.ExportAt(512, func(p Progress) error {
		want = stateOf(t, x, keys) // no write of x can start meanwhile
		requireEqual(t, want.Progress, p, "at's Progress")
		atCommits = commits.Load()
		close(fixed)
		return nil
	}, func(repr []byte) error {
		if len(reprs) == 1 {
			// Commits go on while the export is read.
			deadline := time.Now().Add(10 * time.Second)
			for commits.Load() < atCommits+3 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		reprs = append(reprs, append([]byte(nil), repr...))
		return nil
	})
	requireNoError(t, err)
	close(stop)
	wg.Wait()
	if commits.Load() < atCommits+3 {
		t.Fatalf("only %d commits during the export", commits.Load()-atCommits)
	}
	if len(reprs) < 3 {
		t.Fatalf("export in %d reprs, want several", len(reprs))
	}
	requireEqual(t, want.Progress, p, "ExportAt's Progress")
	if !p.Open.Active || p.BatchID != 61 {
		t.Fatalf("exported progress %+v, want batch 61's, open", p)
	}
	if now, _ := x.Progress(); now.BatchID <= p.BatchID {
		t.Fatalf("source at batch %d, not after the export's %d", now.BatchID, p.BatchID)
	}

	// Into an empty store.
	empty := openMem(t).Deployment("x")
	applyReprs(t, empty, reprs)
	requireEqual(t, want, stateOf(t, empty, keys), "applied to an empty store")

	// Into a store holding x already (other keys, a later batch, an outbox, a cache filled
	// by reads) and neighbours.
	dst := openMem(t)
	neighbours := []string{"w", "x0", "xx", "y"}
	for i, n := range neighbours {
		commit(t, dst.Deployment(n), 1, map[string]Entry{`"k00"`: valT(n, int64(i+1))})
	}
	neighbourState := func() []depState {
		var sts []depState
		for _, n := range neighbours {
			sts = append(sts, stateOf(t, dst.Deployment(n), keys))
		}
		return sts
	}
	wantNeighbours := neighbourState()
	x2 := dst.Deployment("x")
	fillExportable(t, x2, rand.New(rand.NewPCG(9, 9)), 80, 1)
	commit(t, x2, 500, map[string]Entry{`"zz"`: val("stale")})
	_ = stateOf(t, x2, append(keys, `"zz"`)) // fills the cache
	applyReprs(t, x2, reprs)
	requireEqual(t, want, stateOf(t, x2, keys), "applied over other content")
	if _, found, _ := x2.Get([]byte(`"zz"`)); found {
		t.Fatal("a key the export does not hold survived")
	}
	requireEqual(t, wantNeighbours, neighbourState(), "the target's other deployments")
	requireEqual(t, map[string]Entry{`"o"`: val("other")}, allKeys(t, other), "the source's other deployment")

	// A prefix of the reprs: no progress record.
	part := openMem(t).Deployment("x")
	commit(t, part, 3, map[string]Entry{`"a"`: val("1")})
	applyReprs(t, part, reprs[:len(reprs)-1])
	if got := stateOf(t, part, keys).Progress; got != (Progress{}) {
		t.Fatalf("progress %+v after a partial apply, want none", got)
	}
}

func mustGet(t testing.TB, d *Deployment, key string) Entry {
	t.Helper()
	e, _, err := d.Get([]byte(key))
	requireNoError(t, err)
	return e
}

// TestExportChunks: every repr is at most 4×chunkBytes long unless it holds a single Set,
// and is cut where its last key says (or where the next entry would pass 4×chunkBytes); an
// entry larger than that goes alone; the first repr begins with the range deletion of the
// keyspace, the last is the progress record, alone unless the keys before it are short;
// the keys come in order, each once.
func TestExportChunks(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("x")
	const chunk = 4096
	b := d.NewBatch(1)
	for i := range 200 {
		b.Set(fmt.Appendf(nil, `"k%03d"`, i), Entry{}, valT(fmt.Sprintf("%0*d", 10+i%90, i), int64(i+1)))
	}
	big := bytes.Repeat([]byte("B"), 5*chunk)
	b.Set([]byte(`"k100big"`), Entry{}, Entry{HasValue: true, Value: big})
	requireNoError(t, commitErr(b))

	reprs, p := collectExport(t, d, chunk, nil)
	requireEqual(t, uint64(1), p.BatchID)
	var all [][]byte
	bigAlone := false
	for i, r := range reprs {
		kinds, keys := reprOps(t, r)
		if len(r) > maxChunkFactor*chunk && len(kinds) != 1 {
			t.Fatalf("repr %d: %d bytes, %d operations", i, len(r), len(kinds))
		}
		if i+2 < len(reprs) {
			// Cut by its last key, once chunk/8 long, or because the next entry does not fit.
			last := keys[len(keys)-1]
			op := opLens(t, r)
			byKey := len(r) >= chunk/minChunkDivisor && keyHash(last[len(d.prefix):])%chunk < uint64(op[len(op)-1])
			if next := opLens(t, reprs[i+1]); !byKey && len(r)+next[0] <= maxChunkFactor*chunk {
				t.Fatalf("repr %d cut at %d bytes, after a key that does not cut, though the next entry fits", i, len(r))
			}
		}
		for j, k := range keys {
			want := pebble.InternalKeyKindSet
			if i == 0 && j == 0 {
				want = pebble.InternalKeyKindRangeDelete
				requireEqual(t, string(d.prefix), string(k), "range deletion start")
			} else {
				all = append(all, k)
			}
			requireEqual(t, want, kinds[j], "repr %d operation %d", i, j)
			if bytes.HasSuffix(k, []byte(`"k100big"`)) {
				bigAlone = len(kinds) == 1
			}
		}
	}
	if !bigAlone {
		t.Fatal("the large entry did not go alone")
	}
	progressKey := sectionKey(nil, d.prefix, sectionProgress)
	requireEqual(t, string(progressKey), string(all[len(all)-1]), "the last Set")
	if last := opLens(t, reprs[len(reprs)-1]); len(last) > 1 && len(reprs[len(reprs)-1])-last[len(last)-1] >= chunk/minChunkDivisor {
		t.Fatalf("the last repr holds %d operations, not the progress record alone", len(last))
	}
	if len(reprs) < 4 {
		t.Fatalf("%d reprs of chunks of %d", len(reprs), chunk)
	}
	want := rawKeys(t, d)
	var got []string
	for _, k := range all {
		got = append(got, string(k[len(d.prefix):]))
	}
	// rawKeys is in key order, where the progress record ("m") comes before "t" and "v".
	var wantReordered []string
	for _, k := range want {
		if k != "m" {
			wantReordered = append(wantReordered, k)
		}
	}
	wantReordered = append(wantReordered, "m")
	requireEqual(t, wantReordered, got, "keys exported")

	// The default chunk size: the keys are too few to go without the progress record.
	reprs, _ = collectExport(t, d, 0, nil)
	requireEqual(t, 1, len(reprs), "reprs with DefaultExportChunk")
}

// opLens returns the lengths of a batch repr's operations (Sets and range deletions), the
// first counting the repr's header.
func opLens(t testing.TB, repr []byte) []int {
	t.Helper()
	var lens []int
	r := repr[12:]
	start := len(r) + 12
	for len(r) > 0 {
		r = r[1:]
		for range 2 {
			n, w := binary.Uvarint(r)
			if w <= 0 || n > uint64(len(r)-w) {
				t.Fatalf("malformed repr")
			}
			r = r[w+int(n):]
		}
		lens = append(lens, start-len(r))
		start = len(r)
	}
	return lens
}

// TestExportChunksStable: in a keyspace of many reprs, changing one key's value, or
// inserting one key, changes only the repr holding it (and at most the next) and the
// progress record's: every other repr of the second export is byte-identical to one of
// the first.
func TestExportChunksStable(t *testing.T) {
	const chunk = 4096
	s := openMem(t)
	d := s.Deployment("x")
	b := d.NewBatch(1)
	for i := range 4000 {
		b.Set(fmt.Appendf(nil, `"user-%05d"`, i*2), Entry{}, valT(fmt.Sprintf(`{"n":%d,"pad":"%0*d"}`, i, i%40, i), int64(i+1)))
	}
	requireNoError(t, commitErr(b))
	before, _ := collectExport(t, d, chunk, nil)
	if len(before) < 50 {
		t.Fatalf("%d reprs: want many", len(before))
	}
	var total int
	for _, r := range before {
		total += len(r)
	}
	t.Logf("%d keys: %d reprs, %d bytes on average", 4000, len(before), total/len(before))

	// changed returns how many reprs of next no repr of prev equals, but the last (the
	// progress record, whose batch differs).
	changed := func(prev, next [][]byte) int {
		have := map[string]bool{}
		for _, r := range prev {
			have[string(r)] = true
		}
		n := 0
		for _, r := range next[:len(next)-1] {
			if !have[string(r)] {
				n++
			}
		}
		return n
	}
	again, _ := collectExport(t, d, chunk, nil)
	if !slices.EqualFunc(before, again, bytes.Equal) {
		t.Fatal("two exports of the same content differ")
	}

	key := []byte(`"user-04000"`)
	b = d.NewBatch(2)
	b.Set(key, mustGet(t, d, string(key)), val(`{"n":"changed"}`))
	requireNoError(t, commitErr(b))
	afterSet, _ := collectExport(t, d, chunk, nil)
	n := changed(before, afterSet)
	t.Logf("one value changed: %d of %d reprs new", n, len(afterSet))
	if n < 1 || n > 2 {
		t.Fatalf("one value changed: %d of %d reprs new", n, len(afterSet))
	}
	if bytes.Equal(before[len(before)-1], afterSet[len(afterSet)-1]) {
		t.Fatal("the progress record's repr did not change")
	}

	b = d.NewBatch(3)
	b.Set([]byte(`"user-03001"`), Entry{}, val(`{"n":"inserted"}`))
	requireNoError(t, commitErr(b))
	afterInsert, _ := collectExport(t, d, chunk, nil)
	n = changed(afterSet, afterInsert)
	t.Logf("one key inserted: %d of %d reprs new", n, len(afterInsert))
	if n < 1 || n > 2 {
		t.Fatalf("one key inserted: %d of %d reprs new", n, len(afterInsert))
	}

	// Applied, the reprs restore the deployment.
	dst := openMem(t).Deployment("x")
	applyReprs(t, dst, afterInsert)
	requireEqual(t, allKeys(t, d), allKeys(t, dst), "restored")
}

// TestExportEmpty: a deployment with nothing exports one repr, the range deletion, which
// empties the target's keyspace (and leaves its neighbours).
func TestExportEmpty(t *testing.T) {
	reprs, p := collectExport(t, openMem(t).Deployment("x"), 0, nil)
	requireEqual(t, Progress{}, p)
	requireEqual(t, 1, len(reprs))
	kinds, _ := reprOps(t, reprs[0])
	requireEqual(t, []pebble.InternalKeyKind{pebble.InternalKeyKindRangeDelete}, kinds)

	dst := openMem(t)
	x, y := dst.Deployment("x"), dst.Deployment("x0")
	commit(t, x, 4, map[string]Entry{`"a"`: valT("1", 3)})
	commit(t, y, 1, map[string]Entry{`"a"`: val("y")})
	wantY := stateOf(t, y, []string{`"a"`})
	applyReprs(t, x, reprs)
	requireEqual(t, depState{Keys: map[string]Entry{}, Gets: map[string]*Entry{`"a"`: nil}}, stateOf(t, x, []string{`"a"`}))
	requireEqual(t, wantY, stateOf(t, y, []string{`"a"`}))
}

// TestExportAtHoldsWrites: while at runs, a write of the deployment (through another
// handle) waits; errors of at and fn stop the export and are returned.
func TestExportAtHoldsWrites(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("x")
	commit(t, d, 1, map[string]Entry{`"a"`: val("1")})
	done := make(chan error, 1)
	_, err := d.ExportAt(0, func(p Progress) error {
		requireEqual(t, uint64(1), p.BatchID)
		go func() {
			b := s.Deployment("x").NewBatch(2)
			b.Set([]byte(`"b"`), Entry{}, val("2"))
			_, err := b.Commit()
			done <- err
		}()
		select {
		case err := <-done:
			return fmt.Errorf("a commit ran during at: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		// Another deployment's writes are not held.
		commit(t, s.Deployment("y"), 1, map[string]Entry{`"a"`: val("y")})
		return nil
	}, func([]byte) error { return nil })
	requireNoError(t, err)
	requireNoError(t, <-done)

	boom := errors.New("boom")
	_, err = d.ExportAt(0, func(Progress) error { return boom }, func([]byte) error {
		t.Fatal("fn called after at failed")
		return nil
	})
	requireErrorIs(t, err, boom)
	_, err = d.Export(0, func([]byte) error { return boom })
	requireErrorIs(t, err, boom)
	commit(t, d, 3, map[string]Entry{`"c"`: val("3")}) // the lock was released

	requireNoError(t, s.Close())
	_, err = d.Export(0, func([]byte) error { return nil })
	requireErrorIs(t, err, ErrClosed)
	_, err = s.Deployment("Bad").Export(0, func([]byte) error { return nil })
	requireErrorIs(t, err, ErrInvalidName)
}
