package changelog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Kinds of [ChangelogRecord].
const (
	// ChangelogBatch: a batch's state write.
	ChangelogBatch = "batch"
	// ChangelogAck: an acknowledgement record.
	ChangelogAck = "ack"
	// ChangelogDrop: a drop record.
	ChangelogDrop = "drop"
	// ChangelogFence: a new owner's first record, which fences every earlier writer.
	ChangelogFence = "fence"
)

// Headers on every message of a changelog record (a record is one message or several
// chunks, published one after another).
const (
	// HeaderCLEpoch is the lease epoch of the record's writer.
	HeaderCLEpoch = "Gs-Epoch"
	// HeaderCLBatch is the record's batch id.
	HeaderCLBatch = "Gs-Batch"
	// HeaderCLKind is the record's kind (ChangelogBatch, ...).
	HeaderCLKind = "Gs-Kind"
	// HeaderCLChunk is "<index>/<count>", index counting from 1.
	HeaderCLChunk = "Gs-Chunk"
	// HeaderCLFirst, on chunks 2 and later, is the stream sequence of the record's first chunk.
	HeaderCLFirst = "Gs-First"
	// HeaderCLCodec is "s2" when the record's data is S2-compressed (absent: as written).
	HeaderCLCodec = "Gs-Codec"
	// HeaderCLPrev, on chunk 1, is the partition's last sequence the writer expected when it
	// appended the record (the previous record's Seq, 0 for the first): a reader that goes on
	// from the record it read last checks with it that no record was purged in between.
	HeaderCLPrev = "Gs-Prev"
)

// Changelog errors.
var (
	// ErrFenced: another writer appended to the partition's changelog since the sequence the
	// writer expected (or a newer epoch fenced it): the writer lost ownership.
	ErrFenced = errors.New("natsio: changelog fenced: another writer appended")
	// ErrAppendUnknown: a publish's outcome could not be resolved (the server did not answer,
	// then reading the changelog back failed or the context ended). The record may or may
	// not be in the changelog; read [Changelog.Last] before appending again.
	ErrAppendUnknown = errors.New("natsio: changelog append outcome unknown")
	// ErrInvalidRecord: a record with a negative partition or an unknown kind.
	ErrInvalidRecord = errors.New("natsio: invalid changelog record")
	// ErrCorruptRecord: a complete record whose data does not decode.
	ErrCorruptRecord = errors.New("natsio: corrupt changelog record")
)

// codecS2 is the value of [HeaderCLCodec] for S2-compressed data.
const codecS2 = "s2"

// compressMin is the smallest data compressed: below it S2 cannot gain enough to matter.
const compressMin = 512

// headerRoom is what is kept free of a chunk's payload, out of the server's max_payload, for
// its headers (ours and the expected-sequence header: about 200 bytes).
const headerRoom = 1024

// readBatch and readBatchBytes bound one batched direct get of [Changelog.Read].
const (
	readBatch      = 1024
	readBatchBytes = 8 << 20
)

// publishAttempts bounds the publishes of one chunk (each one after the last was found
// absent); [natsio.ResolveTimeout] bounds the read that resolves a publish whose outcome is
// unknown.
const publishAttempts = 3

// publishAttemptTimeout bounds one publish of a chunk. A publish lost on the way (its stream's
// leader died with it) gets no answer at all; after this long it is resolved (natsio.ResolveTimeout)
// and published again, instead of the whole append waiting for its caller's deadline.
const publishAttemptTimeout = 5 * time.Second

// ChangelogRecord is one record of a partition's changelog.
type ChangelogRecord struct {
	// Partition is the partition whose changelog holds the record.
	Partition int
	// Kind is ChangelogBatch, ChangelogAck, ChangelogDrop or ChangelogFence.
	Kind string
	// Epoch is the lease epoch of the writer.
	Epoch uint64
	// BatchID is the batch the record belongs to.
	BatchID uint64
	// Data is the state write (a Pebble batch repr); any size, chunked as needed.
	Data []byte
	// Seq, on read and after an append, is the stream sequence of the record's last message.
	Seq uint64
	// Prev, on read, is the Seq of the partition's record before this one when it was
	// appended (0 for the first record, and for records written before this was recorded):
	// see [HeaderCLPrev].
	Prev uint64
}

// Changelog is a deployment's changelog: one subject per partition in the stream
// [ChangelogStream]. Only a partition's owner appends, each append expecting the
// partition's last sequence, so that a writer that lost its lease is fenced by its first
// append. Safe for concurrent use.
type Changelog struct {
	js         jetstream.JetStream
	nc         *nats.Conn
	stream     jetstream.Stream
	deployment string
	name       string
	api        string // the JetStream API prefix, ending with '.'
	readMode   readMode
}

// readMode is how [Changelog.Read] reads: readAuto (the default) with one batched direct
// get when the stream sequences to read are at most [readBatch], else with an ordered
// consumer (twice as fast on long reads, see BenchmarkChangelogRead); the others force one
// way, for the benchmark.
type readMode int

const (
	readAuto readMode = iota
	readDirect
	readOrdered
)

// OpenChangelog ensures deployment's changelog stream (name [ChangelogStream], subjects
// "gs.cl.<deployment>.>", file storage, replicas copies or [natsio.DefaultReplicas] when 0, no
// max_age, direct gets allowed) and returns it.
func OpenChangelog(ctx context.Context, js jetstream.JetStream, deployment string, replicas int) (*Changelog, error) {
	name, err := natsio.EnsureStream(ctx, js, natsio.StreamOptions{
		Name:     topology.ChangelogStream(deployment),
		Subjects: []string{topology.ChangelogFilter(deployment)},
		Replicas: replicas,
	})
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("natsio: looking up changelog stream %s: %w", name, err)
	}
	if cfg := st.CachedInfo().Config; !cfg.AllowDirect {
		cfg.AllowDirect = true
		if st, err = js.UpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("natsio: allowing direct gets on changelog stream %s: %w", name, err)
		}
	}
	return &Changelog{js: js, nc: js.Conn(), stream: st, deployment: deployment, name: name, api: natsio.APIPrefix(js)}, nil
}

// chunkMeta is what the headers of one message of a record say.
type chunkMeta struct {
	epoch, batch uint64
	kind         string
	index, count int
	first        uint64 // chunk 1's stream sequence; 0 on chunk 1
	prev         uint64 // on chunk 1, the sequence expected before it (HeaderCLPrev)
	codec        string
}

func (m chunkMeta) header() nats.Header {
	h := nats.Header{}
	h.Set(HeaderCLEpoch, strconv.FormatUint(m.epoch, 10))
	h.Set(HeaderCLBatch, strconv.FormatUint(m.batch, 10))
	h.Set(HeaderCLKind, m.kind)
	h.Set(HeaderCLChunk, strconv.Itoa(m.index)+"/"+strconv.Itoa(m.count))
	if m.first > 0 {
		h.Set(HeaderCLFirst, strconv.FormatUint(m.first, 10))
	}
	if m.index == 1 {
		h.Set(HeaderCLPrev, strconv.FormatUint(m.prev, 10))
	}
	if m.codec != "" {
		h.Set(HeaderCLCodec, m.codec)
	}
	return h
}

// parseMeta reads a message's record headers; ok is false for a message that is not a
// well-formed changelog chunk.
func parseMeta(h nats.Header) (m chunkMeta, ok bool) {
	var err error
	if m.epoch, err = strconv.ParseUint(h.Get(HeaderCLEpoch), 10, 64); err != nil {
		return m, false
	}
	if m.batch, err = strconv.ParseUint(h.Get(HeaderCLBatch), 10, 64); err != nil {
		return m, false
	}
	m.kind, m.codec = h.Get(HeaderCLKind), h.Get(HeaderCLCodec)
	i, n, found := strings.Cut(h.Get(HeaderCLChunk), "/")
	if !found {
		return m, false
	}
	if m.index, err = strconv.Atoi(i); err != nil {
		return m, false
	}
	if m.count, err = strconv.Atoi(n); err != nil || m.index < 1 || m.index > m.count {
		return m, false
	}
	if m.index > 1 {
		if m.first, err = strconv.ParseUint(h.Get(HeaderCLFirst), 10, 64); err != nil || m.first == 0 {
			return m, false
		}
	} else if v := h.Get(HeaderCLPrev); v != "" {
		if m.prev, err = strconv.ParseUint(v, 10, 64); err != nil {
			return m, false
		}
	}
	return m, true
}

// sameChunk tells whether a and b are the same chunk of the same record.
func sameChunk(a, b chunkMeta) bool {
	return a.epoch == b.epoch && a.batch == b.batch && a.kind == b.kind && a.index == b.index && a.count == b.count && a.first == b.first && a.prev == b.prev && a.codec == b.codec
}

// encodeData returns what is stored of data, and its codec.
func encodeData(data []byte) ([]byte, string) {
	if len(data) < compressMin {
		return data, ""
	}
	enc := s2.Encode(nil, data)
	if len(enc) >= len(data)-len(data)/16 {
		return data, "" // incompressible: not worth the decoding
	}
	return enc, codecS2
}

// chunkSize is the payload of one chunk, given the server's max_payload.
func chunkSize(maxPayload int64) int {
	if maxPayload <= 2*headerRoom {
		return int(max(maxPayload/2, 1))
	}
	return int(maxPayload - headerRoom)
}

func validKind(k string) bool {
	switch k {
	case ChangelogBatch, ChangelogAck, ChangelogDrop, ChangelogFence:
		return true
	}
	return false
}

// Append appends rec to the changelog of partition rec.Partition, expecting after as the
// partition's last sequence (the Seq of the last record this writer appended or read, or
// the last of [Changelog.Read]; 0 for an empty partition), and returns the new last
// sequence (rec's Seq). rec.Data larger than one message can carry is split into chunks,
// each published expecting the previous one's sequence.
//
// When another writer appended since after, nothing more is appended and [ErrFenced] is
// returned (a record fenced after its first chunks stays incomplete, and readers skip it).
// A publish whose outcome is unknown (no answer in time) is resolved by reading the
// partition's last message from the stream leader: when it is this chunk, the publish
// succeeded; when the partition is still at the expected sequence, the chunk is published
// again under the same expectation (so it cannot land twice); otherwise the writer was
// fenced. When that cannot be decided, [ErrAppendUnknown].
func (c *Changelog) Append(ctx context.Context, after uint64, rec ChangelogRecord) (uint64, error) {
	if rec.Partition < 0 || !validKind(rec.Kind) {
		return 0, fmt.Errorf("%w: partition %d, kind %q", ErrInvalidRecord, rec.Partition, rec.Kind)
	}
	subj := topology.ChangelogSubject(c.deployment, rec.Partition)
	data, codec := encodeData(rec.Data)
	size := chunkSize(c.nc.MaxPayload())
	count := max(1, (len(data)+size-1)/size)
	expect := after
	var first uint64
	for i := 1; i <= count; i++ {
		body := data[(i-1)*size : min(i*size, len(data))]
		meta := chunkMeta{epoch: rec.Epoch, batch: rec.BatchID, kind: rec.Kind, index: i, count: count, first: first, codec: codec}
		if i == 1 {
			meta.prev = after
		}
		seq, err := c.publishChunk(ctx, subj, expect, meta, body)
		if err != nil {
			if i > 1 {
				return 0, fmt.Errorf("%w (after chunk %d of %d of batch %d, partition %d)", err, i-1, count, rec.BatchID, rec.Partition)
			}
			return 0, err
		}
		if i == 1 {
			first = seq
		}
		expect = seq
	}
	return expect, nil
}

// publishChunk publishes one chunk expecting expect, and returns its sequence.
func (c *Changelog) publishChunk(ctx context.Context, subj string, expect uint64, meta chunkMeta, body []byte) (uint64, error) {
	for attempt := 1; ; attempt++ {
		m := &nats.Msg{Subject: subj, Header: meta.header(), Data: body}
		actx, cancel := context.WithTimeout(ctx, publishAttemptTimeout)
		ack, err := c.js.PublishMsg(actx, m, jetstream.WithExpectLastSequencePerSubject(expect))
		cancel()
		if err == nil {
			return ack.Sequence, nil
		}
		var apiErr *jetstream.APIError
		switch {
		case natsio.WrongLastSequence(err) && attempt == 1:
			return 0, fmt.Errorf("%w: %s was not at sequence %d", ErrFenced, subj, expect)
		case natsio.WrongLastSequence(err):
			// An earlier attempt of ours may have landed since: resolve as below.
		case errors.As(err, &apiErr), errors.Is(err, jetstream.ErrNoStreamResponse):
			return 0, fmt.Errorf("natsio: appending to %s: %w", subj, err) // refused: nothing stored
		}
		seq, out, rerr := c.resolve(ctx, subj, expect, meta)
		switch {
		case rerr != nil:
			return 0, fmt.Errorf("%w: %s after %v: reading it back: %v", ErrAppendUnknown, subj, err, rerr)
		case out == outcomeAppended:
			return seq, nil
		case out == outcomeFenced:
			return 0, fmt.Errorf("%w: %s moved past sequence %d to %d", ErrFenced, subj, expect, seq)
		case attempt >= publishAttempts || ctx.Err() != nil:
			return 0, fmt.Errorf("%w: %s still at sequence %d after %d attempts: %v", ErrAppendUnknown, subj, expect, attempt, err)
		}
	}
}

// outcome is what the resolution of an unknown publish found.
type outcome int

const (
	// outcomeAbsent: the subject is still at the expected sequence.
	outcomeAbsent outcome = iota
	// outcomeAppended: the subject's last message is the chunk published.
	outcomeAppended
	// outcomeFenced: another message is the subject's last.
	outcomeFenced
)

// resolve reads subj's last message from the stream leader and decides what became of the
// publish of the chunk meta, expecting expect.
func (c *Changelog) resolve(ctx context.Context, subj string, expect uint64, meta chunkMeta) (uint64, outcome, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), natsio.ResolveTimeout)
	defer cancel()
	last, found, err := c.leaderGet(rctx, natsio.MsgGetRequest{LastFor: subj})
	if err != nil {
		return 0, outcomeAbsent, err
	}
	seq, out := resolveOutcome(expect, meta, last, found)
	return seq, out, nil
}

// resolveOutcome decides the outcome of a publish of the chunk want, expecting expect, from
// the subject's last message (found false: the subject is empty). It returns the last
// message's sequence with it.
func resolveOutcome(expect uint64, want chunkMeta, last natsio.StoredMsg, found bool) (uint64, outcome) {
	if !found {
		if expect == 0 {
			return 0, outcomeAbsent
		}
		return 0, outcomeFenced // emptied under the writer
	}
	if last.Sequence == expect {
		return last.Sequence, outcomeAbsent
	}
	if got, ok := parseMeta(last.Header); ok && last.Sequence > expect && sameChunk(got, want) {
		return last.Sequence, outcomeAppended
	}
	return last.Sequence, outcomeFenced
}

// Fence appends a fence record of epoch to partition's changelog, expecting whatever is
// last there now, and returns its sequence: every writer that appended before it is fenced
// by its next append. When the last record there has an epoch above epoch (a newer owner
// fenced already), nothing is appended and [ErrFenced] returned.
func (c *Changelog) Fence(ctx context.Context, partition int, epoch uint64) (uint64, error) {
	subj := topology.ChangelogSubject(c.deployment, partition)
	for range 3 {
		last, found, err := c.leaderGet(ctx, natsio.MsgGetRequest{LastFor: subj})
		if err != nil {
			return 0, fmt.Errorf("natsio: fencing %s: %w", subj, err)
		}
		var after uint64
		if found {
			after = last.Sequence
			if m, ok := parseMeta(last.Header); ok && m.epoch > epoch {
				return 0, fmt.Errorf("%w: %s has a record of epoch %d, above %d", ErrFenced, subj, m.epoch, epoch)
			}
		}
		seq, err := c.Append(ctx, after, ChangelogRecord{Partition: partition, Kind: ChangelogFence, Epoch: epoch})
		if errors.Is(err, ErrFenced) {
			continue // someone appended in between: look again
		}
		return seq, err
	}
	return 0, fmt.Errorf("%w: %s keeps moving", ErrFenced, subj)
}

// Last returns partition's last complete record (false when there is none). A trailing
// incomplete record (a writer that crashed or was fenced mid-record) makes it read the
// whole partition.
func (c *Changelog) Last(ctx context.Context, partition int) (ChangelogRecord, bool, error) {
	subj := topology.ChangelogSubject(c.deployment, partition)
	last, found, err := c.leaderGet(ctx, natsio.MsgGetRequest{LastFor: subj})
	if err != nil || !found {
		return ChangelogRecord{}, false, err
	}
	from := uint64(0) // read the whole partition
	if m, ok := parseMeta(last.Header); ok && m.index == m.count {
		if m.count == 1 {
			rec, err := decodeCLRecord(partition, m, last.Sequence, last.Data)
			return rec, err == nil, err
		}
		from = m.first
	}
	var rec ChangelogRecord
	var ok bool
	for {
		_, err = c.Read(ctx, partition, from, func(r ChangelogRecord) error {
			rec, ok = r, true
			return nil
		})
		if ok || err != nil || from == 0 {
			return rec, ok, err
		}
		from = 0 // the last record's chunks were not all there
	}
}

// Read calls fn with every complete record of partition whose Seq is at least from, in
// order, up to the partition's last message when Read is called, and returns that
// message's sequence (0 for an empty partition): the from of the next Read is last+1, and
// the writer that appends next expects last. Incomplete records are skipped. An error of fn
// stops the read and is returned.
//
// It reads a short stretch with a batched direct get and a long one with an ordered
// consumer; the partition's last sequence comes from the stream leader first, so a lagging
// replica that answers cannot hide a record.
func (c *Changelog) Read(ctx context.Context, partition int, from uint64, fn func(ChangelogRecord) error) (uint64, error) {
	subj := topology.ChangelogSubject(c.deployment, partition)
	last, found, err := c.leaderGet(ctx, natsio.MsgGetRequest{LastFor: subj})
	if err != nil {
		return 0, fmt.Errorf("natsio: reading %s: %w", subj, err)
	}
	if !found {
		return 0, nil
	}
	target := last.Sequence
	from = max(from, 1)
	if from > target {
		return target, nil
	}
	sub, err := c.nc.SubscribeSync(nats.NewInbox())
	if err != nil {
		return 0, fmt.Errorf("natsio: reading %s: %w", subj, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // best effort
	var asm assembler
	cur, started := from, false
	for cur <= target {
		var ferr error
		take := func(m natsio.StoredMsg) bool {
			if m.Sequence > target {
				cur = target + 1
				return false
			}
			meta, ok := parseMeta(m.Header)
			if !started {
				started = true
				if ok && meta.index > 1 && meta.first < from {
					// from is inside a record whose Seq is at least from: read it whole.
					cur = meta.first
					return false
				}
			}
			cur = m.Sequence + 1
			if !ok {
				asm.reset()
				return cur <= target
			}
			if data, prev, done := asm.add(m.Sequence, meta, m.Data); done {
				meta.prev = prev
				rec, err := decodeCLRecord(partition, meta, m.Sequence, data)
				if err == nil {
					err = fn(rec)
				}
				if err != nil {
					ferr = err
					return false
				}
			}
			return cur <= target
		}
		var n int
		if c.readMode == readDirect || (c.readMode == readAuto && target-cur < readBatch) {
			n, err = c.directBatch(ctx, sub, subj, cur, take)
		} else {
			n, err = c.orderedRead(ctx, subj, cur, take)
		}
		switch {
		case ferr != nil:
			return 0, ferr
		case err != nil:
			return 0, fmt.Errorf("natsio: reading %s from %d: %w", subj, cur, err)
		case n == 0:
			// A replica behind the leader answered: ask again.
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return target, nil
}

// assembler joins the chunks of a record read in order.
type assembler struct {
	want  chunkMeta // the next chunk expected
	first uint64
	prev  uint64 // the open record's chunk 1's prev
	buf   []byte
	open  bool
}

func (a *assembler) reset() { a.open, a.buf = false, nil }

// add adds the chunk at seq, and returns the record's stored data and its chunk 1's prev
// when it completed one. A chunk that does not continue the open record drops it: a chunk 1
// opens a new one, any other is skipped.
func (a *assembler) add(seq uint64, m chunkMeta, data []byte) ([]byte, uint64, bool) {
	if m.index == 1 {
		if m.count == 1 {
			a.reset()
			return data, m.prev, true
		}
		a.open, a.first, a.want, a.prev = true, seq, m, m.prev
		a.buf = append(make([]byte, 0, len(data)*m.count), data...)
		a.want.index, a.want.first, a.want.prev = 2, seq, 0
		return nil, 0, false
	}
	if !a.open || !sameChunk(m, a.want) {
		a.reset()
		return nil, 0, false
	}
	a.buf = append(a.buf, data...)
	if m.index == m.count {
		buf := a.buf
		a.reset()
		return buf, a.prev, true
	}
	a.want.index++
	return nil, 0, false
}

// decodeCLRecord makes the record whose last chunk, at seq, has meta m, of its stored data.
func decodeCLRecord(partition int, m chunkMeta, seq uint64, stored []byte) (ChangelogRecord, error) {
	rec := ChangelogRecord{Partition: partition, Kind: m.kind, Epoch: m.epoch, BatchID: m.batch, Seq: seq, Prev: m.prev, Data: stored}
	switch m.codec {
	case "":
	case codecS2:
		data, err := s2.Decode(nil, stored)
		if err != nil {
			return ChangelogRecord{}, fmt.Errorf("%w: partition %d sequence %d: %v", ErrCorruptRecord, partition, seq, err)
		}
		rec.Data = data
	default:
		return ChangelogRecord{}, fmt.Errorf("%w: partition %d sequence %d: codec %q", ErrCorruptRecord, partition, seq, m.codec)
	}
	return rec, nil
}

// Purge drops partition's records below stream sequence below. It never drops part of a
// record (below inside a record is lowered to the record's first chunk) nor the
// partition's last record: the partition keeps the last sequence its writer expects, and
// [Changelog.Last] keeps a record to return.
func (c *Changelog) Purge(ctx context.Context, partition int, below uint64) error {
	subj := topology.ChangelogSubject(c.deployment, partition)
	last, found, err := c.leaderGet(ctx, natsio.MsgGetRequest{LastFor: subj})
	if err != nil {
		return fmt.Errorf("natsio: purging %s: %w", subj, err)
	}
	if !found {
		return nil
	}
	if below > last.Sequence {
		below = last.Sequence
	}
	next, found, err := c.leaderGet(ctx, natsio.MsgGetRequest{Seq: below, NextFor: subj})
	if err != nil {
		return fmt.Errorf("natsio: purging %s: %w", subj, err)
	}
	if found {
		if m, ok := parseMeta(next.Header); ok && m.index > 1 {
			below = min(below, m.first)
		}
	}
	if below <= 1 {
		return nil
	}
	if err := c.stream.Purge(ctx, jetstream.WithPurgeSubject(subj), jetstream.WithPurgeSequence(below)); err != nil {
		return fmt.Errorf("natsio: purging %s below %d: %w", subj, below, err)
	}
	return nil
}

// orderedRead reads subj from sequence from on with an ordered consumer, calling fn with
// each message until fn returns false or the subject has no more messages. It returns how
// many messages came.
func (c *Changelog) orderedRead(ctx context.Context, subj string, from uint64, fn func(natsio.StoredMsg) bool) (int, error) {
	cons, err := c.js.OrderedConsumer(ctx, c.name, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subj},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	if err != nil {
		return 0, err
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, err
	}
	defer func() {
		it.Stop()
		// Stopping leaves the consumer on the server for minutes (its inactive threshold):
		// enough reads reach the account's consumer limit (error 10026).
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), natsio.ResolveTimeout)
		defer cancel()
		_ = c.js.DeleteConsumer(dctx, c.name, cons.CachedInfo().Name)
	}()
	for n := 0; ; {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return n, err
		}
		md, err := m.Metadata()
		if err != nil {
			return n, err
		}
		n++
		if !fn(natsio.StoredMsg{Sequence: md.Sequence.Stream, Header: m.Headers(), Data: m.Data()}) || md.NumPending == 0 {
			return n, nil
		}
	}
}

// directBatch gets the messages of subj from sequence from on, a batch of them, with a
// direct get answered on sub, calling fn with each as it arrives until fn returns false (the
// rest of the batch is drained). It returns how many messages came: none when the subject
// has no message at or after from (on the replica that answered).
func (c *Changelog) directBatch(ctx context.Context, sub *nats.Subscription, subj string, from uint64, fn func(natsio.StoredMsg) bool) (int, error) {
	body, _ := json.Marshal(natsio.MsgGetRequest{Seq: from, NextFor: subj, Batch: readBatch, MaxBytes: readBatchBytes})
	if err := c.nc.PublishRequest(c.api+"DIRECT.GET."+c.name, sub.Subject, body); err != nil {
		return 0, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.js.Options().DefaultTimeout)
		defer cancel()
	}
	n, more := 0, true
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, err
		}
		if len(m.Data) == 0 {
			switch status := m.Header.Get("Status"); status {
			case "204", "404": // end of batch, no message
				return n, nil
			case "":
			default:
				return n, fmt.Errorf("natsio: direct get: %s %s", status, m.Header.Get("Description"))
			}
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return n, fmt.Errorf("natsio: direct get: message without a sequence")
		}
		n++
		if more {
			more = fn(natsio.StoredMsg{Sequence: seq, Header: m.Header, Data: m.Data})
		}
	}
}

// leaderGet gets one message of the changelog stream from its leader ([natsio.LeaderGet]).
func (c *Changelog) leaderGet(ctx context.Context, req natsio.MsgGetRequest) (natsio.StoredMsg, bool, error) {
	return natsio.LeaderGet(ctx, c.js, c.name, req)
}
