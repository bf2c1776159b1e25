package input

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go/jetstream"
)

func publishN(t *testing.T, e *env, subject string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := e.js.Publish(e.ctx, subject, fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

func newInput(t *testing.T, e *env) string {
	t.Helper()
	name, err := natsio.EnsureStream(e.ctx, e.js, natsio.StreamOptions{Name: "IN", Subjects: []string{"in.>"}})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// fetchAll fetches until n messages arrived, in batches of batch.
func fetchAll(t *testing.T, e *env, s *Source, n, batch int) []Msg {
	t.Helper()
	var got []Msg
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < n {
		if time.Now().After(deadline) {
			t.Fatalf("fetched %d of %d", len(got), n)
		}
		ms, err := s.Fetch(e.ctx, batch, 0, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) > batch {
			t.Fatalf("fetched %d > max %d", len(ms), batch)
		}
		got = append(got, ms...)
	}
	return got
}

func checkSeqs(t *testing.T, ms []Msg, first uint64) {
	t.Helper()
	for i, m := range ms {
		if m.Sequence != first+uint64(i) {
			t.Fatalf("message %d has sequence %d, want %d", i, m.Sequence, first+uint64(i))
		}
		if want := fmt.Sprintf("m%d", m.Sequence-1); string(m.Data) != want {
			t.Fatalf("message %d: data %q, want %q", i, m.Data, want)
		}
	}
}

func TestSourceAckAndRestart(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	publishN(t, e, "in.a", 0, 100)

	s, err := NewSource(e.ctx, e.js, stream, "dep", []string{"in.>"})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.Pending(e.ctx); err != nil || p != 100 {
		t.Fatalf("pending %d, %v; want 100", p, err)
	}
	got := fetchAll(t, e, s, 100, 30)
	if len(got) != 100 {
		t.Fatalf("got %d", len(got))
	}
	checkSeqs(t, got, 1)
	// Acknowledge up to 60 (AckAll), leave 61..100 unacknowledged.
	if err := s.Ack(e.ctx, got[59]); err != nil {
		t.Fatal(err)
	}
	// Nothing more to fetch.
	if ms, err := s.Fetch(e.ctx, 10, 0, 50*time.Millisecond); err != nil || len(ms) != 0 {
		t.Fatalf("extra fetch: %d, %v", len(ms), err)
	}

	// Restart: a new Source on the same durable redelivers 61..100 at once.
	s2, err := NewSource(e.ctx, e.js, stream, "dep", []string{"in.>"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	again := fetchAll(t, e, s2, 40, 100)
	if len(again) != 40 {
		t.Fatalf("redelivered %d, want 40", len(again))
	}
	checkSeqs(t, again, 61)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("redelivery took %s (waited for AckWait?)", d)
	}
	if err := s2.Ack(e.ctx, again[len(again)-1]); err != nil {
		t.Fatal(err)
	}
	// New messages continue after the acknowledged ones.
	publishN(t, e, "in.b", 100, 5)
	more := fetchAll(t, e, s2, 5, 100)
	checkSeqs(t, more, 101)
	if err := s2.Ack(e.ctx, more[4]); err != nil {
		t.Fatal(err)
	}
	s3, err := NewSource(e.ctx, e.js, stream, "dep", []string{"in.>"})
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := s3.Fetch(e.ctx, 100, 0, 100*time.Millisecond); err != nil || len(ms) != 0 {
		t.Fatalf("after acking everything a restart fetched %d, %v", len(ms), err)
	}
	if p, err := s3.Pending(e.ctx); err != nil || p != 0 {
		t.Fatalf("pending %d, %v", p, err)
	}
}

func TestSourceFetchTimeout(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	s, err := NewSource(e.ctx, e.js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ms, err := s.Fetch(e.ctx, 100, 0, 100*time.Millisecond)
	if err != nil || ms == nil || len(ms) != 0 {
		t.Fatalf("Fetch on empty stream: %v, %v", ms, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("empty fetch took %s", d)
	}
	// A message published while Fetch waits is returned without waiting the whole time.
	go func() {
		time.Sleep(100 * time.Millisecond)
		_, _ = e.js.Publish(context.Background(), "in.x", []byte("m0"))
	}()
	start = time.Now()
	ms, err = s.Fetch(e.ctx, 100, 0, 3*time.Second)
	if err != nil || len(ms) != 1 {
		t.Fatalf("Fetch while publishing: %d, %v", len(ms), err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("fetch returned after %s, should return soon after the first message", d)
	}
	// A cancelled context ends the wait.
	ctx, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := s.Fetch(ctx, 10, 0, 5*time.Second); err == nil {
		t.Fatal("no error after ctx ended")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("cancelled fetch took %s", d)
	}
}

func TestSourceFilter(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	publishN(t, e, "in.a", 0, 3)
	publishN(t, e, "in.b", 3, 3)
	publishN(t, e, "in.c", 6, 3)
	s, err := NewSource(e.ctx, e.js, stream, "dep", []string{"in.a", "in.c"})
	if err != nil {
		t.Fatal(err)
	}
	got := fetchAll(t, e, s, 6, 100)
	for _, m := range got {
		if m.Subject == "in.b" {
			t.Fatalf("filtered subject delivered: %+v", m)
		}
	}
	if len(got) != 6 {
		t.Fatalf("got %d", len(got))
	}
	if err := s.Ack(e.ctx, got[len(got)-1]); err != nil {
		t.Fatal(err)
	}
	// Changing the subjects updates the consumer and keeps its position.
	for _, subjects := range [][]string{{"in.b"}, {"in.a", "in.b", "in.c"}} {
		s2, err := NewSource(e.ctx, e.js, stream, "dep", subjects)
		if err != nil {
			t.Fatalf("updating filter to %v: %v", subjects, err)
		}
		publishN(t, e, "in.b", 9, 1)
		ms := fetchAll(t, e, s2, 1, 100)
		if ms[0].Subject != "in.b" || len(ms) != 1 {
			t.Fatalf("after filter change to %v: %+v", subjects, ms)
		}
		if err := s2.Ack(e.ctx, ms[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// A delivery the Source never saw (here: taken by another client of the same
// consumer) must not be lost: the Source rewinds and fetches it again.
func TestSourceDeliveryGap(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	publishN(t, e, "in.a", 0, 20)
	s, err := NewSource(e.ctx, e.js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	first := fetchAll(t, e, s, 5, 5)
	checkSeqs(t, first, 1)

	// Steal deliveries 6..10.
	cons, err := e.js.Consumer(e.ctx, stream, "dep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.FetchNoWait(5)
	if err != nil {
		t.Fatal(err)
	}
	stolen := 0
	for range b.Messages() {
		stolen++
	}
	if stolen != 5 {
		t.Fatalf("stole %d", stolen)
	}

	rest := fetchAll(t, e, s, 15, 100)
	checkSeqs(t, rest, 6)
	if err := s.Ack(e.ctx, rest[len(rest)-1]); err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != 20 || info.NumAckPending != 0 {
		t.Fatalf("ack floor %d, ack pending %d", info.AckFloor.Stream, info.NumAckPending)
	}
}

// An Ack of a message fetched before a rewind (its delivery numbering is stale) is not sent
// as it is: it is remembered and applied to the message's re-delivery.
func TestSourceAckAcrossRewind(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	publishN(t, e, "in.a", 0, 10)
	s, err := NewSource(e.ctx, e.js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fetchAll(t, e, s, 5, 5)
	cons, err := e.js.Consumer(e.ctx, stream, "dep")
	if err != nil {
		t.Fatal(err)
	}
	// Another client takes delivery 6: the next Fetch sees the gap at 7, returns nothing
	// after it and rewinds the consumer to its ack floor.
	b, err := cons.FetchNoWait(1)
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	if ms, err := s.Fetch(e.ctx, 100, 0, 0); err != nil || len(ms) != 0 {
		t.Fatalf("fetch across the gap: %d messages, %v", len(ms), err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	if err := s.Ack(ctx, got[4]); err != nil { // a copy from before the rewind
		t.Fatal(err)
	}
	if floor, _ := ackState(t, e, cons); floor != 0 {
		t.Fatalf("after the Ack of a stale copy: ack floor %d; want it not sent", floor)
	}
	// The re-deliveries of 1..5 are dropped, and 5's acknowledges it.
	rest := fetchAll(t, e, s, 5, 100)
	checkSeqs(t, rest, 6)
	if floor, _ := ackState(t, e, cons); floor != 5 {
		t.Fatalf("after the re-delivery: ack floor %d; want 5", floor)
	}
	if err := s.Ack(e.ctx, rest[4]); err != nil {
		t.Fatal(err)
	}
	if floor, pending := ackState(t, e, cons); floor != 10 || pending != 0 {
		t.Fatalf("ack floor %d, ack pending %d", floor, pending)
	}
}

// ackState returns the consumer's ack floor (a stream sequence) and its count of messages
// delivered and not acknowledged.
func ackState(t *testing.T, e *env, cons jetstream.Consumer) (floor uint64, pending int) {
	t.Helper()
	info, err := cons.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.AckFloor.Stream, info.NumAckPending
}

// An Ack does not wait for a Fetch that waits for input: while a Fetch with a long max wait
// is in progress on an empty stream, acknowledging an earlier message reaches the server.
func TestSourceAckDuringFetch(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	publishN(t, e, "in.a", 0, 3)
	s, err := NewSource(e.ctx, e.js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fetchAll(t, e, s, 3, 10)
	cons, err := e.js.Consumer(e.ctx, stream, "dep")
	if err != nil {
		t.Fatal(err)
	}

	const fetchWait = 5 * time.Second
	type fetched struct {
		msgs []Msg
		err  error
	}
	fetchDone := make(chan fetched, 1)
	go func() {
		ms, err := s.Fetch(e.ctx, 10, 0, fetchWait)
		fetchDone <- fetched{ms, err}
	}()
	eventually(t, 2*time.Second, "the fetch's pull request waiting on the server", func() bool {
		info, err := cons.Info(e.ctx)
		return err == nil && info.NumWaiting > 0
	})
	start := time.Now()
	acked := make(chan error, 1)
	go func() { acked <- s.Ack(e.ctx, got[2]) }()
	// Well below the fetch's wait: an Ack queued behind the fetch would take fetchWait.
	eventually(t, fetchWait/4, "the ack floor to reach 3 while the fetch waits", func() bool {
		info, err := cons.Info(e.ctx)
		return err == nil && info.AckFloor.Stream == 3
	})
	select {
	case err := <-acked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(fetchWait / 4):
		t.Fatal("Ack did not return while the fetch waited")
	}
	select {
	case f := <-fetchDone:
		t.Fatalf("the fetch ended after %s, before any new input (%d msgs, %v): the test proves nothing", time.Since(start), len(f.msgs), f.err)
	default:
	}
	// The fetch still works: a new message ends it.
	publishN(t, e, "in.a", 3, 1)
	f := <-fetchDone
	if f.err != nil {
		t.Fatal(f.err)
	}
	checkSeqs(t, f.msgs, 4)
}

// Acknowledging on one goroutine while another fetches, with deliveries taken by another
// client now and then (gaps, so the Source rewinds while acknowledgements are in flight):
// every message comes once, in order, and the ack floor ends at the last one.
func TestSourceConcurrentAckAndRewinds(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	const n = 2000
	for i := range n {
		if _, err := e.js.PublishAsync("in.a", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-e.ctx.Done():
		t.Fatal("publishing timed out")
	}
	s, err := NewSource(e.ctx, e.js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := e.js.Consumer(e.ctx, stream, "dep")
	if err != nil {
		t.Fatal(err)
	}

	toAck := make(chan Msg, 64)
	ackErr := make(chan error, 1)
	go func() {
		var first error
		for m := range toAck {
			if err := s.Ack(e.ctx, m); err != nil && first == nil {
				first = err
			}
		}
		ackErr <- first
	}()
	var got []Msg
	stolen := 0
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; len(got) < n; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("fetched %d of %d", len(got), n)
		}
		if i%4 == 3 {
			// Another client takes a delivery: the next Fetch sees a gap and rewinds while
			// the acknowledging goroutine has acknowledgements in flight.
			b, err := cons.FetchNoWait(1)
			if err != nil {
				t.Fatal(err)
			}
			for range b.Messages() {
				stolen++
			}
		}
		ms, err := s.Fetch(e.ctx, 50, 0, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
		if len(ms) > 0 {
			toAck <- ms[len(ms)-1]
		}
	}
	if stolen == 0 {
		t.Fatal("no delivery was stolen: the test proves nothing")
	}
	close(toAck)
	if err := <-ackErr; err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, got, 1)
	// An Ack of a copy from before a rewind is applied to its re-delivery: keep fetching,
	// as a runner does, until the server's ack floor is at the end.
	eventually(t, 10*time.Second, "the ack floor at the last message", func() bool {
		ms, err := s.Fetch(e.ctx, 50, 0, 20*time.Millisecond)
		if err != nil || len(ms) != 0 {
			t.Fatalf("fetch after the end: %d messages, %v", len(ms), err)
		}
		info, err := cons.Info(e.ctx)
		return err == nil && info.AckFloor.Stream == n
	})
}

// A gap found while the server is still delivering to the same pull request: the Source
// must not rewind before that request is over, or the server hands the re-deliveries to it,
// nobody reads them and no later delivery shows the gap (they would come back only after
// SourceAckWait).
func TestSourceGapDuringDelivery(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	const n = 5000
	for i := range n + 5 {
		if _, err := e.js.PublishAsync("in.a", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-e.ctx.Done():
		t.Fatal("publishing timed out")
	}
	s, err := NewSource(e.ctx, e.js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, fetchAll(t, e, s, 5, 5), 1)
	cons, err := e.js.Consumer(e.ctx, stream, "dep")
	if err != nil {
		t.Fatal(err)
	}
	// Another client takes delivery 6; the Source asks for everything at once and sees the
	// gap at the first message of a long delivery.
	b, err := cons.FetchNoWait(1)
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	checkSeqs(t, fetchAll(t, e, s, n, 2*n), 6)
}

// TestSourceBeforeRewind: a NewSource whose BeforeRewind fails leaves the consumer as it was
// (another Source reading it goes on undisturbed); one whose BeforeRewind passes rewinds it.
func TestSourceBeforeRewind(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	publishN(t, e, "in.a", 0, 10)
	reader, err := NewSource(e.ctx, e.js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	checkSeqs(t, fetchAll(t, e, reader, 10, 10), 1) // delivered, not acknowledged

	refused := errors.New("not held")
	calls := 0
	_, err = NewSource(e.ctx, e.js, stream, "dep", nil, BeforeRewind(func(context.Context) error {
		calls++
		return refused
	}))
	if !errors.Is(err, refused) || calls != 1 {
		t.Fatalf("NewSource with a failing BeforeRewind: %v after %d calls; want the hook's error after 1", err, calls)
	}
	info, err := reader.cons.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Stream != 10 {
		t.Fatalf("the consumer's delivered stream sequence is %d after a refused open; want 10 (not rewound)", info.Delivered.Stream)
	}
	publishN(t, e, "in.a", 10, 5)
	checkSeqs(t, fetchAll(t, e, reader, 5, 10), 11) // the first reader goes on without a gap

	calls = 0
	again, err := NewSource(e.ctx, e.js, stream, "dep", nil, BeforeRewind(func(context.Context) error {
		calls++
		return nil
	}))
	if err != nil || calls != 1 {
		t.Fatalf("NewSource with a passing BeforeRewind: %v after %d calls", err, calls)
	}
	checkSeqs(t, fetchAll(t, e, again, 15, 20), 1) // rewound to the ack floor: all again
}
