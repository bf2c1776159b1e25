package input

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// publishSized publishes one message a size in sizes to in.x, each sizes[i] bytes long and
// starting with "i|", so that order and content can be checked.
func publishSized(t *testing.T, e *env, sizes []int) {
	t.Helper()
	for i, n := range sizes {
		data := fmt.Appendf(nil, "%d|", i)
		if len(data) > n {
			t.Fatalf("message %d: size %d is too small for its index", i, n)
		}
		data = append(data, bytes.Repeat([]byte{'x'}, n-len(data))...)
		if _, err := e.js.Publish(e.ctx, "in.x", data); err != nil {
			t.Fatal(err)
		}
	}
}

// waitPending waits until consumer c on stream counts n messages pending: the server counts
// a message stored a moment ago a moment later, and Fetch takes what it counts.
func waitPending(t *testing.T, e *env, stream string, n uint64) {
	t.Helper()
	cons, err := e.js.Consumer(e.ctx, stream, "c")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, fmt.Sprintf("%d messages pending", n), func() bool {
		info, err := cons.Info(e.ctx)
		return err == nil && info.NumPending == n
	})
}

// repeatSize returns n sizes of size bytes.
func repeatSize(n, size int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = size
	}
	return s
}

// TestSourceFetchMaxBytes: one Fetch returns at most maxBytes bytes of Data, or a single
// message when the first one alone is larger (it is still delivered: no stall), and at most
// max messages; every message comes once, in order. The server counts a message with its
// subject and reply subject (~80 bytes here), so the groups below leave room for that.
func TestSourceFetchMaxBytes(t *testing.T) {
	tests := []struct {
		name          string
		sizes         []int
		max, maxBytes int
		groups        []int // the number of messages of each Fetch, when exact
		minPerFetch   int   // else each Fetch but the last returns at least this many
	}{
		{name: "bytes bind before rows", sizes: repeatSize(60, 1000), max: 100, maxBytes: 10_000, minPerFetch: 7},
		{name: "rows bind before bytes", sizes: repeatSize(20, 100), max: 7, maxBytes: 1 << 20, groups: []int{7, 7, 6}},
		{name: "no byte bound", sizes: repeatSize(50, 1000), max: 20, maxBytes: 0, groups: []int{20, 20, 10}},
		{name: "all available in one", sizes: repeatSize(3, 100), max: 100, maxBytes: 1 << 20, groups: []int{3}},
		{name: "a larger message comes alone", sizes: []int{100, 100, 5000, 100, 100}, max: 10, maxBytes: 1000, groups: []int{2, 1, 2}},
		{name: "first message larger than the bound", sizes: []int{5000, 100}, max: 10, maxBytes: 1000, groups: []int{1, 1}},
		{name: "every message larger than the bound", sizes: repeatSize(3, 3000), max: 10, maxBytes: 1000, groups: []int{1, 1, 1}},
		{name: "exactly the bound", sizes: repeatSize(4, 1000), max: 10, maxBytes: 1000, groups: []int{1, 1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			stream := newInput(t, e)
			s, err := NewSource(e.ctx, e.js, stream, "c", nil)
			if err != nil {
				t.Fatal(err)
			}
			publishSized(t, e, tc.sizes)
			waitPending(t, e, stream, uint64(len(tc.sizes)))
			var groups []int
			next := 0
			for next < len(tc.sizes) {
				// Everything is there: a Fetch that waits for its wait has stalled.
				const wait = 10 * time.Second
				start := time.Now()
				ms, err := s.Fetch(e.ctx, tc.max, tc.maxBytes, wait)
				if err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d > wait/2 {
					t.Fatalf("Fetch %d took %v with messages available", len(groups)+1, d)
				}
				if len(ms) == 0 {
					t.Fatalf("Fetch %d returned nothing with message %d (%d bytes) available", len(groups)+1, next, tc.sizes[next])
				}
				if len(ms) > tc.max {
					t.Fatalf("Fetch %d returned %d messages, max %d", len(groups)+1, len(ms), tc.max)
				}
				total := 0
				for _, m := range ms {
					total += len(m.Data)
					if i, _, _ := bytes.Cut(m.Data, []byte("|")); string(i) != strconv.Itoa(next) || len(m.Data) != tc.sizes[next] {
						t.Fatalf("Fetch %d: message %.10q... (%d bytes), want message %d of %d bytes", len(groups)+1, m.Data, len(m.Data), next, tc.sizes[next])
					}
					next++
				}
				if tc.maxBytes > 0 && total > tc.maxBytes && len(ms) > 1 {
					t.Fatalf("Fetch %d returned %d messages of %d bytes, more than the bound %d", len(groups)+1, len(ms), total, tc.maxBytes)
				}
				groups = append(groups, len(ms))
			}
			if tc.groups != nil && fmt.Sprint(groups) != fmt.Sprint(tc.groups) {
				t.Fatalf("fetches returned %v messages, want %v", groups, tc.groups)
			}
			for i, n := range groups[:len(groups)-1] {
				if n < tc.minPerFetch {
					t.Fatalf("Fetch %d returned %d messages, want at least %d (all: %v)", i+1, n, tc.minPerFetch, groups)
				}
			}
			if ms, err := s.Fetch(e.ctx, tc.max, tc.maxBytes, 0); err != nil || len(ms) != 0 {
				t.Fatalf("a Fetch after all: %d messages, %v", len(ms), err)
			}
		})
	}
}

// TestSourceFetchMaxBytesAfterRewind: after a gap the consumer re-delivers what the Source
// returned already; those copies are dropped and do not count against the bound, and a
// message larger than the bound behind them still comes, alone.
func TestSourceFetchMaxBytesAfterRewind(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	s, err := NewSource(e.ctx, e.js, stream, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	publishSized(t, e, []int{100, 100, 5000, 100})
	waitPending(t, e, stream, 4)
	const wait = 5 * time.Second // each Fetch has messages: it returns at once
	if ms, err := s.Fetch(e.ctx, 2, 1000, wait); err != nil || len(ms) != 2 {
		t.Fatalf("first Fetch: %d messages, %v; want 2", len(ms), err)
	}
	// Another client takes the next delivery: the Source's next Fetch sees the gap and
	// rewinds the consumer to its ack floor (nothing acknowledged: all comes again).
	cons, err := e.js.Consumer(e.ctx, stream, "c")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.FetchNoWait(1)
	if err != nil {
		t.Fatal(err)
	}
	for range b.Messages() {
	}
	if ms, err := s.Fetch(e.ctx, 10, 1000, 0); err != nil || len(ms) != 0 {
		t.Fatalf("Fetch across the gap: %d messages, %v; want none", len(ms), err)
	}
	// The Fetch after a rewind may see a gap again and rewind once more (the server's reset
	// answer can count a delivery the client never sees): it returns nothing then.
	for i, want := range []int{2, 3} {
		var ms []Msg
		eventually(t, 5*time.Second, "a Fetch returning a message", func() bool {
			ms, err = s.Fetch(e.ctx, 10, 1000, wait)
			return err != nil || len(ms) > 0
		})
		if err != nil || len(ms) != 1 || ms[0].Sequence != uint64(want+1) {
			t.Fatalf("Fetch %d after the rewind: %d messages, %v; want message %d alone", i+1, len(ms), err, want)
		}
	}
}

// TestServerMaxBytesLeavesLargerMessage pins the server's behaviour that Fetch works around:
// a pull request whose max_bytes is below the next message's size ends at once with nothing
// (the server answers 409 Message Size Exceeds MaxBytes, which nats.go turns into an empty
// batch without an error) and leaves the message to the next request. A consumer that only
// sent such requests would stall on it.
func TestServerMaxBytesLeavesLargerMessage(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	if _, err := NewSource(e.ctx, e.js, stream, "c", nil); err != nil {
		t.Fatal(err)
	}
	publishSized(t, e, []int{5000})
	waitPending(t, e, stream, 1)
	cons, err := e.js.Consumer(e.ctx, stream, "c")
	if err != nil {
		t.Fatal(err)
	}
	const wait = 10 * time.Second
	start := time.Now()
	b, err := cons.Fetch(10, jetstream.FetchMaxBytes(1000), jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range b.Messages() {
		n++
	}
	if n != 0 || b.Error() != nil || time.Since(start) > wait/2 {
		t.Fatalf("a request of max_bytes 1000 for a 5000-byte message: %d messages, error %v, after %v; want none at once", n, b.Error(), time.Since(start))
	}
	b, err = cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatal(err)
	}
	for m := range b.Messages() {
		if len(m.Data()) == 5000 {
			return
		}
	}
	t.Fatalf("the message was not left for the next request (%v)", b.Error())
}

// TestSourceFetchAvailable: FetchAvailable returns what is there at once, within max and
// maxBytes, nothing when nothing is (without waiting), and leaves a message larger than
// maxBytes to the next Fetch, which returns it alone; every message comes once, in order.
func TestSourceFetchAvailable(t *testing.T) {
	e := newEnv(t)
	stream := newInput(t, e)
	s, err := NewSource(e.ctx, e.js, stream, "c", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ms, err := s.FetchAvailable(e.ctx, 10, 1000); err != nil || len(ms) != 0 {
		t.Fatalf("nothing available: %d messages, %v", len(ms), err)
	}
	publishSized(t, e, []int{100, 100, 100, 100, 5000, 100})
	waitPending(t, e, stream, 6)
	next := 0
	take := func(what string, ms []Msg, err error, want int) {
		t.Helper()
		if err != nil || len(ms) != want {
			t.Fatalf("%s: %d messages, %v; want %d", what, len(ms), err, want)
		}
		for _, m := range ms {
			if i, _, _ := bytes.Cut(m.Data, []byte("|")); string(i) != strconv.Itoa(next) {
				t.Fatalf("%s: message %.10q..., want message %d", what, m.Data, next)
			}
			next++
		}
	}
	ms, err := s.FetchAvailable(e.ctx, 3, 1<<20)
	take("max 3", ms, err, 3)
	ms, err = s.FetchAvailable(e.ctx, 10, 1000)
	take("up to the larger message", ms, err, 1)
	ms, err = s.FetchAvailable(e.ctx, 10, 1000)
	take("the larger message next", ms, err, 0)
	ms, err = s.Fetch(e.ctx, 10, 1000, 0)
	take("Fetch after it", ms, err, 1)
	ms, err = s.FetchAvailable(e.ctx, 10, 1000)
	take("the rest", ms, err, 1)
}
