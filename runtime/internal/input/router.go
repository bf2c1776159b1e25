package input

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// The partition router reads a deployment's input once and republishes every row into the
// deployment's partitioned stream ([PartitionedStream]), on the subject of the row's
// partition ([PartitionSubject]), so that the runner of each partition reads only its rows.
//
// Exactly once. The router is the only writer of the partitioned stream, and the stream
// itself says how far routing got: every routed message carries the input sequence of its
// row ([RoutedSeqHeader]), so the header of the stream's last message is the position H of
// the input routed so far, and the stream's last sequence L is what the next publish must
// expect. The rules:
//
//   - Every publish expects the stream's last sequence (Nats-Expected-Last-Sequence). A
//     batch of rows is published asynchronously, message i expecting L+i: when one is
//     refused or lost, every later one is refused too (wrong last sequence), so the stream
//     never has a hole followed by later rows.
//   - Once every publish of the batch has its outcome, the input is acknowledged (AckAll, in
//     the background) up to a row that is stored, never further: the highest message of the
//     batch the stream acknowledged. A message stored at L+i+1 means the stream holds L+i+1
//     messages without a hole, so every earlier row of the batch is stored too (by this
//     router or by another).
//   - At start, and after any failed publish, the router reads the stream's last sequence L
//     and the message there, takes its header as H, skips (and acknowledges) the input rows
//     at or before H, and publishes the rest expecting L again.
//
// Why this is enough: by induction the message at every position is the input row after
// the one at the position before (in the order of the filtered input), because a message
// expecting L+i carries the i-th row after H, and H is what position L holds. A router that
// crashed after storing rows but before acknowledging them gets them again from its consumer
// and skips them; two routers running at once (a zombie and its successor) race for the
// same positions with the same rows, and whichever message lands at a position carries the
// row that belongs there, the other one is refused. A stale publish (a retry nats.go sends
// after the router gave up on it) is as harmless, for the same reason. So no row is stored
// twice and none is lost.
//
// That needs the rows a publish puts after H to be the input rows that follow H (those the
// consumer's filter selects). The router does not take its consumer's word for it: a fetch
// whose sequences are not H+1, H+2, ... is checked against the input stream (the sequences
// of its matching rows after H, headers only), and a fetch that skipped rows is dropped and
// the consumer rewound (see [Router.verify]: another client pulling from the same consumer
// can make the [Source] skip rows). The router never fetches again before every row of a
// fetch is stored or skipped, except when Run ends; the next Run rewinds the consumer first.
//
// Limits: a message of the partitioned stream removed by its max_age or a purge is gone
// with its header. When the stream's last message is gone the router resumes after the
// input consumer's ack floor, so rows stored but not yet acknowledged at that moment (a
// router that crashed and stayed down for max_age) would be routed again. Input rows removed
// before they are routed (the input's max_age) are not routed; when that happens while two
// routers run, the row after one of them may be left out too (the two disagree on what
// follows). Changing the input subjects applies from the router's position on.
//
// A row whose key cannot be read (not valid JSON, not an object, no key field, a key that is
// not a string or a number) is routed to partition 0 unchanged: the engine of partition 0
// dead-letters it with its own reason, so such rows are not lost and not rejected twice.

// Headers on every message of the partitioned stream.
const (
	// RoutedSeqHeader is the input stream sequence of the row (decimal).
	RoutedSeqHeader = "Gs-Input-Seq"
	// RoutedSubjectHeader is the subject the row was published on in the input (the
	// runner gives it to the handler as the row's subject).
	RoutedSubjectHeader = "Gs-Subject"
)

// Router defaults.
const (
	// DefaultRouterMaxRows is the most rows one fetch of the router takes.
	DefaultRouterMaxRows = 10000
	// DefaultRouterMaxBytes is the most bytes of rows one fetch of the router takes.
	DefaultRouterMaxBytes = 16 << 20
	// MinRouterWait is the shortest wait of a router's fetch for a first row: the wait ends
	// as soon as a row arrives, so a longer one costs no latency, and an idle router asks
	// the server for input every MinRouterWait rather than every trigger interval.
	MinRouterWait = 2 * time.Second
)

// routerWindow is the most routed messages awaiting an acknowledgement at once.
const routerWindow = 1024

// routeAckTimeout is how long the router waits for the acknowledgement of one routed
// message before treating it as unknown (it re-reads the stream then).
const routeAckTimeout = output.PublishAckTimeout

// settleTimeout bounds the wait of a Run whose ctx ended for the outcomes of the messages
// it sent, and for the acknowledgement of the rows stored.
const settleTimeout = 2 * time.Second

// Router backoff after an error: from backoffMin doubling to backoffMax.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// expectHeaderRoom is what the expected-last-sequence header adds to a message on the wire.
const expectHeaderRoom = len(jetstream.ExpectedLastSeqHeader) + len(": 18446744073709551615\r\n")

// Router errors.
var (
	// ErrRouterOptions is returned by [NewRouter] for invalid [RouterOptions].
	ErrRouterOptions = errors.New("natsio: invalid router options")
	// ErrRouterRunning is returned by [Router.Run] while another Run of the same Router is
	// under way.
	ErrRouterRunning = errors.New("natsio: router already running")
	// ErrRowTooLarge is returned by [Router.Run] when a row with the router's headers is
	// larger than the server's max_payload: it cannot be routed, and the router stops at it
	// rather than lose it.
	ErrRowTooLarge = errors.New("natsio: row too large to route")
	// ErrNotRouted is returned by [Router.Run] when the partitioned stream's last message
	// has no valid [RoutedSeqHeader] (someone other than a router wrote it): the router
	// cannot tell where routing got to.
	ErrNotRouted = errors.New("natsio: partitioned stream's last message was not routed")
)

// errInputSkipped is returned by [Router.verify] when a fetch is not the input rows that
// follow the router's position: the Source skipped rows.
var errInputSkipped = errors.New("natsio: the input consumer skipped rows")

// errRouteUnanswered is the outcome of a routed message whose acknowledgement did not come
// in time (or was not awaited any more): it may or may not be stored.
var errRouteUnanswered = errors.New("natsio: routed message not acknowledged in time")

// EnsurePartitionedStream creates or updates deployment's partitioned stream
// ([PartitionedStream]) for the router: subjects "gs.kg.<deployment>.*", file storage, limits
// retention, discard old, max_age maxAge (0: none), and replicas copies ([natsio.DefaultReplicas]
// when 0) when it creates the stream; an existing stream keeps its replicas and storage, and
// gets the subjects, max_age and discard policy above. A stream that sources the input (made
// by [EnsureSourcedPartitionedStream]) is refused with [ErrPartitionMode]. The stream needs no
// duplicate window: routed messages carry no message id (the expected last sequence keeps
// them unique).
func EnsurePartitionedStream(ctx context.Context, js jetstream.JetStream, deployment string, replicas int, maxAge time.Duration) error {
	name := topology.PartitionedStream(deployment)
	subjects := []string{topology.PartitionPrefix(deployment) + "*"}
	cfg := jetstream.StreamConfig{
		Name:        name,
		Description: "groupstate partitioned input of " + deployment,
		Subjects:    subjects,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      maxAge,
		Replicas:    natsio.ReplicasFor(js, replicas),
	}
	return ensurePartitioned(ctx, js, cfg, func(old *jetstream.StreamConfig) (bool, error) {
		if len(old.Sources) > 0 {
			return false, fmt.Errorf("%w: %s sources the input, split by the server (the deployment was first deployed with key.subject_token); deploy under a new name", ErrPartitionMode, name)
		}
		if len(old.Subjects) == 1 && old.Subjects[0] == subjects[0] && old.MaxAge == maxAge && old.Discard == jetstream.DiscardOld {
			return false, nil
		}
		old.Subjects, old.MaxAge, old.Discard = subjects, maxAge, jetstream.DiscardOld
		old.Duplicates = natsio.CapDuplicates(old.Duplicates, maxAge)
		return true, nil
	})
}

// RouterOptions configure [NewRouter].
type RouterOptions struct {
	// Deployment names the deployment, whose partitioned stream the router writes. Required.
	Deployment string
	// InputStream is the name of the input stream. Required.
	InputStream string
	// InputSubjects filter the router's consumer (empty: the whole stream).
	InputSubjects []string
	// Key is the path of the key field. Required.
	Key rowjson.Path
	// Partitions is the number of partitions, from 1 to [partition.Max].
	Partitions int
	// MaxRows and MaxBytes bound one fetch: [DefaultRouterMaxRows] and
	// [DefaultRouterMaxBytes] when 0 or less.
	MaxRows, MaxBytes int
	// Wait is how long a fetch waits for a first row, at least [MinRouterWait].
	Wait time.Duration
	// Logger receives the router's warnings (slog.Default() when nil).
	Logger *slog.Logger
}

// check validates o and fills in its defaults.
func (o *RouterOptions) check() error {
	switch {
	case o.Deployment == "":
		return fmt.Errorf("%w: no deployment", ErrRouterOptions)
	case o.InputStream == "":
		return fmt.Errorf("%w: no input stream", ErrRouterOptions)
	case len(o.Key) == 0:
		return fmt.Errorf("%w: no key field", ErrRouterOptions)
	}
	if err := partition.CheckCount(o.Partitions); err != nil {
		return fmt.Errorf("%w: %w", ErrRouterOptions, err)
	}
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultRouterMaxRows
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultRouterMaxBytes
	}
	o.Wait = max(o.Wait, MinRouterWait)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// RouterStats are a router's counters since [NewRouter].
type RouterStats struct {
	// Routed counts the rows this router stored in the partitioned stream, as the stream
	// confirmed (a store whose confirmation Run did not wait for, as it ended, is not counted:
	// the next router counts it as skipped).
	Routed uint64
	// Skipped counts the rows it acknowledged without storing them: routed already (by an
	// earlier router that had not acknowledged them, or by another router at the same time).
	Skipped uint64
	// LastInput is the input sequence of the last row known routed (by any router): the
	// header of the partitioned stream's last message as the router last knew it.
	LastInput uint64
}

// Router routes a deployment's input into its partitioned stream (see the comment at the
// top of router.go for its guarantees). [Router.Run] must not be called twice at once;
// [Router.Stats] is safe for concurrent use.
type Router struct {
	js     jetstream.JetStream
	o      RouterOptions
	src    *Source
	stream string
	subj   []string // partition subjects, by partition

	running atomic.Bool
	routed  atomic.Uint64
	skipped atomic.Uint64
	lastIn  atomic.Uint64

	// Owned by Run:
	h, l   uint64 // the last input sequence routed and the stream's last sequence
	dirty  bool   // a fetch's rows are not all stored or skipped
	acks   *acker // Run's
	keyBuf []byte
}

// NewRouter opens the router's durable consumer [RouterConsumerName] on o.InputStream (a
// [Source], filtered to o.InputSubjects). The partitioned stream must exist
// ([EnsurePartitionedStream]).
func NewRouter(ctx context.Context, js jetstream.JetStream, o RouterOptions) (*Router, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	name := topology.PartitionedStream(o.Deployment)
	if _, err := js.Stream(ctx, name); err != nil {
		return nil, fmt.Errorf("natsio: router of %s: partitioned stream %s: %w", o.Deployment, name, err)
	}
	src, err := openSource(ctx, js, o)
	if err != nil {
		return nil, err
	}
	subj := make([]string, o.Partitions)
	for p := range subj {
		subj[p] = topology.PartitionSubject(o.Deployment, p)
	}
	return &Router{
		js: js, o: o, src: src, stream: name, subj: subj,
	}, nil
}

// openSource opens the router's [Source], each attempt bounded by [RewindTimeout] and
// retried until ctx ends: on a cluster the consumer reset that opening a Source makes can go
// unanswered (the new consumer's leader had just moved; only the leader answers), and the
// Source would wait for as long as ctx lasts (seen about once in fifteen fresh 3-node
// clusters with nats-server v2.15.2; the next attempt is answered at once).
func openSource(ctx context.Context, js jetstream.JetStream, o RouterOptions) (*Source, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, RewindTimeout)
		src, err := NewSource(actx, js, o.InputStream, topology.RouterConsumer(o.Deployment), o.InputSubjects)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return src, err
		}
		o.Logger.Warn("router: opening the input consumer timed out; retrying", "deployment", o.Deployment, "err", err)
	}
}

// Stats returns the router's counters. Safe for concurrent use.
func (r *Router) Stats() RouterStats {
	return RouterStats{Routed: r.routed.Load(), Skipped: r.skipped.Load(), LastInput: r.lastIn.Load()}
}

// Run routes the input until ctx ends, one fetch (o.MaxRows, o.MaxBytes) at a time. When
// ctx ends it sends nothing more, waits up to [settleTimeout] for the outcomes of what it
// sent, and acknowledges the rows stored, so that a router started after Run returned
// rarely meets one of its messages landing late (which would be harmless, only slower). It
// returns nil when ctx ended, or the error that stopped it: the input consumer or a stream
// gone ([Gone] tells: ensure them and make a new Router), [ErrNotRouted], [ErrRowTooLarge].
// Other errors (timeouts, a cluster electing a leader, [ErrDeliveryGap]) are logged at warn
// and retried with backoff; a publish refused because another router wrote first makes it
// resume from the stream at once.
func (r *Router) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return ErrRouterRunning
	}
	defer r.running.Store(false)
	r.acks = r.startAcker(ctx)
	defer r.acks.stop()
	err := r.restart(ctx)
	if err == nil {
		err = r.resync(ctx)
	}
	var b backoff
	for err == nil {
		var msgs []Msg
		msgs, err = r.src.Fetch(ctx, r.o.MaxRows, r.o.MaxBytes, r.o.Wait)
		r.dirty = r.dirty || len(msgs) > 0 // until route handled them all
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !Gone(err):
			r.o.Logger.Warn("router: fetching input failed; retrying", "deployment", r.o.Deployment, "err", err, "backoff", b.next())
			err = b.wait(ctx)
			continue
		case err != nil:
			return fmt.Errorf("natsio: router of %s: %w", r.o.Deployment, err)
		}
		b.reset()
		if err = r.route(ctx, msgs); errors.Is(err, errInputSkipped) {
			r.o.Logger.Warn("router: the input consumer skipped rows (another client pulling from it?); rewinding it",
				"deployment", r.o.Deployment, "err", err)
			err = r.restart(ctx) // the fetch's rows are dropped: dirty
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// restart rewinds the input consumer to its ack floor (or to the row after r.h when that is
// lower) when a fetch's rows were left neither stored nor skipped: when an earlier Run ended
// in the middle of a fetch, or the fetch failed [Router.verify]. The Source would go on after
// those rows, and a publish of later rows right after the stream's last one would leave them
// out.
func (r *Router) restart(ctx context.Context) error {
	var b backoff
	for r.dirty {
		err := r.rewind(ctx)
		switch {
		case err == nil:
			r.dirty = false
		case ctx.Err() != nil:
			return ctx.Err()
		case Gone(err):
			return fmt.Errorf("natsio: router of %s: %w", r.o.Deployment, err)
		default:
			r.o.Logger.Warn("router: rewinding the input consumer failed; retrying", "deployment", r.o.Deployment, "err", err, "backoff", b.next())
			if err := b.wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// rewind is one attempt of restart, bounded by [RewindTimeout] (see [openSource]).
func (r *Router) rewind(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, RewindTimeout)
	defer cancel()
	floor, err := r.src.AckFloor(ctx)
	if err != nil {
		return err
	}
	return r.src.Rewind(ctx, min(floor, r.h)+1)
}

// route stores msgs (one fetch) in the partitioned stream and acknowledges them, resuming
// from the stream after every failed publish, until all are stored or skipped.
func (r *Router) route(ctx context.Context, msgs []Msg) error {
	var b backoff
	for {
		msgs = r.skip(msgs)
		if len(msgs) == 0 {
			r.dirty = false
			return nil
		}
		if err := r.verify(ctx, msgs); err != nil {
			if errors.Is(err, errInputSkipped) || ctx.Err() != nil {
				return err
			}
			r.o.Logger.Warn("router: checking the input failed; retrying", "deployment", r.o.Deployment, "err", err, "backoff", b.next())
			if err := b.wait(ctx); err != nil {
				return err
			}
			continue
		}
		stored, err := r.publish(ctx, msgs)
		if stored > 0 {
			r.ack(msgs[stored-1])
		}
		switch {
		case err == nil:
			r.dirty = false
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrRowTooLarge):
			return err
		case natsio.WrongLastSequence(err):
			r.o.Logger.Info("router: another router wrote the partitioned stream; resuming from it", "deployment", r.o.Deployment, "err", err)
		default:
			r.o.Logger.Warn("router: publishing failed; resuming from the partitioned stream", "deployment", r.o.Deployment, "err", err, "backoff", b.next())
			if err := b.wait(ctx); err != nil {
				return err
			}
		}
		msgs = msgs[stored:]
		if err := r.resync(ctx); err != nil {
			return err
		}
	}
}

// skip acknowledges the leading rows of msgs at or before r.h (routed already) and returns
// the rest.
func (r *Router) skip(msgs []Msg) []Msg {
	n := 0
	for n < len(msgs) && msgs[n].Sequence <= r.h {
		n++
	}
	if n > 0 {
		r.skipped.Add(uint64(n))
		r.ack(msgs[n-1])
	}
	return msgs[n:]
}

// ack has m and every row before it acknowledged, by Run's [acker].
func (r *Router) ack(m Msg) { r.acks.ack(m) }

// acker acknowledges input rows in the background for Run, so that routing does not wait
// for the server's confirmations. A row asked for replaces an earlier one not sent yet (an
// acknowledgement covers every row before it).
type acker struct {
	src  *Source
	log  *slog.Logger
	next chan Msg // the latest row to acknowledge; capacity 1
	done chan struct{}
}

// startAcker starts r's acker for a Run with ctx.
func (r *Router) startAcker(ctx context.Context) *acker {
	a := &acker{src: r.src, log: r.o.Logger.With("deployment", r.o.Deployment), next: make(chan Msg, 1), done: make(chan struct{})}
	go a.run(context.WithoutCancel(ctx))
	return a
}

// ack asks for m and every row before it to be acknowledged. Only one goroutine may call it.
func (a *acker) ack(m Msg) {
	select {
	case <-a.next: // superseded
	default:
	}
	a.next <- m
}

// stop waits for the acknowledgements asked for, and ends the acker.
func (a *acker) stop() {
	close(a.next)
	<-a.done
}

// run acknowledges the rows asked for, even once Run's ctx ended (the rows are stored),
// waiting at most [settleTimeout] for each confirmation: the server never answers an
// acknowledgement at or above the consumer's next delivery, as one is after another client
// reset the consumer below it. A failure is only logged: the rows come again to the next
// router, which skips them, and a later acknowledgement covers them anyway.
func (a *acker) run(ctx context.Context) {
	defer close(a.done)
	for m := range a.next {
		actx, cancel := context.WithTimeout(ctx, settleTimeout)
		if err := a.src.Ack(actx, m); err != nil {
			a.log.Warn("router: acknowledging input failed", "seq", m.Sequence, "err", err)
		}
		cancel()
	}
}

// verify checks that msgs (all after r.h, in increasing order) are exactly the input rows the
// router's filter selects after r.h, up to the last of them, and returns [errInputSkipped]
// when they are not. Rows with the sequences r.h+1, r.h+2, ... are (there is no room for
// another); otherwise the sequences of the input stream's matching rows from r.h+1 on are
// read (headers only) and compared.
//
// The Source returns consecutive rows on its own, except when another client pulls from its
// consumer at the same time (a zombie router): a consumer reset numbers deliveries from 1
// again and the consumer info in the reset's answer may count deliveries made to the other
// client meanwhile, so the Source can take a delivery that follows someone else's for the
// one that follows its own (nats-server v2.15.2). Publishing such a fetch after the stream's
// last row would leave the rows between out for good.
func (r *Router) verify(ctx context.Context, msgs []Msg) error {
	want := r.h + 1
	for i := range msgs {
		if msgs[i].Sequence != want+uint64(i) {
			return r.verifyRead(ctx, msgs)
		}
	}
	return nil
}

// verifyRead is [Router.verify] for rows that are not contiguous: it reads the sequences of
// the matching input rows after r.h and compares them with those of msgs.
func (r *Router) verifyRead(ctx context.Context, msgs []Msg) error {
	last := msgs[len(msgs)-1].Sequence
	seqs, err := r.inputSeqs(ctx, r.h+1, last, len(msgs)+1)
	if err != nil {
		return fmt.Errorf("natsio: router of %s: reading input sequences %d to %d: %w", r.o.Deployment, r.h+1, last, err)
	}
	for i := range msgs {
		if i >= len(seqs) || seqs[i] != msgs[i].Sequence {
			missing := r.h + 1
			if i < len(seqs) {
				missing = seqs[i]
			}
			return fmt.Errorf("%w: fetched input sequence %d after %d, the input has %d", errInputSkipped, msgs[i].Sequence, r.h, missing)
		}
	}
	if len(seqs) > len(msgs) && seqs[len(msgs)] <= last {
		return fmt.Errorf("%w: the input has %d before %d", errInputSkipped, seqs[len(msgs)], last)
	}
	return nil
}

// inputSeqs returns the stream sequences of the input rows matching the router's filter from
// sequence from on, up to the first above to, at most max of them and none after the input's
// last, read with an ordered consumer that delivers headers only.
func (r *Router) inputSeqs(ctx context.Context, from, to uint64, max int) ([]uint64, error) {
	cons, err := r.js.OrderedConsumer(ctx, r.o.InputStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: r.o.InputSubjects,
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
		HeadersOnly:    true,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		// As Changelog.orderedRead: a stopped ordered consumer stays on the server for its
		// inactive threshold otherwise.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), natsio.ResolveTimeout)
		defer cancel()
		_ = r.js.DeleteConsumer(dctx, r.o.InputStream, cons.CachedInfo().Name)
	}()
	if cons.CachedInfo().NumPending == 0 {
		return nil, nil
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	rctx, cancel := context.WithTimeout(ctx, routeAckTimeout)
	defer cancel()
	var seqs []uint64
	for len(seqs) < max {
		m, err := it.Next(jetstream.NextContext(rctx))
		if err != nil {
			return nil, err
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		seqs = append(seqs, md.Sequence.Stream)
		if md.Sequence.Stream > to || md.NumPending == 0 {
			break
		}
	}
	return seqs, nil
}

// publish publishes msgs, message i expecting r.l+i, at most [routerWindow] awaiting an
// acknowledgement at once, and waits for their outcomes. It returns how many leading rows of
// msgs are stored (up to the last message acknowledged) and the first error; on success it
// moves r.h and r.l past msgs.
func (r *Router) publish(ctx context.Context, msgs []Msg) (int, error) {
	futs := make([]jetstream.PubAckFuture, 0, len(msgs))
	a := batchAcks{last: -1, blocking: true}
	var err error
	for i := range msgs {
		if len(futs)-a.next >= routerWindow {
			a.await(ctx, futs[a.next])
		}
		if a.err != nil {
			break // every later message would be refused
		}
		if err = ctx.Err(); err != nil {
			break
		}
		var m *nats.Msg
		if m, err = r.message(&msgs[i]); err != nil {
			break
		}
		var f jetstream.PubAckFuture
		f, err = r.js.PublishMsgAsync(m, jetstream.WithExpectLastSequence(r.l+uint64(i)), jetstream.WithStallWait(output.PublishStallWait))
		if err != nil {
			err = fmt.Errorf("natsio: routing input sequence %d: %w", msgs[i].Sequence, err)
			break
		}
		futs = append(futs, f)
	}
	for a.next < len(futs) {
		a.await(ctx, futs[a.next])
	}
	stored := a.last + 1
	r.routed.Add(uint64(a.ok))
	r.skipped.Add(uint64(stored - a.ok)) // refused, but stored by another router
	if a.err == nil && err == nil {
		r.h, r.l = msgs[len(msgs)-1].Sequence, a.ack.Sequence
		r.lastIn.Store(r.h)
		return stored, nil
	}
	if a.err != nil {
		return stored, a.err // the first outcome of the batch's own: it explains the rest
	}
	return stored, err
}

// message is the routed message of m: on its partition's subject, with its data and the
// routed headers.
func (r *Router) message(m *Msg) (*nats.Msg, error) {
	h := make(nats.Header, 3)
	h.Set(RoutedSeqHeader, strconv.FormatUint(m.Sequence, 10))
	h.Set(RoutedSubjectHeader, m.Subject)
	out := &nats.Msg{Subject: r.subj[r.partitionOf(m.Data)], Data: m.Data, Header: h}
	if limit := r.js.Conn().MaxPayload(); limit > 0 && int64(output.WireSize(out)+expectHeaderRoom) > limit {
		return nil, fmt.Errorf("%w: input sequence %d is %d bytes with its headers, over the server's max_payload of %d", ErrRowTooLarge, m.Sequence, output.WireSize(out)+expectHeaderRoom, limit)
	}
	return out, nil
}

// partitionOf returns the partition of row's key, or 0 when the key cannot be read (the
// engine of partition 0 dead-letters the row).
func (r *Router) partitionOf(row []byte) int {
	if rowjson.Validate(row) != nil {
		return 0
	}
	tok, err := rowjson.Lookup(row, r.o.Key)
	if err != nil {
		return 0
	}
	key, err := rowjson.AppendCanonicalKey(r.keyBuf[:0], tok)
	r.keyBuf = key[:0]
	if err != nil {
		return 0
	}
	return partition.Of(key, r.o.Partitions)
}

// resync reads the router's position from the partitioned stream (see [Router.position]),
// retrying with backoff while that fails for a reason that may pass.
func (r *Router) resync(ctx context.Context) error {
	var b backoff
	for {
		err := r.position(ctx)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrNotRouted), errors.Is(err, jetstream.ErrStreamNotFound):
			return fmt.Errorf("natsio: router of %s: %w", r.o.Deployment, err)
		}
		r.o.Logger.Warn("router: reading the partitioned stream failed; retrying", "deployment", r.o.Deployment, "err", err, "backoff", b.next())
		if err := b.wait(ctx); err != nil {
			return err
		}
	}
}

// position sets r.l to the partitioned stream's last sequence and r.h to the input sequence
// of the message there (0 for an empty stream), both read from the stream's leader. When
// that message is gone, r.h is the input consumer's ack floor.
func (r *Router) position(ctx context.Context) error {
	st, err := r.js.Stream(ctx, r.stream)
	if err != nil {
		return fmt.Errorf("natsio: partitioned stream %s: %w", r.stream, err)
	}
	l := st.CachedInfo().State.LastSeq
	var h uint64
	if l > 0 {
		last, found, err := natsio.LeaderGet(ctx, r.js, r.stream, natsio.MsgGetRequest{Seq: l})
		if err != nil {
			return fmt.Errorf("natsio: partitioned stream %s: reading message %d: %w", r.stream, l, err)
		}
		if found {
			if h, err = strconv.ParseUint(last.Header.Get(RoutedSeqHeader), 10, 64); err != nil {
				return fmt.Errorf("%w: %s sequence %d: header %s %q", ErrNotRouted, r.stream, l, RoutedSeqHeader, last.Header.Get(RoutedSeqHeader))
			}
		} else {
			// Gone (max_age, a purge): every row up to the ack floor is stored, at least.
			if h, err = r.src.AckFloor(ctx); err != nil {
				return err
			}
			r.o.Logger.Warn("router: the partitioned stream's last message is gone (max_age or a purge); resuming after the input consumer's ack floor",
				"deployment", r.o.Deployment, "stream", r.stream, "seq", l, "ack_floor", h)
		}
	}
	r.h, r.l = h, l
	r.lastIn.Store(h)
	return nil
}

// batchAcks collects the outcomes of a batch's publishes, in order.
type batchAcks struct {
	next     int // the index of the next future to await
	last     int // the index of the last message acknowledged, -1 for none
	ok       int // how many were acknowledged
	ack      *jetstream.PubAck
	err      error     // the first failure
	blocking bool      // false once a wait timed out: only answers already in count
	settle   time.Time // when ctx ended, the end of the wait for the rest
}

// await records the outcome of f, the next future. It waits up to [routeAckTimeout]; once
// ctx ended, up to [settleTimeout] for all the futures of the batch together.
func (a *batchAcks) await(ctx context.Context, f jetstream.PubAckFuture) {
	i := a.next
	a.next++
	for {
		select {
		case ack := <-f.Ok():
			a.acked(i, ack)
			return
		case err := <-f.Err():
			a.fail(err)
			return
		default:
		}
		if !a.blocking {
			a.fail(errRouteUnanswered)
			return
		}
		done, wait := ctx.Done(), routeAckTimeout
		if ctx.Err() != nil {
			if a.settle.IsZero() {
				a.settle = time.Now().Add(settleTimeout)
			}
			done, wait = nil, time.Until(a.settle)
		}
		if a.wait(f, i, done, wait) {
			return
		}
	}
}

// wait waits up to d for f, the future of message i, and tells whether it has its outcome
// (or is given up on); it returns false when done is closed first.
func (a *batchAcks) wait(f jetstream.PubAckFuture, i int, done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case ack := <-f.Ok():
		a.acked(i, ack)
	case err := <-f.Err():
		a.fail(err)
	case <-t.C:
		a.blocking = false
		a.fail(errRouteUnanswered)
	case <-done:
		return false
	}
	return true
}

// acked records that message i is stored, with ack.
func (a *batchAcks) acked(i int, ack *jetstream.PubAck) {
	a.last, a.ack = i, ack
	a.ok++
}

// fail records a message not known stored; the first error is kept.
func (a *batchAcks) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// backoff is the router's wait after an error: backoffMin, doubling up to backoffMax.
type backoff struct{ d time.Duration }

// next returns the wait that [backoff.wait] will make.
func (b *backoff) next() time.Duration {
	if b.d == 0 {
		return backoffMin
	}
	return b.d
}

// wait waits for the next backoff, or until ctx ends (then it returns ctx's error), and
// doubles it.
func (b *backoff) wait(ctx context.Context) error {
	d := b.next()
	b.d = min(2*d, backoffMax)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reset makes the next wait backoffMin again.
func (b *backoff) reset() { b.d = 0 }
