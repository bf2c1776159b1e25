package changelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

func openChangelog(t testing.TB, js jetstream.JetStream, ctx context.Context) *Changelog {
	t.Helper()
	c, err := OpenChangelog(ctx, js, "clog", 0)
	testutil.Require(t, err)
	return c
}

// readAll reads partition from from, failing the test on an error, with both ways of
// reading (which must agree) and the default.
func readAll(t *testing.T, c *Changelog, ctx context.Context, partition int, from uint64) ([]ChangelogRecord, uint64) {
	t.Helper()
	defer func(m readMode) { c.readMode = m }(c.readMode)
	var res [][]ChangelogRecord
	var lasts []uint64
	for _, mode := range []readMode{readDirect, readOrdered, readAuto} {
		c.readMode = mode
		var out []ChangelogRecord
		last, err := c.Read(ctx, partition, from, func(r ChangelogRecord) error {
			out = append(out, r)
			return nil
		})
		testutil.Require(t, err, "read mode", mode)
		res, lasts = append(res, out), append(lasts, last)
	}
	for i := 1; i < len(res); i++ {
		if !slices.EqualFunc(res[0], res[i], sameRecord) || lasts[0] != lasts[i] {
			t.Fatalf("read mode %d read %d records to %d, direct gets %d to %d", i, len(res[i]), lasts[i], len(res[0]), lasts[0])
		}
	}
	return res[0], lasts[0]
}

func sameRecord(a, b ChangelogRecord) bool {
	return a.Partition == b.Partition && a.Kind == b.Kind && a.Epoch == b.Epoch && a.BatchID == b.BatchID && a.Seq == b.Seq && a.Prev == b.Prev && bytes.Equal(a.Data, b.Data)
}

func requireRecords(t *testing.T, got, want []ChangelogRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d: %v", len(got), len(want), got)
	}
	for i := range got {
		if !sameRecord(got[i], want[i]) {
			t.Fatalf("record %d: got %+v, want %+v", i, short(got[i]), short(want[i]))
		}
	}
}

func short(r ChangelogRecord) string {
	return fmt.Sprintf("{p%d %s e%d b%d seq %d prev %d, %d bytes}", r.Partition, r.Kind, r.Epoch, r.BatchID, r.Seq, r.Prev, len(r.Data))
}

// appendN appends n batch records of epoch to partition, after after, and returns them.
func appendN(t *testing.T, c *Changelog, ctx context.Context, partition int, epoch, after uint64, n int) []ChangelogRecord {
	t.Helper()
	var out []ChangelogRecord
	for i := range n {
		rec := ChangelogRecord{Partition: partition, Kind: ChangelogBatch, Epoch: epoch, BatchID: uint64(i + 1), Data: reprLike(i, 3), Prev: after}
		seq, err := c.Append(ctx, after, rec)
		testutil.Require(t, err, "append", i)
		rec.Seq, after = seq, seq
		out = append(out, rec)
	}
	return out
}

func TestChangelogAppendRead(t *testing.T) {
	e := newEnv(t)
	c := openChangelog(t, e.js, e.ctx)
	if got, _, err := c.Last(e.ctx, 0); err != nil || got.Seq != 0 {
		t.Fatalf("Last of an empty partition: %v, %v", got, err)
	}
	if got, last := readAll(t, c, e.ctx, 0, 0); len(got) != 0 || last != 0 {
		t.Fatalf("Read of an empty partition: %v, last %d", got, last)
	}
	// Two partitions, interleaved in the stream.
	var p0, p1 []ChangelogRecord
	var a0, a1 uint64
	for i := range 6 {
		// Prev is what each record's reader sees of the one before it (Append takes after).
		r0 := ChangelogRecord{Partition: 0, Kind: ChangelogBatch, Epoch: 7, BatchID: uint64(i + 1), Data: reprLike(i, 20), Prev: a0}
		r1 := ChangelogRecord{Partition: 1, Kind: ChangelogAck, Epoch: 9, BatchID: uint64(i + 1), Data: []byte("x" + strconv.Itoa(i)), Prev: a1}
		var err error
		r0.Seq, err = c.Append(e.ctx, a0, r0)
		testutil.Require(t, err)
		r1.Seq, err = c.Append(e.ctx, a1, r1)
		testutil.Require(t, err)
		a0, a1 = r0.Seq, r1.Seq
		p0, p1 = append(p0, r0), append(p1, r1)
	}
	got, last := readAll(t, c, e.ctx, 0, 0)
	requireRecords(t, got, p0)
	if last != a0 {
		t.Fatalf("Read returned last %d, want %d", last, a0)
	}
	got, _ = readAll(t, c, e.ctx, 1, 1)
	requireRecords(t, got, p1)
	// From the middle: from a record's Seq, and from just after the previous one.
	got, _ = readAll(t, c, e.ctx, 0, p0[3].Seq)
	requireRecords(t, got, p0[3:])
	got, _ = readAll(t, c, e.ctx, 0, p0[2].Seq+1)
	requireRecords(t, got, p0[3:])
	got, last = readAll(t, c, e.ctx, 0, a0+1)
	if len(got) != 0 || last != a0 {
		t.Fatalf("Read past the end: %v, last %d", got, last)
	}
	rec, ok, err := c.Last(e.ctx, 1)
	testutil.Require(t, err)
	if !ok || !sameRecord(rec, p1[5]) {
		t.Fatalf("Last: %v %v, want %v", ok, short(rec), short(p1[5]))
	}
	// fn's error stops the read.
	stop := errors.New("stop")
	n := 0
	if _, err := c.Read(e.ctx, 0, 0, func(ChangelogRecord) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Read with a failing fn: %v after %d records", err, n)
	}
	// A wrong after on an empty partition, and invalid records.
	if _, err := c.Append(e.ctx, 3, ChangelogRecord{Partition: 2, Kind: ChangelogBatch}); !errors.Is(err, ErrFenced) {
		t.Fatalf("Append after 3 to an empty partition: %v", err)
	}
	if _, err := c.Append(e.ctx, 0, ChangelogRecord{Partition: 2, Kind: "put"}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("Append of kind put: %v", err)
	}
	// A long read, which takes an ordered consumer.
	long := appendN(t, c, e.ctx, 4, 1, 0, readBatch+50)
	got, _ = readAll(t, c, e.ctx, 4, 0)
	requireRecords(t, got, long)
	// Opening again keeps the stream and its records.
	c2 := openChangelog(t, e.js, e.ctx)
	got, _ = readAll(t, c2, e.ctx, 0, 0)
	requireRecords(t, got, p0)
	info, err := c2.stream.Info(e.ctx)
	testutil.Require(t, err)
	if cfg := info.Config; cfg.Name != "GS_CLOG_CL" || !slices.Equal(cfg.Subjects, []string{"gs.cl.clog.>"}) || cfg.MaxAge != 0 || cfg.Storage != jetstream.FileStorage || !cfg.AllowDirect || cfg.Replicas != 1 {
		t.Fatalf("changelog stream config: %+v", cfg)
	}
}

func TestChangelogFenced(t *testing.T) {
	e := newEnv(t)
	zombie := openChangelog(t, e.js, e.ctx)
	owner := openChangelog(t, e.js, e.ctx)
	recs := appendN(t, zombie, e.ctx, 0, 5, 0, 3)
	zlast := recs[2].Seq

	fence, err := owner.Fence(e.ctx, 0, 8)
	testutil.Require(t, err)
	if fence != zlast+1 {
		t.Fatalf("fence at %d, want %d", fence, zlast+1)
	}
	_, err = zombie.Append(e.ctx, zlast, ChangelogRecord{Partition: 0, Kind: ChangelogBatch, Epoch: 5, BatchID: 4, Data: []byte("late")})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's append after the fence: %v", err)
	}
	// A chunked record is fenced at its first chunk as well.
	_, err = zombie.Append(e.ctx, zlast, ChangelogRecord{Partition: 0, Kind: ChangelogBatch, Epoch: 5, BatchID: 4, Data: incompressible(3 << 20)})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("the zombie's chunked append after the fence: %v", err)
	}
	got, last := readAll(t, owner, e.ctx, 0, 0)
	want := append(recs, ChangelogRecord{Partition: 0, Kind: ChangelogFence, Epoch: 8, Seq: fence, Prev: zlast})
	requireRecords(t, got, want)
	if last != fence {
		t.Fatalf("the zombie left messages: last %d, fence %d", last, fence)
	}
	// An older epoch cannot fence a newer one.
	if _, err := zombie.Fence(e.ctx, 0, 5); !errors.Is(err, ErrFenced) {
		t.Fatalf("fencing with an older epoch: %v", err)
	}
	// The owner appends after its fence.
	seq, err := owner.Append(e.ctx, fence, ChangelogRecord{Partition: 0, Kind: ChangelogBatch, Epoch: 8, BatchID: 4, Data: []byte("mine")})
	testutil.Require(t, err)
	rec, ok, err := owner.Last(e.ctx, 0)
	testutil.Require(t, err)
	if !ok || rec.Seq != seq || string(rec.Data) != "mine" {
		t.Fatalf("Last after the owner's append: %v %v", ok, short(rec))
	}
	// Fencing an empty partition.
	if seq, err := owner.Fence(e.ctx, 3, 1); err != nil || seq != fence+2 {
		t.Fatalf("Fence of an empty partition: %d, %v", seq, err)
	}
}

func TestChangelogChunked(t *testing.T) {
	e := newEnv(t)
	c := openChangelog(t, e.js, e.ctx)
	raw := incompressible(5 << 20)
	packed := reprLike(1, 40000) // JSON-like values, ~5 MiB, that S2 compresses
	var after uint64
	var want []ChangelogRecord
	for i, data := range [][]byte{[]byte("small"), raw, packed, nil} {
		rec := ChangelogRecord{Partition: 2, Kind: ChangelogBatch, Epoch: 3, BatchID: uint64(i + 1), Data: data, Prev: after}
		seq, err := c.Append(e.ctx, after, rec)
		testutil.Require(t, err)
		rec.Seq, after = seq, seq
		if data == nil {
			rec.Data = []byte{}
		}
		want = append(want, rec)
	}
	chunks := int(want[1].Seq - want[0].Seq)
	if size := chunkSize(e.nats.Conn.MaxPayload()); chunks != (len(raw)+size-1)/size || chunks < 5 {
		t.Fatalf("5 MiB took %d messages (max_payload %d)", chunks, e.nats.Conn.MaxPayload())
	}
	t.Logf("5 MiB incompressible: %d chunks; %d bytes of JSON-like values: %d chunks", chunks, len(packed), want[2].Seq-want[1].Seq)
	got, _ := readAll(t, c, e.ctx, 2, 0)
	for i := range got {
		if len(got[i].Data) == 0 {
			got[i].Data = []byte{}
		}
	}
	requireRecords(t, got, want)
	// From inside the chunked record: it is read whole, its Seq being above from.
	got, _ = readAll(t, c, e.ctx, 2, want[0].Seq+2)
	requireRecords(t, got[:1], want[1:2])
	// Last of a chunked record.
	if _, err := c.Append(e.ctx, after, ChangelogRecord{Partition: 3, Kind: ChangelogBatch, Data: raw}); !errors.Is(err, ErrFenced) {
		t.Fatalf("append to partition 3 after %d: %v", after, err)
	}
	seq, err := c.Append(e.ctx, 0, ChangelogRecord{Partition: 3, Kind: ChangelogBatch, Epoch: 1, BatchID: 9, Data: raw})
	testutil.Require(t, err)
	rec, ok, err := c.Last(e.ctx, 3)
	testutil.Require(t, err)
	if !ok || rec.Seq != seq || !bytes.Equal(rec.Data, raw) {
		t.Fatalf("Last of a chunked record: %v %v", ok, short(rec))
	}
}

// publishChunks publishes chunks 1..n of a record of count chunks by hand, as a writer that
// crashed mid-record leaves them, and returns the last one's sequence.
func publishChunks(t *testing.T, e *env, subj string, after uint64, m chunkMeta, n int) uint64 {
	t.Helper()
	for i := 1; i <= n; i++ {
		m.index = i
		ack, err := e.js.PublishMsg(e.ctx, &nats.Msg{Subject: subj, Header: m.header(), Data: []byte("chunk " + strconv.Itoa(i))},
			jetstream.WithExpectLastSequencePerSubject(after))
		testutil.Require(t, err)
		if i == 1 {
			m.first = ack.Sequence
		}
		after = ack.Sequence
	}
	return after
}

func TestChangelogIncomplete(t *testing.T) {
	e := newEnv(t)
	c := openChangelog(t, e.js, e.ctx)
	subj := topology.ChangelogSubject("clog", 0)
	recs := appendN(t, c, e.ctx, 0, 2, 0, 2)
	after := recs[1].Seq

	// A trailing incomplete record: Last is the record before it.
	after = publishChunks(t, e, subj, after, chunkMeta{epoch: 2, batch: 3, kind: ChangelogBatch, count: 3}, 2)
	rec, ok, err := c.Last(e.ctx, 0)
	testutil.Require(t, err)
	if !ok || !sameRecord(rec, recs[1]) {
		t.Fatalf("Last with an incomplete record at the end: %v %v, want %v", ok, short(rec), short(recs[1]))
	}
	got, last := readAll(t, c, e.ctx, 0, 0)
	requireRecords(t, got, recs)
	if last != after {
		t.Fatalf("Read returned last %d, want the incomplete record's %d", last, after)
	}

	// A new record supersedes it, and a later incomplete one of a single chunk missing its
	// first (a stray chunk 2) is skipped too.
	more := appendN(t, c, e.ctx, 0, 4, after, 2)
	after = publishChunks(t, e, subj, more[1].Seq, chunkMeta{epoch: 4, batch: 9, kind: ChangelogBatch, count: 2}, 1)
	stray := chunkMeta{epoch: 4, batch: 10, kind: ChangelogBatch, index: 2, count: 2, first: after}
	ack, err := e.js.PublishMsg(e.ctx, &nats.Msg{Subject: subj, Header: stray.header(), Data: []byte("stray")}, jetstream.WithExpectLastSequencePerSubject(after))
	testutil.Require(t, err)
	final := appendN(t, c, e.ctx, 0, 4, ack.Sequence, 1)
	got, _ = readAll(t, c, e.ctx, 0, 0)
	requireRecords(t, got, slices.Concat(recs, more, final))
	rec, ok, err = c.Last(e.ctx, 0)
	testutil.Require(t, err)
	if !ok || !sameRecord(rec, final[0]) {
		t.Fatalf("Last: %v %v", ok, short(rec))
	}
	// Only incomplete records: none.
	publishChunks(t, e, topology.ChangelogSubject("clog", 1), 0, chunkMeta{epoch: 1, batch: 1, kind: ChangelogBatch, count: 4}, 3)
	if rec, ok, err := c.Last(e.ctx, 1); err != nil || ok {
		t.Fatalf("Last of only an incomplete record: %v %v %v", short(rec), ok, err)
	}
}

// subjectSeqs returns the stream sequences of subj's messages.
func subjectSeqs(t *testing.T, c *Changelog, ctx context.Context, subj string) []uint64 {
	t.Helper()
	sub, err := c.nc.SubscribeSync(nats.NewInbox())
	testutil.Require(t, err)
	defer sub.Unsubscribe() //nolint:errcheck
	var out []uint64
	_, err = c.directBatch(ctx, sub, subj, 1, func(m natsio.StoredMsg) bool {
		out = append(out, m.Sequence)
		return true
	})
	testutil.Require(t, err)
	return out
}

func TestChangelogPurge(t *testing.T) {
	e := newEnv(t)
	c := openChangelog(t, e.js, e.ctx)
	recs := appendN(t, c, e.ctx, 0, 1, 0, 5)
	other := appendN(t, c, e.ctx, 1, 1, 0, 2)
	testutil.Require(t, c.Purge(e.ctx, 0, recs[3].Seq))
	got, _ := readAll(t, c, e.ctx, 0, 0)
	requireRecords(t, got, recs[3:])
	got, _ = readAll(t, c, e.ctx, 1, 0)
	requireRecords(t, got, other) // other partitions are left alone

	// Below a chunk of a record: the record is kept whole.
	big, err := c.Append(e.ctx, recs[4].Seq, ChangelogRecord{Partition: 0, Kind: ChangelogBatch, Epoch: 1, BatchID: 6, Data: incompressible(3 << 20)})
	testutil.Require(t, err)
	tail := appendN(t, c, e.ctx, 0, 1, big, 1)
	testutil.Require(t, c.Purge(e.ctx, 0, big-1))
	got, _ = readAll(t, c, e.ctx, 0, 0)
	if len(got) != 2 || got[0].Seq != big || !sameRecord(got[1], tail[0]) {
		t.Fatalf("after a purge below a chunk: %v", got)
	}

	// Below everything: the last record stays, and its writer appends on.
	testutil.Require(t, c.Purge(e.ctx, 0, tail[0].Seq+100))
	if seqs := subjectSeqs(t, c, e.ctx, topology.ChangelogSubject("clog", 0)); !slices.Equal(seqs, []uint64{tail[0].Seq}) {
		t.Fatalf("after purging everything, the partition has %v", seqs)
	}
	if _, err := c.Append(e.ctx, tail[0].Seq, ChangelogRecord{Partition: 0, Kind: ChangelogAck, Epoch: 1, BatchID: 8}); err != nil {
		t.Fatalf("append after a purge: %v", err)
	}
	testutil.Require(t, c.Purge(e.ctx, 5, 10)) // an empty partition
}

func TestChangelogResolveOutcome(t *testing.T) {
	want := chunkMeta{epoch: 4, batch: 12, kind: ChangelogBatch, index: 2, count: 3, first: 40}
	msg := func(seq uint64, m chunkMeta) natsio.StoredMsg {
		return natsio.StoredMsg{Sequence: seq, Header: m.header()}
	}
	other := func(f func(*chunkMeta)) chunkMeta { m := want; f(&m); return m }
	for _, tc := range []struct {
		name   string
		last   natsio.StoredMsg
		found  bool
		expect uint64
		seq    uint64
		out    outcome
	}{
		{"this chunk is last", msg(42, want), true, 41, 42, outcomeAppended},
		{"still at expect", msg(41, other(func(m *chunkMeta) { m.index = 1; m.first = 0 })), true, 41, 41, outcomeAbsent},
		{"empty, expected empty", natsio.StoredMsg{}, false, 0, 0, outcomeAbsent},
		{"empty, expected a message", natsio.StoredMsg{}, false, 41, 0, outcomeFenced},
		{"a fence is last", msg(42, chunkMeta{epoch: 5, kind: ChangelogFence, index: 1, count: 1}), true, 41, 42, outcomeFenced},
		{"another epoch", msg(42, other(func(m *chunkMeta) { m.epoch = 5 })), true, 41, 42, outcomeFenced},
		{"another batch", msg(42, other(func(m *chunkMeta) { m.batch = 13 })), true, 41, 42, outcomeFenced},
		{"another kind", msg(42, other(func(m *chunkMeta) { m.kind = ChangelogAck })), true, 41, 42, outcomeFenced},
		{"another chunk count", msg(42, other(func(m *chunkMeta) { m.count = 4 })), true, 41, 42, outcomeFenced},
		{"another chunk", msg(42, other(func(m *chunkMeta) { m.index = 3 })), true, 41, 42, outcomeFenced},
		{"this chunk, then another message", msg(43, chunkMeta{epoch: 5, kind: ChangelogFence, index: 1, count: 1}), true, 41, 43, outcomeFenced},
		{"not a changelog message", natsio.StoredMsg{Sequence: 42}, true, 41, 42, outcomeFenced},
	} {
		seq, out := resolveOutcome(tc.expect, want, tc.last, tc.found)
		if seq != tc.seq || out != tc.out {
			t.Errorf("%s: got %d, %d; want %d, %d", tc.name, seq, out, tc.seq, tc.out)
		}
	}
}

func TestChangelogAssembler(t *testing.T) {
	var a assembler
	m := chunkMeta{epoch: 1, batch: 1, kind: ChangelogBatch, index: 1, count: 2, prev: 7}
	if _, _, done := a.add(10, m, []byte("ab")); done {
		t.Fatal("chunk 1 of 2 completed a record")
	}
	m2 := m
	m2.index, m2.first, m2.prev = 2, 9, 0 // not the open record's chunk 1
	if _, _, done := a.add(11, m2, []byte("cd")); done {
		t.Fatal("a chunk of another record completed it")
	}
	a.add(12, m, []byte("ab"))
	m2.first = 12
	if data, prev, done := a.add(13, m2, []byte("cd")); !done || string(data) != "abcd" || prev != 7 {
		t.Fatalf("got %q, prev %d, %v; want \"abcd\", prev 7 (chunk 1's), true", data, prev, done)
	}
}

// reprLike is a Pebble-batch-repr-like write of n JSON values (i seeds them).
func reprLike(i, n int) []byte {
	b := make([]byte, 12, 12+n*120)
	for j := range n {
		key := fmt.Sprintf("\x00\x01state\x00user-%06d", (i*7919+j*104729)%1000000)
		val := fmt.Sprintf(`{"count":%d,"sum":%d.%02d,"last_seen":"2025-06-%02dT%02d:%02d:%02d.%03dZ","country":%q,"flags":["a","b"]}`,
			(i*31+j)%5000, (i*17+j*13)%100000, j%100, 1+j%28, j%24, j%60, (i+j)%60, j%1000, []string{"NL", "DE", "US", "FR"}[j%4])
		b = append(b, 1)
		b = appendUvarint(b, len(key))
		b = append(b, key...)
		b = appendUvarint(b, len(val))
		b = append(b, val...)
	}
	return b
}

func appendUvarint(b []byte, n int) []byte {
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

func incompressible(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(b)
	return b
}

// BenchmarkChangelogAppend appends records of 1 KiB and 64 KiB of JSON-like values (S2
// compresses them) and of random bytes, reporting the median append.
func BenchmarkChangelogAppend(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, kind := range []string{"json", "random"} {
			b.Run(fmt.Sprintf("%dKiB-%s", size>>10, kind), func(b *testing.B) {
				j := testutil.StartJetStream(b)
				ctx := context.Background()
				c := openChangelog(b, j.JS, ctx)
				data := incompressible(size)
				if kind == "json" {
					data = bytes.Repeat(reprLike(3, 200), 1+size/20000)[:size]
				}
				lat := make([]time.Duration, 0, b.N)
				var after uint64
				b.SetBytes(int64(size))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					start := time.Now()
					seq, err := c.Append(ctx, after, ChangelogRecord{Kind: ChangelogBatch, Epoch: 1, BatchID: uint64(i), Data: data})
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
					after = seq
				}
				b.StopTimer()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}

// BenchmarkChangelogRead reads 2000 records of 1 KiB with Read (batched direct gets) and,
// for comparison, with an ordered consumer.
func BenchmarkChangelogRead(b *testing.B) {
	const n = 2000
	j := testutil.StartJetStream(b)
	ctx := context.Background()
	c := openChangelog(b, j.JS, ctx)
	var after uint64
	for i := range n {
		seq, err := c.Append(ctx, after, ChangelogRecord{Kind: ChangelogBatch, Epoch: 1, BatchID: uint64(i), Data: incompressible(1 << 10)})
		if err != nil {
			b.Fatal(err)
		}
		after = seq
	}
	for _, mode := range []struct {
		name string
		mode readMode
	}{{"direct", readDirect}, {"ordered-consumer", readOrdered}} {
		for _, from := range []uint64{1, after - 9} {
			b.Run(fmt.Sprintf("%s-%d-records", mode.name, after-from+1), func(b *testing.B) {
				c.readMode = mode.mode
				for i := 0; i < b.N; i++ {
					got := 0
					if _, err := c.Read(ctx, 0, from, func(ChangelogRecord) error { got++; return nil }); err != nil || got != int(after-from+1) {
						b.Fatal(got, err)
					}
				}
			})
		}
	}
}

// BenchmarkChangelogS2 measures S2 on a Pebble-repr-like write of JSON values.
func BenchmarkChangelogS2(b *testing.B) {
	for _, n := range []int{10, 500, 20000} {
		data := reprLike(1, n)
		enc := s2.Encode(nil, data)
		b.Run(fmt.Sprintf("encode-%dB", len(data)), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				s2.Encode(nil, data)
			}
			b.ReportMetric(float64(len(data))/float64(len(enc)), "ratio")
		})
		b.Run(fmt.Sprintf("decode-%dB", len(data)), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := s2.Decode(nil, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
