package input

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
)

// Source errors.
var (
	// ErrNoDurable is returned by [NewSource] when the durable name is empty.
	ErrNoDurable = errors.New("natsio: durable consumer name is required")
	// ErrDeliveryGap is returned by [Source.Fetch] when a delivery was lost
	// between server and client and the consumer could not be rewound (servers
	// before 2.14 lack the reset API). Acknowledging past the gap would lose
	// messages, so the Source refuses to go on: close it and open a new one
	// once the consumer's AckWait has passed.
	ErrDeliveryGap = errors.New("natsio: message delivery gap and consumer reset unavailable")
)

// SourceAckWait is the consumer's AckWait: a delivered message not acknowledged
// within it is delivered again.
const SourceAckWait = 30 * time.Second

// RewindTimeout bounds one rewind of the consumer, and the acknowledgement of a
// re-delivery on behalf of an earlier copy (see [Source.Ack]).
const RewindTimeout = 5 * time.Second

// Msg is one input message.
type Msg struct {
	// Data is the message body.
	Data []byte
	// Subject is the subject it was published on.
	Subject string
	// Header is its headers (nil: none). It is the Source's: do not modify it.
	Header nats.Header
	// Sequence is its stream sequence; it increases in delivery order within one Source.
	Sequence uint64

	raw   *nats.Msg
	epoch uint64
}

// Source reads a JetStream stream through a durable pull consumer with
// AckAll semantics. It is safe for concurrent use. Fetch calls are serialised
// among themselves (one fetcher at a time); Ack and Pending never wait for a
// Fetch: the Source's lock guards only its bookkeeping and is never held
// across a network wait, so an acknowledgement reaches the server while a
// Fetch waits for input.
//
// Guarantees to the caller:
//   - Within one Source, Fetch returns messages in strictly increasing
//     Sequence order without gaps in what the consumer delivered: a message
//     is never skipped, so acknowledging a message (which acknowledges all
//     before it) never drops one that was not returned. If the client missed a
//     delivery (a fetch that ended early, a reconnect), the Source rewinds the
//     consumer to its ack floor and drops the re-deliveries it already returned.
//   - Opening a Source rewinds the consumer to its ack floor, so messages
//     delivered but not acknowledged before a restart come again at once
//     instead of after [SourceAckWait].
//   - Messages are delivered at least once: after a restart a message whose
//     Sequence the caller already committed may come again. The caller must
//     skip those (for example every Sequence <= the input position it
//     committed with its last batch).
//   - No acknowledgement is sent with a delivery numbering the consumer no
//     longer uses: a rewind waits for the acknowledgements in flight, and one
//     asked for during or after a rewind is applied to the re-delivery.
type Source struct {
	js       jetstream.JetStream
	nc       *nats.Conn
	stream   string
	durable  string
	subjects []string // the consumer's filter (empty: the whole stream)
	cons     jetstream.Consumer
	next     string // the consumer's pull-request subject

	// fetchMu serialises Fetch: only the holder fetches and rewinds.
	// It is held across the fetcher's network waits; Ack never takes it.
	fetchMu sync.Mutex
	// Owned by the holder of fetchMu:
	lastDseq   uint64 // consumer sequence of the last delivery seen in this epoch
	last       uint64 // highest stream sequence returned to the caller
	failed     error  // sticky ErrDeliveryGap
	needRewind bool   // a rewind after a gap failed; retried at the next Fetch
	resetable  bool
	pending    uint64 // the consumer's pending count after the last delivery collected

	// mu guards the bookkeeping shared by the fetcher and Ack. It is never held
	// across a network wait.
	mu        sync.Mutex
	acksDone  sync.Cond // signalled (with mu) when acking drops to zero
	epoch     uint64    // increments on every consumer reset; written with fetchMu and mu held
	acked     uint64    // highest stream sequence acknowledged and confirmed
	ackWanted uint64    // highest stream sequence the caller asked to acknowledge without it being sent
	acking    int       // acknowledgements on their way to the server
	rewinding bool      // a rewind waits for acking to drop to zero or is in progress
}

// NewSource creates or updates the durable pull consumer named durable on
// stream, filtered to subjects (all of the stream when subjects is empty), with
// DeliverAll, AckAll, AckWait [SourceAckWait], unlimited MaxAckPending and no
// MaxRequestBatch limit, and rewinds it to its ack floor (see [Source]).
// Changing subjects keeps the consumer's position.
//
// Options: [BeforeRewind].
func NewSource(ctx context.Context, js jetstream.JetStream, stream, durable string, subjects []string, opts ...SourceOption) (*Source, error) {
	var o sourceOptions
	for _, opt := range opts {
		opt(&o)
	}
	if durable == "" {
		return nil, ErrNoDurable
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       durable,
		Description:   "groupstate input",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       SourceAckWait,
		MaxAckPending: -1,
		MaxDeliver:    -1,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
	switch len(subjects) {
	case 0:
	case 1:
		cfg.FilterSubject = subjects[0]
	default:
		cfg.FilterSubjects = subjects
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("natsio: creating consumer %s on stream %s: %w", durable, stream, err)
	}
	s := &Source{
		js: js, nc: js.Conn(), stream: stream, durable: durable, subjects: slices.Clone(subjects), cons: cons, resetable: true,
		next: natsio.APIPrefix(js) + "CONSUMER.MSG.NEXT." + stream + "." + durable,
	}
	s.acksDone.L = &s.mu
	if o.beforeRewind != nil {
		if err := o.beforeRewind(ctx); err != nil {
			return nil, err
		}
	}
	if !serverAtLeast(s.nc.ConnectedServerVersion(), 2, 14) {
		// Older server without the reset API: un-acknowledged messages come
		// back after AckWait instead. Continue from what was delivered.
		s.resetable = false
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("natsio: consumer %s on stream %s: %w", durable, stream, err)
		}
		s.lastDseq = info.Delivered.Consumer
		return s, nil
	}
	// A fresh replicated consumer's first reset sometimes goes unanswered (only its leader
	// answers, and it may not be elected yet): each attempt is bounded, and the next one is
	// usually answered at once.
	for range openRewindAttempts {
		rctx, cancel := context.WithTimeout(ctx, RewindTimeout)
		err = s.rewind(rctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: rewinding consumer %s on stream %s to its ack floor: %w", durable, stream, err)
	}
	return s, nil
}

// A SourceOption changes what [NewSource] does.
type SourceOption func(*sourceOptions)

type sourceOptions struct {
	beforeRewind func(context.Context) error
}

// BeforeRewind makes [NewSource] call fn once the consumer exists and before it rewinds it;
// an error of fn is NewSource's, and the consumer is then left as it was. A caller that may
// read the consumer only once it holds it (a lease) creates the consumer meanwhile, and
// rewinds it, disturbing whoever reads it, only once it does.
func BeforeRewind(fn func(context.Context) error) SourceOption {
	return func(o *sourceOptions) { o.beforeRewind = fn }
}

// openRewindAttempts is how many times NewSource tries to rewind the consumer.
const openRewindAttempts = 3

// serverAtLeast tells whether the server version v ("2.15.2") is at least major.minor.
func serverAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// rewind resets the consumer to its ack floor and starts a new epoch. The
// caller holds fetchMu, or s is not shared yet. An acknowledgement in flight
// would be read by the server in the new numbering if it arrived after the
// reset, so rewind first waits for those (each is bounded by its context or
// the connection's request timeout) and Acks asked for meanwhile are only
// remembered (ackWanted) until the re-deliveries come.
func (s *Source) rewind(ctx context.Context) error { return s.rewindTo(ctx, 0) }

// rewindTo is rewind to stream sequence seq (0: the ack floor): the consumer's next delivery
// is the first message at or after seq, and its ack floor is seq-1.
func (s *Source) rewindTo(ctx context.Context, seq uint64) error {
	s.mu.Lock()
	s.rewinding = true
	for s.acking > 0 {
		s.acksDone.Wait()
	}
	s.mu.Unlock()
	resp, err := s.js.ResetConsumerToSequence(ctx, s.stream, s.durable, seq)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rewinding = false
	if err != nil {
		return err
	}
	s.epoch++
	s.lastDseq = 0
	if resp != nil && resp.ConsumerInfo != nil {
		s.lastDseq = resp.Delivered.Consumer
	}
	return nil
}

// Gone tells whether err (from [Source.Fetch], [Source.Ack] or [Source.Pending]) says that
// the consumer or its stream no longer exists (deleted by an operator, or with its stream):
// the Source is of no further use, and the caller should ensure the stream and open a new one.
func Gone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerDoesNotExist) ||
		errors.Is(err, nats.ErrNoResponders)
}

// AckFloor returns the stream sequence of the consumer's ack floor: every message up to it
// was acknowledged.
func (s *Source) AckFloor(ctx context.Context) (uint64, error) {
	info, err := s.cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("natsio: consumer %s info: %w", s.durable, err)
	}
	return info.AckFloor.Stream, nil
}

// NextMatch returns the stream sequence of the first message at or after from that the
// consumer's filter takes (found false when there is none). A filtered consumer's ack floor
// can pass the last message it took (the server moves it over the stream's other subjects),
// so a floor above a caller's position says that messages were acknowledged past it only when
// one of the consumer's lies in between.
func (s *Source) NextMatch(ctx context.Context, from uint64) (uint64, bool, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return 0, false, fmt.Errorf("natsio: stream %s: %w", s.stream, err)
	}
	subjects := s.subjects
	if len(subjects) == 0 {
		subjects = []string{">"}
	}
	var next uint64
	found := false
	for _, subj := range subjects {
		m, err := st.GetMsg(ctx, max(from, 1), jetstream.WithGetMsgSubject(subj))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("natsio: next message of %s on %s from %d: %w", subj, s.stream, from, err)
		}
		if !found || m.Sequence < next {
			next, found = m.Sequence, true
		}
	}
	return next, found, nil
}

// Rewind resets the consumer so that it delivers the messages from stream sequence seq on
// (seq >= 1), even those acknowledged already (as when the caller's committed position is
// behind the ack floor, after its state was restored from a backup): its ack floor becomes
// seq-1. Messages returned by this Source before are returned again. It needs the server's
// consumer reset API (NATS 2.14 or later).
func (s *Source) Rewind(ctx context.Context, seq uint64) error {
	if seq < 1 {
		seq = 1
	}
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	if err := s.rewindTo(ctx, seq); err != nil {
		return fmt.Errorf("natsio: rewinding consumer %s on %s to sequence %d: %w", s.durable, s.stream, seq, err)
	}
	s.needRewind = false
	s.last = min(s.last, seq-1)
	s.mu.Lock()
	s.acked = min(s.acked, seq-1)
	s.ackWanted = min(s.ackWanted, seq-1)
	s.mu.Unlock()
	return nil
}

// Fetch returns up to max messages (max < 1 means 1) holding at most maxBytes bytes of Data
// in all (maxBytes < 1: no byte bound), except that a first message larger than maxBytes is
// returned alone: no message is too large to be fetched. It takes what is available at once;
// when nothing is, it waits up to wait for a message and then returns it with whatever else
// is available by then. It returns an empty slice and a nil error when nothing arrived within
// wait. When ctx ends while waiting, the messages already received are returned with a nil
// error, or ctx's error when there are none. Fetch never returns a message twice within one
// Source.
//
// The byte bound holds for what the client receives, not only for what it returns, so one
// Fetch holds about maxBytes of input, not max times the largest message: it is the pull
// requests' max_bytes, which the server counts with subjects and headers (the Data returned
// may be somewhat less than maxBytes). The first message is requested alone and without a
// byte bound, because a request whose max_bytes is below the next message's size ends with
// nothing and leaves that message to the next request; when the server counted more pending
// after it, the rest is one request that takes what is there at once, with max_bytes what the
// bound leaves (a message stored a moment before may not be counted yet: the next Fetch
// takes it). Each request waits for all its deliveries, even those its ending status overtook
// (see pull.go), so a replicated consumer loses none in the client.
func (s *Source) Fetch(ctx context.Context, max, maxBytes int, wait time.Duration) ([]Msg, error) {
	return s.fetch(ctx, max, maxBytes, wait, false)
}

// FetchAvailable returns up to max messages holding at most maxBytes bytes of Data in all
// (maxBytes < 1: no byte bound) that are available at once, without waiting for any: it adds
// to a fetch the messages that arrived since. Unlike Fetch it asks for them in one request
// (Fetch asks for its first message alone), and it returns none when the next message is
// larger than maxBytes: the next Fetch returns that one. Its guarantees are Fetch's.
func (s *Source) FetchAvailable(ctx context.Context, max, maxBytes int) ([]Msg, error) {
	return s.fetch(ctx, max, maxBytes, 0, true)
}

// fetch is Fetch, or with available FetchAvailable.
func (s *Source) fetch(ctx context.Context, max, maxBytes int, wait time.Duration, available bool) ([]Msg, error) {
	if max < 1 {
		max = 1
	}
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	if s.failed != nil {
		return nil, s.failed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.needRewind {
		// An earlier rewind after a gap failed (the server was likely unreachable): try
		// again before fetching anything, so nothing after the gap is returned first.
		rctx, cancel := context.WithTimeout(ctx, RewindTimeout)
		err := s.rewind(rctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w (consumer %s on %s: rewinding: %v; will retry)", ErrDeliveryGap, s.durable, s.stream, err)
		}
		s.needRewind = false
	}
	var out []Msg
	used := 0            // bytes of Data in out
	single := !available // the next request is for one message without a byte bound
	for first := true; ; first = false {
		req := pullRequest{Batch: 1, NoWait: true}
		switch {
		case first && wait > 0:
			req = pullRequest{Batch: 1, Expires: wait}
		case single:
		default:
			req.Batch = max - len(out)
			if maxBytes > 0 {
				req.MaxBytes = maxBytes - used
			}
			// Room for what the server counted pending, at once rather than by doubling.
			out = slices.Grow(out, int(min(uint64(req.Batch), s.pending)))
		}
		p, err := startPull(s.nc, s.next, req)
		if err != nil {
			if len(out) > 0 {
				return s.finish(ctx, out, false, nil)
			}
			return nil, fmt.Errorf("natsio: fetching from %s: %w", s.durable, err)
		}
		before := len(out)
		var seen int
		var gap bool
		out, seen, gap, err = s.collect(ctx, p, out)
		p.close()
		if err != nil || gap || ctx.Err() != nil {
			return s.finish(ctx, out, gap, err)
		}
		for _, m := range out[before:] {
			used += len(m.Data)
		}
		if seen == 0 {
			if single || len(out) > 0 || available {
				break // nothing (more) available, or the next message does not fit
			}
			// Only re-deliveries so far, and the next message is larger than maxBytes:
			// it comes alone.
			single = true
			continue
		}
		if len(out) >= max || s.pending == 0 || (maxBytes > 0 && used >= maxBytes) {
			break
		}
		single = false
	}
	return s.finish(ctx, out, false, nil)
}

// collect appends the deliveries of p to out, dropping re-deliveries of messages already
// returned, and returns how many messages it received (re-deliveries included), leaving the
// consumer's pending count after the last of them in s.pending. It reports gap when a
// delivery went missing: the messages from the gap on are not appended. The caller holds
// fetchMu.
func (s *Source) collect(ctx context.Context, p *pull, out []Msg) ([]Msg, int, bool, error) {
	seen := 0
	var ackProxy *nats.Msg
	var proxySeq uint64
	defer func() {
		// A re-delivery of a message the caller asked to acknowledge through a
		// copy it could not be sent with (see Ack): acknowledge this epoch's
		// copy so the server's ack floor moves. It waits for the server, so
		// it is done before the fetcher can rewind again.
		if ackProxy != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RewindTimeout)
			err := ackMsg(actx, s.nc, ackProxy)
			cancel()
			if err == nil {
				s.mu.Lock()
				s.acked = max(s.acked, proxySeq)
				s.mu.Unlock()
			}
		}
	}()
	for {
		m, err := p.next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				// Abandon the pull; what the server still delivers to it shows
				// up as a gap next time and is fetched again.
				return out, seen, false, nil
			}
			return out, seen, false, err
		}
		if m == nil {
			return out, seen, p.lost, nil
		}
		md, err := m.Metadata()
		if err != nil {
			return out, seen, false, fmt.Errorf("natsio: message metadata: %w", err)
		}
		if md.Sequence.Consumer != s.lastDseq+1 {
			p.drain(ctx)
			return out, seen, true, nil
		}
		seen++
		s.lastDseq = md.Sequence.Consumer
		s.pending = md.NumPending
		seq := md.Sequence.Stream
		if seq <= s.last {
			s.mu.Lock()
			if seq <= s.ackWanted && seq > s.acked {
				ackProxy, proxySeq = m, seq
			}
			s.mu.Unlock()
			continue
		}
		s.last = seq
		out = append(out, Msg{Data: m.Data, Subject: m.Subject, Header: m.Header, Sequence: seq, raw: m, epoch: s.epoch})
	}
}

// finish handles a gap (rewind, or fail when rewinding is impossible) and
// shapes Fetch's result.
func (s *Source) finish(ctx context.Context, out []Msg, gap bool, err error) ([]Msg, error) {
	if gap {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RewindTimeout)
		rerr := errors.New("reset unsupported")
		if s.resetable {
			rerr = s.rewind(rctx)
		}
		cancel()
		switch {
		case rerr == nil:
		case s.resetable:
			s.needRewind = true // transient: the next Fetch rewinds first
		default:
			s.failed = fmt.Errorf("%w (consumer %s on %s: %v)", ErrDeliveryGap, s.durable, s.stream, rerr)
		}
	}
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("natsio: fetching from %s: %w", s.durable, err)
	}
	if len(out) == 0 {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return []Msg{}, nil
	}
	return out, nil
}

// Ack acknowledges m and every message before it (AckAll) and waits for the
// server to confirm. It does not wait for a Fetch in progress. Acknowledging a
// message older than one already acknowledged is a no-op. A message fetched
// before a rewind of the consumer cannot be acknowledged directly (its
// delivery numbering is stale), nor can any while a rewind is under way: the
// request is remembered and applied to the message's re-delivery, and a later
// Ack covers it anyway.
func (s *Source) Ack(ctx context.Context, m Msg) error {
	if m.raw == nil {
		return errors.New("natsio: Ack of a message not from a Source")
	}
	s.mu.Lock()
	if m.Sequence <= s.acked {
		s.mu.Unlock()
		return nil
	}
	if m.epoch != s.epoch || s.rewinding {
		s.ackWanted = max(s.ackWanted, m.Sequence)
		s.mu.Unlock()
		return nil
	}
	s.acking++
	s.mu.Unlock()

	err := ackMsg(ctx, s.nc, m.raw)

	s.mu.Lock()
	s.acking--
	if s.acking == 0 {
		s.acksDone.Broadcast()
	}
	if err == nil {
		s.acked = max(s.acked, m.Sequence)
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("natsio: acknowledging %s sequence %d: %w", s.durable, m.Sequence, err)
	}
	return nil
}

// Pending returns the consumer's NumPending: matching messages in the stream
// not delivered yet (the input lag, for status).
func (s *Source) Pending(ctx context.Context) (uint64, error) {
	info, err := s.cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("natsio: consumer %s info: %w", s.durable, err)
	}
	return info.NumPending, nil
}
