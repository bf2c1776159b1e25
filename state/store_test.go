package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// forEachFS runs f against an in-memory store and a store on disk.
func forEachFS(t *testing.T, f func(t *testing.T, s *Store)) {
	t.Run("mem", func(t *testing.T) { f(t, openMem(t)) })
	t.Run("disk", func(t *testing.T) {
		s := openDisk(t, t.TempDir())
		t.Cleanup(func() { _ = s.Close() })
		f(t, s)
	})
}

func TestGetRoundTrip(t *testing.T) {
	forEachFS(t, func(t *testing.T, s *Store) {
		d := s.Deployment("rt")
		entries := map[string]Entry{
			`"u1"`:  val(`{"login_count":1}`),
			`"u2"`:  valT(`{"login_count":2}`, 5000),
			`3`:     {TimeoutMs: 7000}, // timeout without state
			`"e"`:   {Value: []byte{}, HasValue: true},
			"\x00k": val("binary key"),
			"":      val("empty key"),
		}
		commit(t, d, 1, entries)
		for k, want := range entries {
			got, found, err := d.Get([]byte(k))
			requireNoError(t, err)
			requireEqual(t, true, found, "key %q", k)
			requireEqual(t, want, got, "key %q", k)
		}
		_, found, err := d.Get([]byte(`"missing"`))
		requireNoError(t, err)
		requireEqual(t, false, found)

		// The returned value is a copy owned by the caller.
		got, _, _ := d.Get([]byte(`"u1"`))
		got.Value[0] = 'X'
		again, _, _ := d.Get([]byte(`"u1"`))
		requireEqual(t, `{"login_count":1}`, string(again.Value))

		requireEqual(t, entries, allKeys(t, d))
	})
}

func TestKeysPaging(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("page")
	sets := map[string]Entry{}
	for i := 0; i < 10; i++ {
		sets[fmt.Sprintf("k%02d", i)] = val(fmt.Sprint(i))
	}
	sets["t-only"] = Entry{TimeoutMs: 1}
	commit(t, d, 1, sets)

	page := func(after []byte, limit int) []string {
		var got []string
		requireNoError(t, d.Keys(after, limit, func(key []byte, e Entry) error {
			got = append(got, string(key))
			return nil
		}))
		return got
	}
	tests := []struct {
		name  string
		after []byte
		limit int
		want  []string
	}{
		{"first page", nil, 3, []string{"k00", "k01", "k02"}},
		{"after k02", []byte("k02"), 3, []string{"k03", "k04", "k05"}},
		{"after non-key", []byte("k055"), 2, []string{"k06", "k07"}},
		{"rest", []byte("k07"), 0, []string{"k08", "k09", "t-only"}},
		{"past end", []byte("z"), 0, nil},
		{"empty after", []byte{}, 1, []string{"k00"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireEqual(t, tc.want, page(tc.after, tc.limit))
		})
	}

	stop := errors.New("stop")
	n := 0
	err := d.Keys(nil, 0, func([]byte, Entry) error { n++; return stop })
	requireErrorIs(t, err, stop)
	requireEqual(t, 1, n)
}

func TestExpiredOrder(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("exp")
	commit(t, d, 1, map[string]Entry{
		"b":   valT("", 100),
		"a":   valT("", 100),
		"c":   {TimeoutMs: 50},
		"neg": {TimeoutMs: -10},
		"d":   valT("", 101),
		"max": {TimeoutMs: math.MaxInt64},
		"no":  val("no timeout"),
	})
	tests := []struct {
		before int64
		want   []timer
	}{
		{math.MinInt64, nil},
		{-10, nil}, // strict <
		{-9, []timer{{"neg", -10}}},
		{50, []timer{{"neg", -10}}},
		{100, []timer{{"neg", -10}, {"c", 50}}},
		{101, []timer{{"neg", -10}, {"c", 50}, {"a", 100}, {"b", 100}}}, // ties by key
		{math.MaxInt64, []timer{{"neg", -10}, {"c", 50}, {"a", 100}, {"b", 100}, {"d", 101}}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.before), func(t *testing.T) {
			requireEqual(t, tc.want, expired(t, d, tc.before))
		})
	}

	last, ok, err := d.LastTimeout()
	requireNoError(t, err)
	requireEqual(t, true, ok)
	requireEqual(t, int64(math.MaxInt64), last)
	_, ok, err = s.Deployment("none").LastTimeout()
	requireNoError(t, err)
	requireEqual(t, false, ok, "LastTimeout of a deployment without timeouts")

	stop := errors.New("stop")
	var n int
	err = d.Expired(math.MaxInt64, func([]byte, int64) error { n++; return stop })
	requireErrorIs(t, err, stop)
	requireEqual(t, 1, n)
}

// TestTimerMoves checks that set, move and clear of timeouts (with and
// without values) leave exactly one timer key per key with a timeout, and
// that the Keys/TimerKeys counters follow.
func TestTimerMoves(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("moves")
	k := []byte("k")
	type step struct {
		name      string
		next      Entry
		wantRaw   []string // keys under the deployment prefix, except 'm'
		keys      int64
		timerKeys int64
	}
	tk := func(ts int64) string { return string(timerKey(nil, nil, ts, k)) }
	vk := string(valueKey(nil, nil, k))
	steps := []step{
		{"set timeout only", Entry{TimeoutMs: 10}, []string{tk(10), vk}, 0, 1},
		{"add value", valT("v", 10), []string{tk(10), vk}, 1, 1},
		{"move timeout", valT("v", 20), []string{tk(20), vk}, 1, 1},
		{"move backwards", valT("v", -5), []string{tk(-5), vk}, 1, 1},
		{"clear timeout", val("v"), []string{vk}, 1, 0},
		{"set again", valT("v2", 30), []string{tk(30), vk}, 1, 1},
		{"remove value keep timeout", Entry{TimeoutMs: 30}, []string{tk(30), vk}, 0, 1},
		{"delete", Entry{}, nil, 0, 0},
		{"revive", val("r"), []string{vk}, 1, 0},
	}
	prev := Entry{}
	for i, st := range steps {
		b := d.NewBatch(uint64(i + 1))
		b.Set(k, prev, st.next)
		requireNoError(t, commitErr(b))
		prev = st.next

		var raw []string
		for _, key := range rawKeys(t, d) {
			if key[0] != sectionProgress {
				raw = append(raw, key)
			}
		}
		requireEqual(t, st.wantRaw, raw, "step %q raw keys", st.name)
		p, err := d.Progress()
		requireNoError(t, err)
		requireEqual(t, st.keys, p.Keys, "step %q Keys", st.name)
		requireEqual(t, st.timerKeys, p.TimerKeys, "step %q TimerKeys", st.name)
		got, found, err := d.Get(k)
		requireNoError(t, err)
		requireEqual(t, st.next.exists(), found, "step %q found", st.name)
		if found {
			requireEqual(t, st.next, got, "step %q entry", st.name)
		}
	}
}

// TestSameKeyTwiceInBatch: a second Set of a key passes the first Set's
// next as prev, and only the last state remains.
func TestSameKeyTwiceInBatch(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("twice")
	k := []byte("k")
	b := d.NewBatch(1)
	b.Set(k, Entry{}, valT("a", 10))
	b.Set(k, valT("a", 10), valT("b", 20))
	requireNoError(t, commitErr(b))
	requireEqual(t, []timer{{"k", 20}}, expired(t, d, math.MaxInt64))
	p, _ := d.Progress()
	requireEqual(t, Progress{BatchID: 1, Keys: 1, TimerKeys: 1}, p)
}

func TestCounters(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("count")
	sets := map[string]Entry{}
	for i := 0; i < 100; i++ {
		e := val("x")
		if i%4 == 0 {
			e.TimeoutMs = int64(i + 1)
		}
		if i%10 == 0 {
			e = Entry{TimeoutMs: 1000}
		}
		sets[fmt.Sprint(i)] = e
	}
	commit(t, d, 1, sets)
	p, _ := d.Progress()
	// 10 keys are timeout-only; of the 90 others, those with i%4 == 0 and
	// i%10 != 0 have a timeout too (25 - 5 = 20).
	requireEqual(t, int64(90), p.Keys)
	requireEqual(t, int64(10+20), p.TimerKeys)

	// Remove everything.
	dels := map[string]Entry{}
	for k := range sets {
		dels[k] = Entry{}
	}
	commit(t, d, 2, dels)
	p, _ = d.Progress()
	requireEqual(t, Progress{BatchID: 2}, p)
	requireEqual(t, []string{string(sectionProgress)}, rawKeys(t, d))
}

func TestDeploymentIsolation(t *testing.T) {
	s := openMem(t)
	a, ab, b := s.Deployment("a"), s.Deployment("ab"), s.Deployment("b")
	commit(t, a, 1, map[string]Entry{"k": valT("from a", 5), "b": val("x")})
	commit(t, ab, 1, map[string]Entry{"k": valT("from ab", 6)})
	commit(t, b, 7, map[string]Entry{"z": val("from b")})
	ob := ab.NewBatch(2)
	ob.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Payload: []byte("ab out")})
	requireNoError(t, commitErr(ob))

	requireEqual(t, map[string]Entry{"k": valT("from a", 5), "b": val("x")}, allKeys(t, a))
	requireEqual(t, map[string]Entry{"k": valT("from ab", 6)}, allKeys(t, ab))
	requireEqual(t, []timer{{"k", 5}}, expired(t, a, 100))
	requireEqual(t, []timer{{"k", 6}}, expired(t, ab, 100))
	var n int
	requireNoError(t, a.Outbox(func(OutboxEntry) error { n++; return nil }))
	requireEqual(t, 0, n)
	pa, _ := a.Progress()
	pab, _ := ab.Progress()
	requireEqual(t, Progress{BatchID: 1, Keys: 2, TimerKeys: 1}, pa)
	requireEqual(t, Progress{BatchID: 2, Keys: 1, TimerKeys: 1}, pab)

	names, err := s.Deployments()
	requireNoError(t, err)
	requireEqual(t, []string{"a", "ab", "b"}, names)

	// Drop removes one deployment only.
	requireNoError(t, a.Drop())
	requireEqual(t, map[string]Entry{}, allKeys(t, a))
	p, _ := a.Progress()
	requireEqual(t, Progress{}, p)
	requireEqual(t, map[string]Entry{"k": valT("from ab", 6)}, allKeys(t, ab))
	names, err = s.Deployments()
	requireNoError(t, err)
	requireEqual(t, []string{"ab", "b"}, names)
	// A dropped deployment starts over at batch 1.
	commit(t, a, 1, map[string]Entry{"new": val("n")})
	requireEqual(t, map[string]Entry{"new": val("n")}, allKeys(t, a))
}

func TestInvalidName(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("Bad_Name")
	_, _, err := d.Get([]byte("k"))
	requireErrorIs(t, err, ErrInvalidName)
	requireErrorIs(t, commitErr(d.NewBatch(1)), ErrInvalidName)
	requireErrorIs(t, d.Drop(), ErrInvalidName)
}

func TestProgressPersists(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	d := s.Deployment("persist")
	p, err := d.Progress()
	requireNoError(t, err)
	requireEqual(t, Progress{}, p)

	b := d.NewBatch(1)
	b.Set([]byte("k1"), Entry{}, valT("v1", 100))
	b.Set([]byte("k2"), Entry{}, val("v2"))
	b.SetProgress(42, 1001)
	b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte("k1"), Payload: []byte("out")})
	requireNoError(t, commitErr(b))
	// A batch without SetProgress carries watermark and position over.
	b = d.NewBatch(2)
	b.Set([]byte("k3"), Entry{}, Entry{TimeoutMs: 5})
	requireNoError(t, commitErr(b))
	requireNoError(t, s.Close())

	s = openDisk(t, dir)
	defer s.Close()
	d = s.Deployment("persist")
	p, err = d.Progress()
	requireNoError(t, err)
	requireEqual(t, Progress{BatchID: 2, WatermarkMs: 42, Position: 1001, Keys: 2, TimerKeys: 2}, p)
	requireEqual(t, map[string]Entry{"k1": valT("v1", 100), "k2": val("v2"), "k3": {TimeoutMs: 5}}, allKeys(t, d))
	requireEqual(t, []timer{{"k3", 5}, {"k1", 100}}, expired(t, d, math.MaxInt64))
	var out []OutboxID
	requireNoError(t, d.Outbox(func(e OutboxEntry) error { out = append(out, e.ID); return nil }))
	requireEqual(t, []OutboxID{{1, 0}}, out)
}

// TestCommitReturnsProgress: Commit returns the Progress it wrote, which Deployment.Progress
// reads afterwards, here and after a reopen.
func TestCommitReturnsProgress(t *testing.T) {
	type set struct {
		key        string
		prev, next Entry
	}
	tests := []struct {
		name     string
		sets     []set
		progress *[2]uint64 // SetProgress(watermark, position)
		outbox   int
		want     Progress
	}{
		{"first batch", []set{{"a", Entry{}, valT("1", 10)}, {"b", Entry{}, val("2")}}, &[2]uint64{5, 100}, 1,
			Progress{BatchID: 1, WatermarkMs: 5, Position: 100, Keys: 2, TimerKeys: 1}},
		{"carries watermark and position over", []set{{"c", Entry{}, Entry{TimeoutMs: 3}}}, nil, 0,
			Progress{BatchID: 2, WatermarkMs: 5, Position: 100, Keys: 2, TimerKeys: 2}},
		{"deletes", []set{{"a", valT("1", 10), Entry{}}, {"c", Entry{TimeoutMs: 3}, Entry{}}}, &[2]uint64{1<<63 + 7, 101}, 2,
			Progress{BatchID: 3, WatermarkMs: math.MinInt64 + 7, Position: 101, Keys: 1, TimerKeys: 0}},
		{"outbox only", nil, nil, 3, Progress{BatchID: 4, WatermarkMs: math.MinInt64 + 7, Position: 101, Keys: 1}},
		// Inconsistent prev entries drive the counters negative: Commit clamps them to 0
		// and returns the clamped record.
		{"clamped counters", []set{{"x", valT("?", 1), Entry{}}, {"y", valT("?", 2), Entry{}}}, nil, 0,
			Progress{BatchID: 5, WatermarkMs: math.MinInt64 + 7, Position: 101}},
		{"after clamping", []set{{"z", Entry{}, valT("z", 4)}}, &[2]uint64{0, 0}, 0, Progress{BatchID: 6, Keys: 1, TimerKeys: 1}},
	}
	dir := t.TempDir()
	s := openDisk(t, dir)
	d := s.Deployment("ret")
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := d.NewBatch(uint64(i + 1))
			for _, st := range tc.sets {
				b.Set([]byte(st.key), st.prev, st.next)
			}
			if tc.progress != nil {
				b.SetProgress(int64(tc.progress[0]), tc.progress[1])
			}
			for j := 0; j < tc.outbox; j++ {
				b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Payload: []byte("o")})
			}
			p, err := b.Commit()
			requireNoError(t, err)
			requireEqual(t, tc.want, p)
			read, err := d.Progress()
			requireNoError(t, err)
			requireEqual(t, p, read)
		})
	}
	requireNoError(t, s.Close())
	s = openDisk(t, dir)
	defer s.Close()
	p, err := s.Deployment("ret").Progress()
	requireNoError(t, err)
	requireEqual(t, tests[len(tests)-1].want, p)
}

func TestBatchOrder(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("order")
	requireErrorIs(t, commitErr(d.NewBatch(0)), ErrBatchOrder)
	commit(t, d, 5, nil)
	requireErrorIs(t, commitErr(d.NewBatch(5)), ErrBatchOrder)
	requireErrorIs(t, commitErr(d.NewBatch(4)), ErrBatchOrder)
	b := d.NewBatch(6)
	requireNoError(t, commitErr(b))
	requireErrorIs(t, commitErr(b), ErrBatchDone)
	b.Close() // safe after Commit
	p, _ := d.Progress()
	requireEqual(t, uint64(6), p.BatchID)
}

func TestOutboxOrderAndAck(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("outbox")
	var want []OutboxEntry
	for batch := uint64(1); batch <= 3; batch++ {
		b := d.NewBatch(batch)
		for i := 0; i < 4; i++ {
			e := OutboxEntry{
				ID:      OutboxID{99, 99}, // ignored
				Kind:    OutboxOutput,
				Key:     []byte(fmt.Sprintf(`"k%d"`, i)),
				Payload: []byte(fmt.Sprintf(`{"b":%d,"i":%d}`, batch, i)),
			}
			if i == 3 {
				e.Kind, e.Reason, e.Error, e.Subject, e.Sequence = OutboxDeadLetter, "handler_error", "trap", "in.x", batch
			}
			id := b.AppendOutbox(&e)
			requireEqual(t, OutboxID{batch, uint32(i)}, id)
			e.ID = id
			want = append(want, e)
		}
		requireNoError(t, commitErr(b))
	}
	pending := func() []OutboxEntry {
		var got []OutboxEntry
		requireNoError(t, d.Outbox(func(e OutboxEntry) error { got = append(got, e); return nil }))
		return got
	}
	requireEqual(t, want, pending())

	tests := []struct {
		upTo OutboxID
		rest int // index into want of the first pending entry
	}{
		{OutboxID{0, 5}, 0},
		{OutboxID{1, 1}, 2},
		{OutboxID{1, 1}, 2}, // repeated ack is a no-op
		{OutboxID{1, 0}, 2}, // older ack is a no-op
		{OutboxID{1, math.MaxUint32}, 4},
		{OutboxID{2, 2}, 7},
		{OutboxID{math.MaxUint64, math.MaxUint32}, 12},
	}
	for _, tc := range tests {
		requireNoError(t, d.AckOutbox(tc.upTo))
		var w []OutboxEntry
		if tc.rest < len(want) {
			w = want[tc.rest:]
		}
		requireEqual(t, w, pending(), "after ack %v", tc.upTo)
	}
	// Progress and state are untouched by acks.
	p, _ := d.Progress()
	requireEqual(t, uint64(3), p.BatchID)
}

// TestOutboxAckAfterDrop shows that acknowledgements still delete everything they cover after
// a Drop, when batch ids start again at 1 below where earlier acks ended, and through a second
// handle of the same deployment.
func TestOutboxAckAfterDrop(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("outbox")
	commit := func(batches int) {
		for batch := uint64(1); batch <= uint64(batches); batch++ {
			b := d.NewBatch(batch)
			b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte(`"k"`), Payload: []byte(`{}`)})
			b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte(`"k"`), Payload: []byte(`{}`)})
			requireNoError(t, commitErr(b))
		}
	}
	pending := func() int {
		n := 0
		requireNoError(t, s.Deployment("outbox").Outbox(func(OutboxEntry) error { n++; return nil }))
		return n
	}
	commit(5)
	requireNoError(t, d.AckOutbox(OutboxID{2, math.MaxUint32}))
	requireEqual(t, 6, pending())
	requireNoError(t, d.Drop())
	commit(5)
	requireEqual(t, 10, pending())
	requireNoError(t, s.Deployment("outbox").AckOutbox(OutboxID{5, 0}))
	requireEqual(t, 1, pending(), "after ack 5.0 through another handle")
	requireNoError(t, d.AckOutbox(OutboxID{5, 1}))
	requireEqual(t, 0, pending())
}

func TestFormatVersion(t *testing.T) {
	t.Run("newer version refused", func(t *testing.T) {
		fs := vfs.NewMem()
		s, err := Open("db", &Options{FS: fs, Logger: quietLogger()})
		requireNoError(t, err)
		var buf [4]byte
		binary.BigEndian.PutUint32(buf[:], FormatVersion+1)
		requireNoError(t, s.db.Set(formatKey, buf[:], pebble.Sync))
		requireNoError(t, s.Close())
		_, err = Open("db", &Options{FS: fs, Logger: quietLogger()})
		requireErrorIs(t, err, ErrFormatVersion)
		_, err = Open("db", &Options{FS: fs, Logger: quietLogger(), ReadOnly: true})
		requireErrorIs(t, err, ErrFormatVersion)
	})
	t.Run("foreign pebble db refused", func(t *testing.T) {
		fs := vfs.NewMem()
		db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: pebbleLogger{quietLogger()}})
		requireNoError(t, err)
		requireNoError(t, db.Set([]byte("foreign"), []byte("x"), pebble.Sync))
		requireNoError(t, db.Close())
		_, err = Open("db", &Options{FS: fs, Logger: quietLogger()})
		requireErrorIs(t, err, ErrFormatVersion)
	})
	t.Run("current version reopens", func(t *testing.T) {
		fs := vfs.NewMem()
		for i := 0; i < 2; i++ {
			s, err := Open("db", &Options{FS: fs, Logger: quietLogger()})
			requireNoError(t, err)
			requireNoError(t, s.Close())
		}
	})
}

func TestReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	_, err := Open("db", &Options{FS: fs, Logger: quietLogger(), ReadOnly: true})
	if err == nil {
		t.Fatal("read-only open of a missing store succeeded")
	}
	s, err := Open("db", &Options{FS: fs, Logger: quietLogger()})
	requireNoError(t, err)
	commit(t, s.Deployment("ro"), 1, map[string]Entry{"k": val("v")})
	requireNoError(t, s.Close())

	s, err = Open("db", &Options{FS: fs, Logger: quietLogger(), ReadOnly: true})
	requireNoError(t, err)
	defer s.Close()
	d := s.Deployment("ro")
	requireEqual(t, map[string]Entry{"k": val("v")}, allKeys(t, d))
	requireErrorIs(t, commitErr(d.NewBatch(2)), ErrReadOnly)
	requireErrorIs(t, d.AckOutbox(OutboxID{1, 0}), ErrReadOnly)
	requireErrorIs(t, d.Drop(), ErrReadOnly)
}

func TestClosed(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
	requireNoError(t, err)
	d := s.Deployment("c")
	commit(t, d, 1, map[string]Entry{"k": valT("v", 1)})
	pending := d.NewBatch(2)
	pending.Set([]byte("k"), valT("v", 1), val("w"))
	requireNoError(t, s.Close())
	requireNoError(t, s.Close()) // idempotent

	_, _, err = d.Get([]byte("k"))
	requireErrorIs(t, err, ErrClosed)
	requireErrorIs(t, d.Expired(10, func([]byte, int64) error { return nil }), ErrClosed)
	requireErrorIs(t, d.Keys(nil, 0, func([]byte, Entry) error { return nil }), ErrClosed)
	_, err = d.Progress()
	requireErrorIs(t, err, ErrClosed)
	requireErrorIs(t, d.Outbox(func(OutboxEntry) error { return nil }), ErrClosed)
	requireErrorIs(t, d.AckOutbox(OutboxID{}), ErrClosed)
	requireErrorIs(t, d.Drop(), ErrClosed)
	_, err = d.DiskUsage()
	requireErrorIs(t, err, ErrClosed)
	_, err = s.Deployments()
	requireErrorIs(t, err, ErrClosed)
	requireErrorIs(t, commitErr(pending), ErrClosed)
	pending.Close()
	nb := d.NewBatch(3)
	nb.Set([]byte("k"), Entry{}, val("x")) // no-op, no panic
	nb.AppendOutbox(&OutboxEntry{Kind: OutboxOutput})
	requireErrorIs(t, commitErr(nb), ErrClosed)
}

// TestCommitAtomicity injects a filesystem error into Commit and checks
// that state, timers, progress and outbox are exactly as before, both in a
// reopened store and after a simulated crash (only synced data survives).
func TestCommitAtomicity(t *testing.T) {
	tests := []struct {
		name  string
		pred  errorfs.Predicate
		crash bool // reopen from a crash clone instead of the same FS
	}{
		{"WAL write fails", errorfs.And(errorfs.Writes, errorfs.PathMatch("db/*.log")), false},
		{"any write fails", errorfs.Writes, false},
		{"WAL write fails, crash", errorfs.And(errorfs.Writes, errorfs.PathMatch("db/*.log")), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			toggle := &errorfs.Toggle{Injector: errorfs.ErrInjected.If(tc.pred)}
			s, err := Open("db", &Options{FS: errorfs.Wrap(mem, toggle), Logger: quietLogger()})
			requireNoError(t, err)
			d := s.Deployment("atomic")
			b := d.NewBatch(1)
			b.Set([]byte("a"), Entry{}, valT("a1", 100))
			b.Set([]byte("b"), Entry{}, val("b1"))
			b.SetProgress(10, 20)
			b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte("a"), Payload: []byte("o1")})
			requireNoError(t, commitErr(b))

			snapshot := func(d *Deployment) string {
				p, err := d.Progress()
				requireNoError(t, err)
				var out []OutboxEntry
				requireNoError(t, d.Outbox(func(e OutboxEntry) error { out = append(out, e); return nil }))
				return fmt.Sprintf("%v|%v|%+v|%+v", allKeys(t, d), expired(t, d, math.MaxInt64), p, out)
			}
			before := snapshot(d)

			toggle.On()
			b = d.NewBatch(2)
			b.Set([]byte("a"), valT("a1", 100), valT("a2", 200)) // move timer
			b.Set([]byte("b"), val("b1"), Entry{})               // delete
			b.Set([]byte("c"), Entry{}, Entry{TimeoutMs: 50})    // new timer
			b.SetProgress(11, 21)
			b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Key: []byte("a"), Payload: []byte("o2")})
			_, err = b.Commit()
			requireErrorIs(t, err, ErrFailed)
			if !errors.Is(err, errorfs.ErrInjected) && !containsInjected(err) {
				t.Fatalf("commit error does not mention the injected error: %v", err)
			}
			// The failed store refuses further use.
			_, _, err = d.Get([]byte("a"))
			requireErrorIs(t, err, ErrFailed)
			_ = s.Close()
			toggle.Off()

			fs := vfs.FS(mem)
			if tc.crash {
				fs = mem.CrashClone(vfs.CrashCloneCfg{})
			}
			s, err = Open("db", &Options{FS: fs, Logger: quietLogger()})
			requireNoError(t, err)
			defer s.Close()
			d = s.Deployment("atomic")
			requireEqual(t, before, snapshot(d))
			// The store works again, and batch 2 can be retried.
			commit(t, d, 2, map[string]Entry{"c": {TimeoutMs: 50}})
		})
	}
}

func containsInjected(err error) bool {
	return err != nil && contains(err.Error(), "injected error")
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestConcurrentReads runs readers against a writer. Every batch writes the
// same value to all keys, so a reader that sees two different values in one
// Keys scan saw a torn batch.
func TestConcurrentReads(t *testing.T) {
	s := openMem(t)
	d := s.Deployment("conc")
	const nKeys, nBatches = 64, 40
	var done atomic.Bool
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				var first string
				n := 0
				err := d.Keys(nil, 0, func(key []byte, e Entry) error {
					if n == 0 {
						first = string(e.Value)
					} else if string(e.Value) != first {
						return fmt.Errorf("torn read: %q vs %q", first, e.Value)
					}
					n++
					return nil
				})
				if err == nil && n != 0 && n != nKeys {
					err = fmt.Errorf("saw %d keys", n)
				}
				if err == nil {
					_, _, err = d.Get([]byte("k0"))
				}
				if err == nil {
					_, err = d.Progress()
				}
				if err == nil {
					err = d.Expired(math.MaxInt64, func([]byte, int64) error { return nil })
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	prev := make([]Entry, nKeys)
	for batch := uint64(1); batch <= nBatches; batch++ {
		b := d.NewBatch(batch)
		for i := 0; i < nKeys; i++ {
			next := valT(fmt.Sprint(batch), int64(batch*1000)+int64(i))
			b.Set([]byte(fmt.Sprintf("k%d", i)), prev[i], next)
			prev[i] = next
		}
		b.AppendOutbox(&OutboxEntry{Kind: OutboxOutput, Payload: []byte("x")})
		if _, err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if batch%8 == 0 {
			requireNoError(t, d.AckOutbox(OutboxID{BatchID: batch}))
		}
	}
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	p, _ := d.Progress()
	requireEqual(t, Progress{BatchID: nBatches, Keys: nKeys, TimerKeys: nKeys}, p)
	requireEqual(t, nKeys, len(expired(t, d, math.MaxInt64)))
}

// TestCloseWaitsForReaders closes the store while readers run: readers get
// either a result or ErrClosed, never a Pebble panic, and a callback that
// re-enters the store during Close does not deadlock.
func TestCloseWaitsForReaders(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quietLogger()})
	requireNoError(t, err)
	d := s.Deployment("cw")
	commit(t, d, 1, map[string]Entry{"a": valT("1", 1), "b": valT("2", 2)})
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				err := d.Keys(nil, 0, func(key []byte, _ Entry) error {
					_, _, err := d.Get(key) // re-entrant read
					if err != nil && !errors.Is(err, ErrClosed) {
						return err
					}
					return nil
				})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	requireNoError(t, s.Close())
	wg.Wait()
}

func TestDiskUsage(t *testing.T) {
	s := openDisk(t, t.TempDir())
	defer s.Close()
	d := s.Deployment("du")
	sets := map[string]Entry{}
	for i := 0; i < 2000; i++ {
		sets[fmt.Sprintf("key-%05d", i)] = val(fmt.Sprintf("%0100d", i))
	}
	commit(t, d, 1, sets)
	requireNoError(t, s.db.Flush())
	du, err := d.DiskUsage()
	requireNoError(t, err)
	if du == 0 {
		t.Fatal("DiskUsage is 0 after flush")
	}
	other, err := s.Deployment("other").DiskUsage()
	requireNoError(t, err)
	requireEqual(t, uint64(0), other)
}
