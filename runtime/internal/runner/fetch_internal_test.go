package runner

import (
	"context"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/spec"
)

// TestBatchTakesRowsArrivedMeanwhile: a batch takes the rows available when it starts
// (spec.TriggerSpec). Under a steady flow the prefetch's fetch ends with the first rows that
// arrive while the loop runs a batch; the rows that arrive after them must come in the next
// batch too, not wait for the one after it. Without the top-up (the prefetch before it, and
// still a shadow's, whose manifests are not latency-bound) the next batch takes the first row
// alone.
func TestBatchTakesRowsArrivedMeanwhile(t *testing.T) {
	for _, topUp := range []bool{true, false} {
		name := map[bool]string{true: "top-up", false: "without"}[topUp]
		t.Run(name, func(t *testing.T) {
			want := 6
			if !topUp {
				want = 1
			}
			if got := rowsOfNextBatch(t, topUp); got != want {
				t.Fatalf("the next batch took %d rows, want %d: the first one, fetched while a batch ran, and the 5 that arrived after it", got, want)
			}
		})
	}
}

// rowsOfNextBatch has a live source's prefetch (topUp: with its top-up) fetch a first row
// while the loop is busy, publishes 5 more, and returns how many rows the loop then takes.
func rowsOfNextBatch(t *testing.T, topUp bool) int {
	j := startInput(t)
	ctx := context.Background()
	src, err := input.NewSource(ctx, j.JS, "IN", "d", nil)
	testutil.Require(t, err)
	sp, err := spec.ParseSpec([]byte("name: d\nkey: {field: k}\n"))
	testutil.Require(t, err)
	r := &Runner{unit: unit{spec: sp, logger: testutil.DiscardLogger()}, control: control{drainReq: make(chan chan drainResult)}}
	r.src = src
	l := &liveSource{feed: feed{r: r, poll: 5 * time.Second, topUp: topUp}}
	l.start(ctx)
	t.Cleanup(l.close)
	publish := func(n int) {
		for range n {
			_, err := j.JS.Publish(ctx, "in.x", []byte(`{"k":1}`))
			testutil.Require(t, err)
		}
	}
	publish(1)
	// The fetcher holds the first row once its fetch ended: it waits for the loop to ask.
	deadline := time.Now().Add(10 * time.Second)
	for !l.f.holding.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the prefetch did not fetch the first row")
		}
		time.Sleep(time.Millisecond)
	}
	publish(5)
	backoff := time.Second
	ev, msgs, _ := l.wait(ctx, &backoff, nil)
	if ev != gotRows {
		t.Fatalf("wait: event %d, want rows", ev)
	}
	return len(msgs)
}

// TestAckInBackground: once a batch committed, the loop goes on without waiting for the
// server to confirm the acknowledgement of its input (here the server is down, so the answer
// cannot come), and the source acknowledges what the next batch committed all the same
// before it closes.
func TestAckInBackground(t *testing.T) {
	j := startInput(t)
	ctx := context.Background()
	for range 3 {
		_, err := j.JS.Publish(ctx, "in.x", []byte(`{"k":1}`))
		testutil.Require(t, err)
	}
	src, err := input.NewSource(ctx, j.JS, "IN", "d", nil)
	testutil.Require(t, err)
	msgs, err := src.Fetch(ctx, 3, 1<<20, time.Second)
	testutil.Require(t, err)
	if len(msgs) != 3 {
		t.Fatalf("fetched %d, want 3", len(msgs))
	}
	sp, err := spec.ParseSpec([]byte("name: d\nkey: {field: k}\n"))
	testutil.Require(t, err)
	r := &Runner{unit: unit{spec: sp, logger: testutil.DiscardLogger()}}
	r.src = src
	l := &liveSource{feed: feed{r: r}}
	l.fetched, l.last = msgs, &msgs[1] // as next did with a batch of the first 2 rows
	l.rest = msgs[2:]

	j.Stop()
	l.committed(ctx, &engine.BatchReport{})
	l.acks.mu.Lock()
	waiting := l.acks.asked || l.acks.sending
	l.acks.mu.Unlock()
	if !waiting {
		t.Fatal("committed returned after the acknowledgement was answered, with the server down")
	}
	j.Start(t)
	// The server is back: the next batch's acknowledgement goes out once the first one's
	// ended (its request may have been lost with the server), and the source flushes it as
	// it closes.
	testutil.EventuallyWithin(t, 10*time.Second, "the consumer answers again", func() bool {
		_, err := src.AckFloor(ctx)
		return err == nil
	})
	l.last = &msgs[2]
	l.committed(ctx, &engine.BatchReport{})
	l.close()
	floor, err := src.AckFloor(ctx)
	testutil.Require(t, err)
	if floor != msgs[2].Sequence {
		t.Fatalf("ack floor %d once the source closed, want %d", floor, msgs[2].Sequence)
	}
}
