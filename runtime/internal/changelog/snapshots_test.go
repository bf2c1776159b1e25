package changelog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/state"
)

// fakeRepr returns a Pebble-batch-shaped chunk of about size bytes: Sets of sequential keys
// to hex values (compressible about 2:1, like JSON state), or random bytes when random.
func fakeRepr(rng *rand.Rand, first, size int, random bool) []byte {
	b := make([]byte, 12, size+128)
	n := uint32(0)
	val := make([]byte, 32)
	hv := make([]byte, 64)
	for len(b) < size {
		key := fmt.Appendf(nil, "d\x01xv\"user-%08d\"", first+int(n))
		for i := range val {
			val[i] = byte(rng.Uint32())
		}
		v := hv
		if random {
			v = val
		} else {
			hex.Encode(hv, val)
		}
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(key)))
		b = append(b, key...)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
		n++
	}
	binary.LittleEndian.PutUint32(b[8:], n)
	return b
}

// yieldAll is a Put's chunks function yielding reprs.
func yieldAll(reprs [][]byte) func(func([]byte) error) error {
	return func(yield func([]byte) error) error {
		for _, r := range reprs {
			if err := yield(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// readChunks reads snapshot m back.
func readChunks(t testing.TB, s *Snapshots, ctx context.Context, m SnapshotMeta) [][]byte {
	t.Helper()
	var got [][]byte
	testutil.Require(t, s.Read(ctx, m.Deployment, m.Partition, m, func(r []byte) error {
		got = append(got, append([]byte(nil), r...))
		return nil
	}))
	return got
}

func openSnapshots(t testing.TB, js jetstream.JetStream, ctx context.Context) *Snapshots {
	t.Helper()
	s, err := OpenSnapshots(ctx, js, 0)
	testutil.Require(t, err)
	return s
}

// TestSnapshotsRoundTrip: a multi-MiB snapshot of compressible, incompressible and tiny
// chunks reads back as written, and is what Latest and List return; opening the bucket
// again finds it.
func TestSnapshotsRoundTrip(t *testing.T) {
	e := newEnv(t)
	s := openSnapshots(t, e.js, e.ctx)
	rng := rand.New(rand.NewPCG(1, 2))
	var reprs [][]byte
	for i := range 40 {
		reprs = append(reprs, fakeRepr(rng, i*10_000, 64<<10+rng.IntN(256<<10), i%5 == 0))
	}
	reprs = append(reprs, fakeRepr(rng, 0, 12, false)) // a header only
	var total int64
	for _, r := range reprs {
		total += int64(len(r))
	}
	if total < 4<<20 {
		t.Fatalf("only %d bytes", total)
	}

	_, found, err := s.Latest(e.ctx, "dep", 0)
	testutil.Require(t, err)
	if found {
		t.Fatal("a snapshot in an empty bucket")
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 42, BatchID: 7, Epoch: 3, CreatedAt: created}, yieldAll(reprs))
	testutil.Require(t, err)
	want := SnapshotMeta{Deployment: "dep", Partition: 0, Seq: 42, BatchID: 7, Epoch: 3, CreatedAt: created,
		Chunks: len(reprs), Bytes: total, StoredBytes: m.StoredBytes, ID: m.ID, Format: SnapshotFormat,
		ChunkRefs: m.ChunkRefs, UploadedChunks: len(reprs), UploadedBytes: m.StoredBytes}
	if !reflect.DeepEqual(m, want) || len(m.ChunkRefs) != len(reprs) {
		t.Fatalf("Put returned %+v, want %+v", m, want)
	}
	if m.StoredBytes <= 0 || m.StoredBytes >= total {
		t.Fatalf("stored %d bytes of %d: not compressed", m.StoredBytes, total)
	}
	t.Logf("%d chunks, %d bytes, stored %d", m.Chunks, total, m.StoredBytes)

	s2nd := openSnapshots(t, e.js, e.ctx) // the bucket exists: opened as it is
	latest, found, err := s2nd.Latest(e.ctx, "dep", 0)
	testutil.Require(t, err)
	if !found || !reflect.DeepEqual(latest, m) {
		t.Fatalf("Latest: %+v %v, want %+v", latest, found, m)
	}
	got := readChunks(t, s2nd, e.ctx, latest)
	if !slices.EqualFunc(got, reprs, bytes.Equal) {
		t.Fatalf("read %d chunks back, not the %d written", len(got), len(reprs))
	}

	// A newer snapshot is the latest; List has both, newest first. Its chunks were
	// uploaded already (the second twice in it).
	m2, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 50, Epoch: 3}, yieldAll([][]byte{reprs[0], reprs[1], reprs[1]}))
	testutil.Require(t, err)
	if m2.CreatedAt.IsZero() {
		t.Fatal("no CreatedAt")
	}
	if m2.UploadedChunks != 0 || m2.UploadedBytes != 0 || m2.ReusedChunks != 3 || m2.Chunks != 3 {
		t.Fatalf("the second Put uploaded %d chunks (%d bytes), reused %d of %d", m2.UploadedChunks, m2.UploadedBytes, m2.ReusedChunks, m2.Chunks)
	}
	if got := readChunks(t, s, e.ctx, m2); !slices.EqualFunc(got, [][]byte{reprs[0], reprs[1], reprs[1]}, bytes.Equal) {
		t.Fatal("the second snapshot did not read back as written")
	}
	list, err := s.List(e.ctx, "dep", 0)
	testutil.Require(t, err)
	if len(list) != 2 || !reflect.DeepEqual(list[0], m2) || !reflect.DeepEqual(list[1], m) {
		t.Fatalf("List: %+v", list)
	}

	// fn's error stops the read; a manifest of another partition is refused.
	boom := errors.New("boom")
	if err := s.Read(e.ctx, "dep", 0, m, func([]byte) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Read with a failing fn: %v", err)
	}
	if err := s.Read(e.ctx, "dep", 1, m, func([]byte) error { return nil }); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("Read of another partition's manifest: %v", err)
	}
	if _, err := s.Put(e.ctx, "Dep!", 0, &SnapshotMeta{}, yieldAll(nil)); !errors.Is(err, ErrInvalidSnapshot) {
		t.Fatalf("Put with an invalid name: %v", err)
	}
}

// TestSnapshotsOfExport: a deployment's export, stored and read back, applied to another
// store, restores the deployment.
func TestSnapshotsOfExport(t *testing.T) {
	e := newEnv(t)
	s := openSnapshots(t, e.js, e.ctx)
	src, err := state.Open(t.TempDir(), nil)
	testutil.Require(t, err)
	defer src.Close()
	d := src.Deployment("exp")
	b := d.NewBatch(1)
	for i := range 5000 {
		b.Set(fmt.Appendf(nil, `"k%05d"`, i), state.Entry{}, state.Entry{HasValue: true, Value: fmt.Appendf(nil, `{"n":%d}`, i), TimeoutMs: int64(i + 1)})
	}
	b.AppendOutbox(&state.OutboxEntry{Kind: state.OutboxOutput, Key: []byte(`"k00001"`), Payload: []byte(`{}`)})
	b.SetProgress(10, 20)
	_, err = b.Commit()
	testutil.Require(t, err)

	m, err := s.Put(e.ctx, "exp", 0, &SnapshotMeta{Seq: 9, Epoch: 1}, func(yield func([]byte) error) error {
		p, err := d.Export(16<<10, yield)
		if p.BatchID != 1 {
			return fmt.Errorf("exported batch %d", p.BatchID)
		}
		return err
	})
	testutil.Require(t, err)
	if m.Chunks < 5 {
		t.Fatalf("%d chunks", m.Chunks)
	}

	dst, err := state.Open(t.TempDir(), nil)
	testutil.Require(t, err)
	defer dst.Close()
	d2 := dst.Deployment("exp")
	testutil.Require(t, s.Read(e.ctx, "exp", 0, m, d2.ApplyReplicated))
	p1, err := d.Progress()
	testutil.Require(t, err)
	p2, err := d2.Progress()
	testutil.Require(t, err)
	if p1 != p2 {
		t.Fatalf("progress %+v, want %+v", p2, p1)
	}
	n := 0
	testutil.Require(t, d2.Keys(nil, 0, func(key []byte, e state.Entry) error {
		if want := fmt.Sprintf(`"k%05d"`, n); string(key) != want || e.TimeoutMs != int64(n+1) {
			return fmt.Errorf("key %d: %s %+v", n, key, e)
		}
		n++
		return nil
	}))
	if n != 5000 {
		t.Fatalf("%d keys restored", n)
	}
}

// chunkSubjects returns how many chunk subjects the bucket's stream holds messages on.
func chunkSubjects(t testing.TB, js jetstream.JetStream, ctx context.Context) int {
	t.Helper()
	st, err := js.Stream(ctx, "OBJ_"+SnapshotsBucket)
	testutil.Require(t, err)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$O."+SnapshotsBucket+".C.>"))
	testutil.Require(t, err)
	return len(info.State.Subjects)
}

// metaSubjects returns how many object names the bucket's stream holds infos of, delete
// markers included.
func metaSubjects(t testing.TB, js jetstream.JetStream, ctx context.Context) int {
	t.Helper()
	st, err := js.Stream(ctx, "OBJ_"+SnapshotsBucket)
	testutil.Require(t, err)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("$O."+SnapshotsBucket+".M.>"))
	testutil.Require(t, err)
	return len(info.State.Subjects)
}

// objectNames lists the bucket's objects.
func objectNames(t testing.TB, s *Snapshots, ctx context.Context) []string {
	t.Helper()
	infos, err := s.os.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	testutil.Require(t, err)
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	return names
}

// TestSnapshotsPutAbandoned: a Put whose context is cancelled midway, or whose chunks fail,
// leaves no snapshot (Latest returns the one before) and removes the chunks it uploaded.
func TestSnapshotsPutAbandoned(t *testing.T) {
	e := newEnv(t)
	s := openSnapshots(t, e.js, e.ctx)
	rng := rand.New(rand.NewPCG(3, 4))
	var reprs [][]byte
	for i := range 40 {
		reprs = append(reprs, fakeRepr(rng, i*1000, 256<<10, true))
	}
	good, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 10}, yieldAll(reprs[:3]))
	testutil.Require(t, err)
	names := objectNames(t, s, e.ctx)
	subjects := chunkSubjects(t, e.js, e.ctx)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	n := 0
	_, err = s.Put(ctx, "dep", 0, &SnapshotMeta{Seq: 20}, func(yield func([]byte) error) error {
		for _, r := range reprs {
			if n == 20 {
				cancel() // midway: 5 MiB uploaded
			}
			if err := yield(r); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Put: %v", err)
	}
	if n != 20 {
		t.Fatalf("yield went on after the cancel: %d chunks", n)
	}
	boom := errors.New("boom")
	_, err = s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 30}, func(yield func([]byte) error) error {
		for _, r := range reprs[:10] {
			if err := yield(r); err != nil {
				return err
			}
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("failing Put: %v", err)
	}

	latest, found, err := s.Latest(e.ctx, "dep", 0)
	testutil.Require(t, err)
	if !found || !reflect.DeepEqual(latest, good) {
		t.Fatalf("Latest after abandoned Puts: %+v %v, want %+v", latest, found, good)
	}
	if got := objectNames(t, s, e.ctx); !slices.Equal(got, names) {
		t.Fatalf("objects %v, want %v", got, names)
	}
	eventually(t, 10*time.Second, "the abandoned uploads' chunks purged", func() bool {
		return chunkSubjects(t, e.js, e.ctx) == subjects
	})
	if got := metaSubjects(t, e.js, e.ctx); got != len(names) {
		t.Fatalf("infos of %d objects in the stream, want the %d there are (no delete markers)", got, len(names))
	}
}

// chunkName is the name of the chunk object of repr in deployment dep's partition 0.
func chunkName(repr []byte) string {
	sum := sha256.Sum256(repr)
	return "dep/0/chunks/" + hex.EncodeToString(sum[:])
}

// TestSnapshotsPrune: Prune keeps the newest snapshots and their chunks; it deletes older
// manifests, the chunks only they referenced once chunkGrace old (an orphan chunk too),
// and format-1 data objects without a manifest older than those kept; keep 0 deletes all;
// a pruned snapshot's Read fails with ErrSnapshotNotFound.
func TestSnapshotsPrune(t *testing.T) {
	e := newEnv(t)
	s := openSnapshots(t, e.js, e.ctx)
	rng := rand.New(rand.NewPCG(5, 6))
	common := fakeRepr(rng, 0, 1000, false)
	var ms []SnapshotMeta
	var unique [][]byte
	for i := range 6 {
		unique = append(unique, fakeRepr(rng, 1000*(i+1), 1000, false))
		seq := uint64(100 * (i + 1))
		if i == 5 {
			seq = 500 // the same Seq again: the later is newer
		}
		m, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: seq}, yieldAll([][]byte{common, unique[i]}))
		testutil.Require(t, err)
		if want := min(i, 1); m.ReusedChunks != want || m.UploadedChunks != 2-want {
			t.Fatalf("snapshot %d: uploaded %d chunks, reused %d", i, m.UploadedChunks, m.ReusedChunks)
		}
		ms = append(ms, m)
	}
	// Uploads that died between their data and their manifest: of format 1, an old one and
	// a new one; a chunk.
	for _, seq := range []uint64{150, 900} {
		_, err := s.os.PutBytes(e.ctx, "dep/0/"+newSnapshotID(seq, time.Now())+".snap", []byte(snapshotMagic))
		testutil.Require(t, err)
	}
	orphan := fakeRepr(rng, 9000, 1000, false)
	_, err := s.os.PutBytes(e.ctx, chunkName(orphan), append([]byte{frameRaw}, orphan...))
	testutil.Require(t, err)

	testutil.Require(t, s.Prune(e.ctx, "dep", 0, 2))
	list, err := s.List(e.ctx, "dep", 0)
	testutil.Require(t, err)
	if len(list) != 2 || !reflect.DeepEqual(list[0], ms[5]) || !reflect.DeepEqual(list[1], ms[4]) {
		t.Fatalf("after Prune(2): %+v", list)
	}
	manifests := []string{"dep/0/" + ms[4].ID + ".json", "dep/0/" + ms[5].ID + ".json"}
	got := objectNames(t, s, e.ctx)
	// The chunks are younger than chunkGrace: all kept.
	if len(got) != 3+8 || !slices.Equal(got[:2], manifests) || !strings.HasPrefix(got[2], "dep/0/00000000000000000900-") {
		t.Fatalf("objects after Prune(2): %v", got)
	}

	s.grace = 0 // the chunks are old enough now
	testutil.Require(t, s.Prune(e.ctx, "dep", 0, 2))
	want := []string{chunkName(common), chunkName(unique[4]), chunkName(unique[5])}
	slices.Sort(want)
	got = objectNames(t, s, e.ctx)
	if len(got) != 3+3 || !slices.Equal(got[:2], manifests) || !slices.Equal(got[3:], want) {
		t.Fatalf("objects after Prune(2) of old chunks: %v, want %v, the 900 data object and %v", got, manifests, want)
	}
	if err := s.Read(e.ctx, "dep", 0, ms[0], func([]byte) error { return nil }); !errors.Is(err, ErrSnapshotNotFound) {
		t.Fatalf("Read of a pruned snapshot: %v", err)
	}
	for _, m := range ms[4:] {
		if got := readChunks(t, s, e.ctx, m); len(got) != 2 || !bytes.Equal(got[0], common) {
			t.Fatalf("a kept snapshot read %d chunks", len(got))
		}
	}
	testutil.Require(t, s.Prune(e.ctx, "dep", 0, 2)) // nothing more to do
	if got := len(objectNames(t, s, e.ctx)); got != 6 {
		t.Fatalf("%d objects after a second Prune(2)", got)
	}
	if got := metaSubjects(t, e.js, e.ctx); got != 6 {
		t.Fatalf("infos of %d objects in the stream, want the 6 there are (no delete markers)", got)
	}

	testutil.Require(t, s.Prune(e.ctx, "dep", 0, 0))
	if got := objectNames(t, s, e.ctx); len(got) != 0 {
		t.Fatalf("objects after Prune(0): %v", got)
	}
	if got := metaSubjects(t, e.js, e.ctx); got != 0 {
		t.Fatalf("infos of %d objects in the stream after Prune(0)", got)
	}
	if _, found, err := s.Latest(e.ctx, "dep", 0); err != nil || found {
		t.Fatalf("Latest after Prune(0): %v %v", found, err)
	}
}

// TestSnapshotsIsolated: deployments and partitions whose names are prefixes of each
// other's see only their own snapshots, and Prune of one leaves the others.
func TestSnapshotsIsolated(t *testing.T) {
	e := newEnv(t)
	s := openSnapshots(t, e.js, e.ctx)
	rng := rand.New(rand.NewPCG(7, 8))
	type dp struct {
		d string
		p int
	}
	all := []dp{{"a", 0}, {"a", 1}, {"a", 10}, {"ab", 0}, {"b", 1}}
	mine := map[dp]SnapshotMeta{}
	for i, x := range all {
		m, err := s.Put(e.ctx, x.d, x.p, &SnapshotMeta{Seq: uint64(1000 - i)}, yieldAll([][]byte{fakeRepr(rng, i, 100+i, false)}))
		testutil.Require(t, err)
		mine[x] = m
	}
	for _, x := range all {
		list, err := s.List(e.ctx, x.d, x.p)
		testutil.Require(t, err)
		if len(list) != 1 || !reflect.DeepEqual(list[0], mine[x]) {
			t.Fatalf("%v: %+v", x, list)
		}
		if got := readChunks(t, s, e.ctx, list[0]); len(got) != 1 || len(got[0]) < 100 {
			t.Fatalf("%v: read %d chunks", x, len(got))
		}
	}
	if _, found, err := s.Latest(e.ctx, "a", 2); err != nil || found {
		t.Fatalf("Latest of a partition without snapshots: %v %v", found, err)
	}
	testutil.Require(t, s.Prune(e.ctx, "a", 1, 0))
	for _, x := range all {
		_, found, err := s.Latest(e.ctx, x.d, x.p)
		testutil.Require(t, err)
		if found != (x != dp{"a", 1}) {
			t.Fatalf("%v found %v after pruning a/1", x, found)
		}
	}
}

// TestSnapshots50MB measures the upload and the read of a 50 MB snapshot (1 MiB chunks of
// hex values, compressible about 2:1). Skipped with -short.
func TestSnapshots50MB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := openSnapshots(t, e.js, ctx)
	rng := rand.New(rand.NewPCG(9, 10))
	const chunks = 50
	// Made as they are uploaded, as Export does, so that memory holds one at a time.
	gen := func(yield func([]byte) error) error {
		for i := range chunks {
			if err := yield(fakeRepr(rng, i*12_000, 1<<20, false)); err != nil {
				return err
			}
		}
		return nil
	}
	start := time.Now()
	m, err := s.Put(ctx, "big", 0, &SnapshotMeta{Seq: 1}, gen)
	testutil.Require(t, err)
	put := time.Since(start)
	start = time.Now()
	var n int64
	testutil.Require(t, s.Read(ctx, "big", 0, m, func(r []byte) error { n += int64(len(r)); return nil }))
	read := time.Since(start)
	mb := float64(m.Bytes) / 1e6
	t.Logf("50 MB snapshot: %.1f MB in %d chunks, stored %.1f MB; Put %v (%.0f MB/s), Read %v (%.0f MB/s)",
		mb, m.Chunks, float64(m.StoredBytes)/1e6, put.Round(time.Millisecond), mb/put.Seconds(), read.Round(time.Millisecond), mb/read.Seconds())
	if n != m.Bytes {
		t.Fatalf("read %d bytes of %d", n, m.Bytes)
	}
}

// restoreInto reads snapshot m into a fresh store's deployment name and returns its keys
// and entries.
func restoreInto(t *testing.T, s *Snapshots, ctx context.Context, m SnapshotMeta, name string) map[string]state.Entry {
	t.Helper()
	dst, err := state.Open(t.TempDir(), nil)
	testutil.Require(t, err)
	defer dst.Close()
	d := dst.Deployment(name)
	testutil.Require(t, s.Read(ctx, m.Deployment, m.Partition, m, d.ApplyReplicated))
	return keysOf(t, d)
}

// keysOf returns d's keys and entries, copied (what Keys hands over is valid only during
// the callback, and restoreInto closes the store it read).
func keysOf(t *testing.T, d *state.Deployment) map[string]state.Entry {
	t.Helper()
	out := map[string]state.Entry{}
	testutil.Require(t, d.Keys(nil, 0, func(key []byte, e state.Entry) error {
		e.Value = bytes.Clone(e.Value)
		out[string(key)] = e
		return nil
	}))
	return out
}

// TestSnapshotsIncremental: a second snapshot of a deployment's export after one key
// changed uploads only the few chunks that changed (the one holding the key, the progress
// record) and reuses the others; each snapshot reads back to its source's state.
func TestSnapshotsIncremental(t *testing.T) {
	e := newEnv(t)
	s := openSnapshots(t, e.js, e.ctx)
	src, err := state.Open(t.TempDir(), nil)
	testutil.Require(t, err)
	defer src.Close()
	d := src.Deployment("inc")
	b := d.NewBatch(1)
	for i := range 20_000 {
		b.Set(fmt.Appendf(nil, `"user-%06d"`, i), state.Entry{}, state.Entry{HasValue: true, Value: fmt.Appendf(nil, `{"n":%d,"name":"user %d"}`, i, i)})
	}
	b.SetProgress(1, 1)
	_, err = b.Commit()
	testutil.Require(t, err)
	put := func(seq uint64) SnapshotMeta {
		t.Helper()
		m, err := s.Put(e.ctx, "inc", 0, &SnapshotMeta{Seq: seq, Epoch: 1}, func(yield func([]byte) error) error {
			_, err := d.Export(16<<10, yield)
			return err
		})
		testutil.Require(t, err)
		return m
	}
	first := put(10)
	if first.Chunks < 20 || first.UploadedChunks != first.Chunks || first.ReusedChunks != 0 || first.UploadedBytes != first.StoredBytes {
		t.Fatalf("first snapshot: %d chunks, uploaded %d (%d bytes of %d), reused %d", first.Chunks, first.UploadedChunks, first.UploadedBytes, first.StoredBytes, first.ReusedChunks)
	}
	want1 := keysOf(t, d)

	key := []byte(`"user-010000"`)
	prev, _, err := d.Get(key)
	testutil.Require(t, err)
	b = d.NewBatch(2)
	b.Set(key, prev, state.Entry{HasValue: true, Value: []byte(`{"changed":true}`)})
	b.SetProgress(2, 2)
	_, err = b.Commit()
	testutil.Require(t, err)
	second := put(20)
	t.Logf("%d chunks, %d bytes stored: the second snapshot uploaded %d chunks (%d bytes), reused %d",
		second.Chunks, second.StoredBytes, second.UploadedChunks, second.UploadedBytes, second.ReusedChunks)
	if second.UploadedChunks < 1 || second.UploadedChunks > 3 || second.ReusedChunks != second.Chunks-second.UploadedChunks {
		t.Fatalf("second snapshot: %d chunks, uploaded %d, reused %d", second.Chunks, second.UploadedChunks, second.ReusedChunks)
	}
	if second.UploadedBytes*5 > second.StoredBytes {
		t.Fatalf("second snapshot uploaded %d bytes of %d", second.UploadedBytes, second.StoredBytes)
	}

	if got := restoreInto(t, s, e.ctx, second, "inc"); !reflect.DeepEqual(got, keysOf(t, d)) {
		t.Fatal("the second snapshot does not restore the source")
	}
	if got := restoreInto(t, s, e.ctx, first, "inc"); !reflect.DeepEqual(got, want1) {
		t.Fatal("the first snapshot does not restore the source as it was")
	}

	// Pruned to the second, the first's own chunks go (once old enough); the second reads.
	s.grace = 0
	testutil.Require(t, s.Prune(e.ctx, "inc", 0, 1))
	n := 0
	for _, name := range objectNames(t, s, e.ctx) {
		if strings.HasPrefix(name, "inc/0/chunks/") {
			n++
		}
	}
	if n != second.Chunks {
		t.Fatalf("%d chunk objects after pruning to the second snapshot of %d chunks", n, second.Chunks)
	}
	if got := restoreInto(t, s, e.ctx, second, "inc"); !reflect.DeepEqual(got, keysOf(t, d)) {
		t.Fatal("the second snapshot does not restore the source after the prune")
	}
}

// TestSnapshotsBadChunk: a chunk whose object does not hold what its name says, or was
// deleted, fails the Read with ErrCorruptSnapshot or ErrSnapshotNotFound; so does a
// manifest whose chunks do not add up.
func TestSnapshotsBadChunk(t *testing.T) {
	e := newEnv(t)
	s := openSnapshots(t, e.js, e.ctx)
	rng := rand.New(rand.NewPCG(11, 12))
	reprs := [][]byte{fakeRepr(rng, 0, 4000, false), fakeRepr(rng, 1000, 4000, true), fakeRepr(rng, 2000, 4000, false)}
	m, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 1}, yieldAll(reprs))
	testutil.Require(t, err)
	readErr := func(m SnapshotMeta) error {
		return s.Read(e.ctx, "dep", 0, m, func([]byte) error { return nil })
	}

	bad := m
	bad.Bytes++
	if err := readErr(bad); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("Read of a manifest whose chunks do not add up: %v", err)
	}
	bad = m
	bad.Format = 3
	if err := readErr(bad); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("Read of an unknown format: %v", err)
	}

	// The second chunk's object replaced by another chunk of the same length.
	other := append([]byte(nil), reprs[1]...)
	other[len(other)-1] ^= 1
	_, err = s.os.PutBytes(e.ctx, chunkName(reprs[1]), append([]byte{frameRaw}, other...))
	testutil.Require(t, err)
	var got int
	err = s.Read(e.ctx, "dep", 0, m, func([]byte) error { got++; return nil })
	if !errors.Is(err, ErrCorruptSnapshot) || got != 1 {
		t.Fatalf("Read of a chunk of other content: %v after %d chunks", err, got)
	}

	// The corrupt chunk was deleted: the next snapshot holding its content uploads it again
	// rather than reusing it, and the one read meanwhile says it is gone.
	if _, err := s.os.GetInfo(e.ctx, chunkName(reprs[1])); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("the corrupt chunk object after the read: %v; want it deleted", err)
	}
	if err := readErr(m); !errors.Is(err, ErrSnapshotNotFound) {
		t.Fatalf("Read again after the corrupt chunk was deleted: %v", err)
	}
	mr, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 2}, yieldAll(reprs))
	testutil.Require(t, err)
	if mr.UploadedChunks != 1 || mr.ReusedChunks != 2 {
		t.Fatalf("a snapshot after the corrupt chunk went: uploaded %d, reused %d; want 1 and 2", mr.UploadedChunks, mr.ReusedChunks)
	}
	testutil.Require(t, readErr(mr))

	testutil.Require(t, s.os.Delete(e.ctx, chunkName(reprs[2])))
	// A new Put uploads the chunks the bucket lacks or lost again, and repairs nothing else.
	m2, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 2}, yieldAll(reprs[:1]))
	testutil.Require(t, err)
	if m2.UploadedChunks != 0 {
		t.Fatalf("uploaded %d chunks the bucket has", m2.UploadedChunks)
	}
	m3, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 3}, yieldAll([][]byte{reprs[0], reprs[2]}))
	testutil.Require(t, err)
	if m3.UploadedChunks != 1 || m3.ReusedChunks != 1 {
		t.Fatalf("a deleted chunk: uploaded %d, reused %d", m3.UploadedChunks, m3.ReusedChunks)
	}
	testutil.Require(t, s.os.Delete(e.ctx, chunkName(reprs[2])))
	if err := readErr(m3); !errors.Is(err, ErrSnapshotNotFound) {
		t.Fatalf("Read with a missing chunk: %v", err)
	}
}

// putFormat1 writes a snapshot of the format before chunk objects: one data object of
// frames after snapshotMagic, then a manifest without Format.
func putFormat1(t *testing.T, s *Snapshots, ctx context.Context, m SnapshotMeta, reprs [][]byte) SnapshotMeta {
	t.Helper()
	data := []byte(snapshotMagic)
	for _, r := range reprs {
		enc, codec := encodeData(r)
		c := frameRaw
		if codec == codecS2 {
			c = frameS2
		}
		data = append(binary.AppendUvarint(append(data, c), uint64(len(enc))), enc...)
		m.Chunks++
		m.Bytes += int64(len(r))
	}
	m.ID = newSnapshotID(m.Seq, m.CreatedAt)
	m.StoredBytes = int64(len(data))
	dir := fmt.Sprintf("%s/%d/", m.Deployment, m.Partition)
	_, err := s.os.PutBytes(ctx, dir+m.ID+".snap", data)
	testutil.Require(t, err)
	body := fmt.Appendf(nil, `{"deployment":%q,"partition":%d,"seq":%d,"batch_id":%d,"epoch":%d,"created_at":%q,"chunks":%d,"bytes":%d,"stored_bytes":%d,"id":%q}`,
		m.Deployment, m.Partition, m.Seq, m.BatchID, m.Epoch, m.CreatedAt.Format(time.RFC3339Nano), m.Chunks, m.Bytes, m.StoredBytes, m.ID)
	_, err = s.os.PutBytes(ctx, dir+m.ID+".json", body)
	testutil.Require(t, err)
	return m
}

// TestSnapshotsFormat1: a snapshot written before chunk objects is listed and read as
// before; a newer snapshot of format 2 is the latest; Prune drops the old one's data
// object with its manifest.
func TestSnapshotsFormat1(t *testing.T) {
	e := newEnv(t)
	s := openSnapshots(t, e.js, e.ctx)
	rng := rand.New(rand.NewPCG(13, 14))
	reprs := [][]byte{fakeRepr(rng, 0, 64<<10, false), fakeRepr(rng, 5000, 10<<10, true), fakeRepr(rng, 9000, 12, false)}
	old := putFormat1(t, s, e.ctx, SnapshotMeta{Deployment: "dep", Seq: 5, BatchID: 2, Epoch: 1, CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, reprs)
	list, err := s.List(e.ctx, "dep", 0)
	testutil.Require(t, err)
	if len(list) != 1 || !reflect.DeepEqual(list[0], old) || list[0].Format != 0 {
		t.Fatalf("List: %+v, want %+v", list, old)
	}
	if got := readChunks(t, s, e.ctx, list[0]); !slices.EqualFunc(got, reprs, bytes.Equal) {
		t.Fatal("the format-1 snapshot did not read back as written")
	}
	bad := old
	bad.Chunks++
	if err := s.Read(e.ctx, "dep", 0, bad, func([]byte) error { return nil }); !errors.Is(err, ErrCorruptSnapshot) {
		t.Fatalf("Read of format 1 with a wrong count: %v", err)
	}

	m, err := s.Put(e.ctx, "dep", 0, &SnapshotMeta{Seq: 9}, yieldAll(reprs))
	testutil.Require(t, err)
	latest, found, err := s.Latest(e.ctx, "dep", 0)
	testutil.Require(t, err)
	if !found || !reflect.DeepEqual(latest, m) || m.UploadedChunks != len(reprs) {
		t.Fatalf("Latest: %+v, want %+v", latest, m)
	}
	testutil.Require(t, s.Prune(e.ctx, "dep", 0, 1))
	for _, name := range objectNames(t, s, e.ctx) {
		if strings.Contains(name, old.ID) {
			t.Fatalf("%s left after pruning its snapshot", name)
		}
	}
	if err := s.Read(e.ctx, "dep", 0, old, func([]byte) error { return nil }); !errors.Is(err, ErrSnapshotNotFound) {
		t.Fatalf("Read of a pruned format-1 snapshot: %v", err)
	}
}
