package output

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/state"
)

// PublishWindow is the most publishes [Publisher.Start] and
// [Publisher.Deliver] keep awaiting an acknowledgement at once. It is larger
// than a batch's outputs usually are (the default trigger.max_rows is 10000),
// so that [Publisher.Start] returns without waiting for acknowledgements and
// the engine runs the next batch while they arrive.
const PublishWindow = 16384

// PublishAsyncMaxPending is the async publish limit the runtime gives its
// JetStream context (jetstream.WithPublishAsyncMaxPending), which the router
// publishes through ([Publisher] awaits its own acknowledgements, see pubacks.go).
const PublishAsyncMaxPending = 4 * PublishWindow

// PublishAckTimeout is how long an asynchronous publish (of a [Publisher], or
// of the runtime's JetStream context) waits for its acknowledgement before
// failing (for example when a reply was lost); the outbox delivers it again.
const PublishAckTimeout = 15 * time.Second

// PublishStallWait is how long one publish may wait for a free slot in the
// JetStream context's async window before failing.
const PublishStallWait = 5 * time.Second

// NewJetStream returns the JetStream context a [Publisher] is made for: async
// publishes fail after [PublishAckTimeout] without an acknowledgement, and up
// to [PublishAsyncMaxPending] may be pending.
func NewJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(PublishAckTimeout),
		jetstream.WithPublishAsyncMaxPending(PublishAsyncMaxPending))
	if err != nil {
		return nil, fmt.Errorf("natsio: JetStream context: %w", err)
	}
	return js, nil
}

// ErrNoSubject is returned by [Publisher.Deliver] for an entry whose kind has
// no subject configured (an empty Output or DeadLetter subject, or an unknown kind).
var ErrNoSubject = errors.New("natsio: no subject for outbox entry")

// Subjects are where a [Publisher] sends each kind of outbox entry.
type Subjects struct {
	// Output receives rows emitted by the handler (state.OutboxOutput). Required.
	Output string
	// DeadLetter receives dead letters (state.OutboxDeadLetter). Required.
	DeadLetter string
	// Late receives late rows (state.OutboxLate). May be empty: late entries
	// are then dropped (the caller only writes them when a late subject is set).
	Late string
	// Manifest receives batch manifests (state.OutboxManifest; see [changelog.ManifestSubject]). May
	// be empty: manifests are then dropped.
	Manifest string
}

// Publisher publishes outbox entries to JetStream; the service hands it to the engine as
// its sink.
// Every subject it publishes to must be captured by a stream (see
// [natsio.EnsureStream]), or Deliver fails with jetstream.ErrNoStreamResponse; the
// streams should have a duplicate window of at least [natsio.MinDuplicateWindow] so
// that re-deliveries after a crash are dropped.
type Publisher struct {
	js       jetstream.JetStream
	subj     Subjects
	instance string
	gen      uint64 // generation of the entries of batches >= genFrom; gen-1 before
	genFrom  uint64
	// ackTimeout is PublishAckTimeout (shorter in tests).
	ackTimeout time.Duration
}

// NewPublisher returns a Publisher sending to subj through js.
func NewPublisher(js jetstream.JetStream, subj Subjects) *Publisher {
	return &Publisher{js: js, subj: subj, ackTimeout: PublishAckTimeout}
}

// WithInstance makes the message ids of p include instance, the identity of the state store
// the outbox entries come from (state.Store.ID): a store made afresh counts batches from 1
// again, and without the instance its outputs would collide with an earlier store's within
// the duplicate window and be dropped.
func (p *Publisher) WithInstance(instance string) *Publisher {
	p.instance = instance
	return p
}

// WithGeneration makes the message ids of p include the deployment's generation
// (state.Progress.Generation): gen for the entries of batches from genFrom on
// (state.Progress.GenerationFrom), gen-1 for earlier ones. A store whose input was rewound
// behind batches it published (a data directory restored from a backup) repeats batch ids;
// the generation keeps their message ids apart. Generation 0 leaves the ids as without it.
func (p *Publisher) WithGeneration(gen, genFrom uint64) *Publisher {
	p.gen, p.genFrom = gen, genFrom
	return p
}

// MsgID returns the Nats-Msg-Id of the outbox entry id of deployment, written by the state
// store instance (empty: none) in generation gen: "deployment.instance.batch.seq", or
// "deployment.batch.seq" without an instance; from generation 1 on, "g<gen>." precedes the
// batch. It is deterministic, so a re-delivery is dropped by the stream's duplicate window.
func MsgID(deployment, instance string, gen uint64, id state.OutboxID) string {
	var buf [96]byte // on the stack for the usual lengths: one allocation, the string
	b := append(buf[:0], deployment...)
	b = append(b, '.')
	if instance != "" {
		b = append(b, instance...)
		b = append(b, '.')
	}
	if gen > 0 {
		b = append(b, 'g')
		b = strconv.AppendUint(b, gen, 10)
		b = append(b, '.')
	}
	b = strconv.AppendUint(b, id.BatchID, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(id.Seq), 10)
	return string(b)
}

func (p *Publisher) msgID(deployment string, id state.OutboxID) string {
	gen := p.gen
	if gen > 0 && id.BatchID < p.genFrom {
		gen-- // committed before the generation began, possibly published with the old id
	}
	return MsgID(deployment, p.instance, gen, id)
}

// Dead-letter reasons of entries the publisher could not publish. Such an entry is replaced
// by a small dead letter saying why (same message id, so it is still published exactly once),
// instead of failing every delivery forever and holding back every later batch.
const (
	// ReasonTooLargeToPublish: the message is larger than the server's max_payload.
	ReasonTooLargeToPublish = "too_large_to_publish"
	// ReasonUnpublishable: the server refused the message for good: larger than its
	// stream's max_msg_size, an invalid subject, or no permission to publish to it.
	ReasonUnpublishable = "unpublishable"
)

// headerFraming is what a message's headers cost on the wire beyond their lines: the
// "NATS/1.0\r\n" status line and the blank line that ends them.
const headerFraming = len("NATS/1.0\r\n") + len("\r\n")

// WireSize is what m counts against the server's max_payload: data plus headers.
func WireSize(m *nats.Msg) int {
	size := len(m.Data)
	if len(m.Header) > 0 {
		size += headerFraming
	}
	for k, vs := range m.Header {
		for _, v := range vs {
			size += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return size
}

// fit returns m, or when m is larger than the connection's max_payload, a small dead letter
// in its place.
func (p *Publisher) fit(m *nats.Msg) *nats.Msg {
	limit, size := p.js.Conn().MaxPayload(), WireSize(m)
	if limit <= 0 || int64(size) <= limit || p.subj.DeadLetter == "" {
		return m
	}
	return p.stub(m, ReasonTooLargeToPublish, fmt.Sprintf("%d bytes for %s is larger than the server's max_payload of %d bytes", size, m.Subject, limit))
}

// stub is the small dead letter that replaces m, which cannot be published for reason.
func (p *Publisher) stub(m *nats.Msg, reason, why string) *nats.Msg {
	stub := &nats.Msg{Subject: p.subj.DeadLetter, Header: nats.Header{}}
	for _, k := range []string{HeaderDeployment, HeaderKey, HeaderBatch, HeaderSubject, HeaderSequence, HeaderTimeoutCall, jetstream.MsgIDHeader} {
		if v := m.Header.Get(k); v != "" {
			stub.Header.Set(k, v)
		}
	}
	stub.Header.Set(HeaderReason, reason)
	kind := "message"
	if m.Subject == p.subj.DeadLetter {
		kind = "dead letter"
	}
	msg := "a " + kind + " could not be published and was dropped: " + why
	if r := m.Header.Get(HeaderReason); r != "" {
		msg += " (it was a dead letter: " + r + ": " + truncate(m.Header.Get(HeaderError), 200) + ")"
	}
	stub.Header.Set(HeaderError, msg)
	return stub
}

// refused tells whether err, from publishing m, is a refusal that publishing m again cannot
// change: the stream's max_msg_size, an invalid subject, the server's max_payload, or a
// permission violation for m's subject. The server reports a violation on the connection,
// and the publish itself only times out, so the connection's last error is consulted: it
// counts only when it is a violation for m's subject that arrived after m was sent (it is
// not before, the connection's last error when m was sent). A violation of an earlier
// publish stays the connection's last error until it reconnects, and must not turn a later
// timeout into a refusal once the permission was fixed.
func (p *Publisher) refused(m *nats.Msg, err, before error) bool {
	switch {
	case errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum), errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrMaxPayload):
		return true
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return p.violatedSince(m.Subject, before)
	}
	return false
}

// violatedSince tells whether the connection's last error is a permission violation for
// publishing to subject that is not before (each violation the server reports is a new error
// value), so one that arrived since before was read.
func (p *Publisher) violatedSince(subject string, before error) bool {
	last := p.js.Conn().LastError()
	// The violation is a *fmt.wrapError: comparing it with before (of whatever type) is safe.
	return last != nil && errors.Is(last, nats.ErrPermissionViolation) && last != before &&
		strings.Contains(last.Error(), `Publish to "`+subject+`"`)
}

// replace publishes the stub of m, which was refused with err, and waits for its
// acknowledgement. It fails when there is no dead-letter subject or the stub is refused too.
func (p *Publisher) replace(ctx context.Context, m *nats.Msg, err error) error {
	if p.subj.DeadLetter == "" {
		return err
	}
	if _, perr := p.js.PublishMsg(ctx, p.stub(m, ReasonUnpublishable, err.Error())); perr != nil {
		return fmt.Errorf("%w; its dead letter failed too: %w", err, perr)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// Deliver publishes entries in order: state.OutboxOutput to Subjects.Output,
// state.OutboxDeadLetter to Subjects.DeadLetter, state.OutboxLate to
// Subjects.Late and state.OutboxManifest to Subjects.Manifest (each of the last
// two dropped when its subject is empty). Each message carries the entry's
// payload and headers plus HeaderDeployment, HeaderKey (when the key is not
// empty), HeaderBatch and Nats-Msg-Id = [MsgID]. Publishes are asynchronous,
// at most [PublishWindow] awaiting acknowledgement at once, and Deliver
// returns only after every one was acknowledged by its stream, or with the
// first error (a failed publish, an entry without a subject, ctx done). After
// an error the caller delivers all entries again; the message ids make that
// safe. An empty entries is a no-op. Deliver is Start followed by Wait.
func (p *Publisher) Deliver(ctx context.Context, deployment string, entries []state.OutboxEntry) error {
	return p.Start(ctx, deployment, entries).Wait(ctx)
}

// Start delivers entries like [Publisher.Deliver] but returns at once: the
// messages are sent by a goroutine of their own, in order, and
// [Delivery.Wait] awaits the end of the sending and the acknowledgements.
// This lets the caller prepare more work on another core while the messages
// go out and the streams store them. entries must not be modified until Wait
// returned.
func (p *Publisher) Start(ctx context.Context, deployment string, entries []state.OutboxEntry) *Delivery {
	d := &Delivery{p: p, deployment: deployment, sent: make(chan struct{})}
	if len(entries) == 0 {
		close(d.sent)
		return d
	}
	nc := p.js.Conn()
	acks, err := newPubAcks(nc, len(entries))
	if err != nil {
		d.err = fmt.Errorf("natsio: subscribing for publish acknowledgements: %w", err)
		close(d.sent)
		return d
	}
	d.acks, d.nc = acks, nc
	d.status = nc.StatusChanged(nats.RECONNECTING, nats.CLOSED)
	go func() {
		defer close(d.sent)
		d.err = d.send(ctx, entries)
	}()
	return d
}

// send publishes entries in order, awaiting acknowledgements only when more
// than [PublishWindow] are pending.
func (d *Delivery) send(ctx context.Context, entries []state.OutboxEntry) error {
	p, deployment := d.p, d.deployment
	d.window = make([]inflight, 0, min(len(entries), PublishWindow))
	var out reusedMsg
	for i := range entries {
		e := &entries[i]
		var subject string
		switch e.Kind {
		case state.OutboxOutput:
			subject = p.subj.Output
		case state.OutboxDeadLetter:
			subject = p.subj.DeadLetter
		case state.OutboxLate:
			if p.subj.Late == "" {
				continue
			}
			subject = p.subj.Late
		case state.OutboxManifest:
			if p.subj.Manifest == "" {
				continue
			}
			subject = p.subj.Manifest
		}
		if subject == "" {
			return fmt.Errorf("%w: %s kind %s", ErrNoSubject, p.msgID(deployment, e.ID), e.Kind)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("natsio: delivering: %w", err)
		}
		if len(d.window)-d.head >= PublishWindow {
			if err := d.await(ctx, d.window[d.head]); err != nil {
				return err
			}
			d.head++
			if d.head >= PublishWindow {
				d.window = append(d.window[:0], d.window[d.head:]...)
				d.head = 0
			}
		}
		m := out.output(e, subject, deployment, p.msgID(deployment, e.ID))
		if m == nil {
			m = p.message(e, subject, deployment)
		}
		m = p.fit(m)
		f := inflight{e: e, subject: subject, idx: d.published, at: time.Now(), lastErr: d.nc.LastError()}
		m.Reply = d.acks.reply(f.idx)
		err := d.nc.PublishMsg(m)
		m.Reply = ""
		if err != nil && p.refused(m, err, f.lastErr) {
			err = p.replace(ctx, m, err) // published in order: every earlier message is sent
			if err == nil {
				continue
			}
		}
		if err != nil {
			return fmt.Errorf("natsio: publishing %s to %s: %w", p.msgID(deployment, e.ID), m.Subject, err)
		}
		d.published++
		d.window = append(d.window, f)
	}
	return nil
}

// message returns the message of e on subject: its payload with headers HeaderDeployment,
// HeaderKey (when e has a key), HeaderBatch, Nats-Msg-Id ([MsgID]) and those of [entryHeaders].
func (p *Publisher) message(e *state.OutboxEntry, subject, deployment string) *nats.Msg {
	h := entryHeaders(e)
	h.Set(HeaderDeployment, deployment)
	if len(e.Key) > 0 {
		h.Set(HeaderKey, string(e.Key))
	}
	h.Set(HeaderBatch, strconv.FormatUint(e.ID.BatchID, 10))
	h.Set(jetstream.MsgIDHeader, p.msgID(deployment, e.ID))
	return &nats.Msg{Subject: subject, Data: e.Payload, Header: h}
}

// reusedMsg is the one message a delivery sends its outputs with, the message of
// [Publisher.message] made again for each: nats.go encodes a message's headers into the
// connection's buffer before PublishMsg returns and keeps nothing of it, so the map and its
// value slices are made once per delivery and only the values change. The delivery keeps
// the entry, not the message, for what happens after the publish (see [Delivery.await]).
type reusedMsg struct {
	msg                        nats.Msg
	deployment, batch, key, id []string
	batchID                    uint64
}

// output returns e's message, or nil when e is not a plain output with a key (a dead letter,
// a late row, or a timeout call's output without one): [Publisher.message] makes those.
func (r *reusedMsg) output(e *state.OutboxEntry, subject, deployment, msgID string) *nats.Msg {
	if len(e.Key) == 0 || e.Reason != "" || e.Error != "" || e.Subject != "" || e.Sequence != 0 || e.TimeoutCall {
		return nil
	}
	if r.msg.Header == nil {
		r.deployment, r.batch, r.key, r.id = []string{""}, []string{""}, []string{""}, []string{""}
		r.msg.Header = nats.Header{HeaderDeployment: r.deployment, HeaderBatch: r.batch, HeaderKey: r.key, jetstream.MsgIDHeader: r.id}
	}
	if r.batch[0] == "" || r.batchID != e.ID.BatchID {
		r.batch[0], r.batchID = strconv.FormatUint(e.ID.BatchID, 10), e.ID.BatchID
	}
	r.deployment[0], r.key[0], r.id[0] = deployment, string(e.Key), msgID
	r.msg.Subject, r.msg.Data = subject, e.Payload
	return &r.msg
}

// entryHeaders returns the headers that carry e's reason, error, input subject and sequence
// and timeout-call mark (none for an output), with room for the ones every message gets.
func entryHeaders(e *state.OutboxEntry) nats.Header {
	h := make(nats.Header, 8)
	if e.Reason != "" {
		h.Set(HeaderReason, e.Reason)
	}
	if e.Error != "" {
		h.Set(HeaderError, e.Error)
	}
	if e.Subject != "" {
		h.Set(HeaderSubject, e.Subject)
	}
	if e.Sequence != 0 {
		h.Set(HeaderSequence, strconv.FormatUint(e.Sequence, 10))
	}
	if e.TimeoutCall {
		h.Set(HeaderTimeoutCall, "true")
	}
	return h
}

// Delivery is a delivery started by [Publisher.Start].
type Delivery struct {
	p          *Publisher
	deployment string
	sent       chan struct{} // closed when the sending goroutine is done
	nc         *nats.Conn
	acks       *pubAcks         // nil: nothing was sent
	status     chan nats.Status // the connection's RECONNECTING and CLOSED, while acks is open
	// Written by the sending goroutine until sent is closed, then by Wait.
	window       []inflight // window[head:] are awaiting acknowledgement
	head         int
	published    int         // publishes sent with a reply subject of acks
	timer        *time.Timer // bounds the wait for the oldest publish awaited (nil until one waits)
	disconnected bool        // the connection dropped while publishes were awaited
	waited       bool        // Wait has its result
	err          error
}

// inflight is a publish awaiting its acknowledgement.
type inflight struct {
	e       *state.OutboxEntry // what it was made of
	subject string
	idx     int       // its index in the delivery's acks
	at      time.Time // when it was sent
	// lastErr is the connection's last error when it was sent: a permission violation then
	// was an earlier publish's, not this one's (see Publisher.refused).
	lastErr error
}

// Wait returns nil once every message of the delivery was acknowledged by its
// stream, or the first error: of sending, of an acknowledgement, or ctx's
// while awaiting acknowledgements. It always waits for the sending goroutine
// to end first, so no message of the delivery is sent after Wait returned.
// After an error it also waits until every publish still pending has an
// outcome, so nothing of the delivery lands once Wait returned (unless ctx
// ended first, the connection dropped or [PublishAckTimeout] passed), and the
// caller delivers all entries again. Wait may be called more than once; it
// returns the same result.
func (d *Delivery) Wait(ctx context.Context) error {
	// The sending must be over whatever ctx says: after an error the caller sends everything
	// again, and a goroutine still sending the old copies could then land a message after a
	// later one. It ends soon by itself: it stops at the first error, checks Start's ctx
	// before every message, and an acknowledgement is awaited at most PublishAckTimeout.
	<-d.sent
	if d.acks == nil || d.waited {
		return d.err
	}
	for d.err == nil && d.head < len(d.window) {
		d.err = d.await(ctx, d.window[d.head])
		if d.err == nil || ctx.Err() == nil {
			d.head++ // acknowledged, or failed: either way it has its outcome
		}
	}
	if d.err != nil {
		d.settle(ctx)
	}
	d.acks.close()
	d.nc.RemoveStatusListener(d.status)
	if d.timer != nil {
		d.timer.Stop()
	}
	d.waited = true
	return d.err
}

// settle waits, after the delivery failed, until every publish sent has an outcome (or ctx
// ends, the connection dropped or PublishAckTimeout passed since the last was sent): a later
// message of a failed delivery that the server still stores could otherwise land after the
// caller sent the outbox again, ahead of an earlier one.
func (d *Delivery) settle(ctx context.Context) {
	var last time.Time
	if len(d.window) > 0 {
		last = d.window[len(d.window)-1].at
	}
	for d.acks.received() < d.published {
		if err := d.idle(ctx, last); err != nil {
			break
		}
	}
	d.head = len(d.window)
}

// pending returns how many publishes of the delivery have no outcome yet.
func (d *Delivery) pending() int {
	if d.acks == nil {
		return 0
	}
	return d.published - d.acks.received()
}

// await waits for the outcome of f, the oldest publish awaited. A publish the server refused
// for good is replaced by a dead letter (see [Publisher.replace]).
func (d *Delivery) await(ctx context.Context, f inflight) error {
	for {
		st, err := d.acks.outcome(f.idx)
		switch st {
		case ackOK:
			return nil
		case ackPending:
			err = d.idle(ctx, f.at)
			if err == nil {
				continue
			}
			if ctx.Err() != nil {
				return fmt.Errorf("natsio: awaiting publish acknowledgements: %w", ctx.Err())
			}
		}
		m := d.p.fit(d.p.message(f.e, f.subject, d.deployment)) // the message sent
		if d.p.refused(m, err, f.lastErr) {
			err = d.p.replace(ctx, m, err)
		}
		if err != nil {
			return fmt.Errorf("natsio: publishing %s to %s: %w", d.p.msgID(d.deployment, f.e.ID), m.Subject, err)
		}
		return nil
	}
}

// idle waits for the next acknowledgement of the delivery. It fails with
// [jetstream.ErrAsyncPublishTimeout] once PublishAckTimeout passed since sentAt (when the
// publish awaited was sent), with [nats.ErrDisconnected] when the connection dropped (its
// acknowledgements may be lost; the outbox delivers it again), or with ctx's error.
func (d *Delivery) idle(ctx context.Context, sentAt time.Time) error {
	if d.disconnected {
		return nats.ErrDisconnected
	}
	wait := time.Until(sentAt.Add(d.p.ackTimeout))
	if wait <= 0 {
		return jetstream.ErrAsyncPublishTimeout
	}
	if d.timer == nil {
		d.timer = time.NewTimer(wait)
	}
	select {
	case <-d.acks.signal:
		return nil
	case <-d.status:
		d.disconnected = true
		return nats.ErrDisconnected
	case <-ctx.Done():
		return ctx.Err()
	case <-d.timer.C:
		// Set for an earlier publish, or this one's time is up: the next call tells.
		d.timer.Reset(max(time.Until(sentAt.Add(d.p.ackTimeout)), 0))
		return nil
	}
}
