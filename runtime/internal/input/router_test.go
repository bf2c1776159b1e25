package input

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// Router test parameters: rows over keys, routed into partitions.
const (
	rtDeployment = "dep"
	rtRows       = 2000
	rtKeys       = 100
	rtPartitions = 8
)

// rtEnv is an input stream and a partitioned stream on a server or cluster.
type rtEnv struct {
	js       jetstream.JetStream
	ctx      context.Context
	input    string
	subjects map[uint64]string // input sequence -> the subject its row was published on
	data     map[uint64]string // input sequence -> its row
	last     uint64            // the input sequence of the last row
	// noise makes publishRows publish a message on other.x, which the router does not read
	// (see filtered), before every row.
	noise bool
}

// newRouterEnv creates the input stream IN ("in.>" and "other.>") and the partitioned
// stream, with replicas.
func newRouterEnv(t *testing.T, js jetstream.JetStream, replicas int) *rtEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	name, err := natsio.EnsureStream(ctx, js, natsio.StreamOptions{Name: "IN", Subjects: []string{"in.>", "other.>"}, Replicas: replicas})
	testutil.Require(t, err)
	testutil.Require(t, EnsurePartitionedStream(ctx, js, rtDeployment, replicas, 0))
	return &rtEnv{js: js, ctx: ctx, input: name, subjects: map[uint64]string{}, data: map[uint64]string{}}
}

// userRow is the row of input row i: one of rtKeys users.
func userRow(i int) string {
	return fmt.Sprintf(`{"user_id":"u%d","i":%d}`, i%rtKeys, i)
}

// publishRows publishes rows (alternately on in.a and in.b) and records their sequences.
func (e *rtEnv) publishRows(t *testing.T, rows []string) {
	t.Helper()
	futs := make([]jetstream.PubAckFuture, 0, 2*len(rows))
	subjects := make([]string, 0, 2*len(rows))
	data := make([]string, 0, 2*len(rows))
	for i, row := range rows {
		if e.noise {
			subjects, data = append(subjects, "other.x"), append(data, row)
		}
		subjects, data = append(subjects, "in."+string(rune('a'+i%2))), append(data, row)
	}
	for i := range subjects {
		f, err := e.js.PublishAsync(subjects[i], []byte(data[i]), jetstream.WithStallWait(5*time.Second))
		testutil.Require(t, err)
		futs = append(futs, f)
	}
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			if subjects[i] != "other.x" {
				e.subjects[ack.Sequence], e.data[ack.Sequence] = subjects[i], data[i]
				e.last = max(e.last, ack.Sequence)
			}
		case err := <-f.Err():
			t.Fatalf("publishing row %d: %v", i, err)
		case <-e.ctx.Done():
			t.Fatal(e.ctx.Err())
		}
	}
}

// publishUsers publishes rows from to from+n-1 of userRow.
func (e *rtEnv) publishUsers(t *testing.T, from, n int) {
	t.Helper()
	rows := make([]string, n)
	for i := range rows {
		rows[i] = userRow(from + i)
	}
	e.publishRows(t, rows)
}

// options are the router's options: the whole input, or in.> only with noise.
func (e *rtEnv) options() RouterOptions {
	o := RouterOptions{
		Deployment: rtDeployment, InputStream: e.input, Key: rowjson.Path{"user_id"}, Partitions: rtPartitions,
		Wait: 100 * time.Millisecond, Logger: testutil.DiscardLogger(),
	}
	if e.noise {
		o.InputSubjects = []string{"in.>"}
	}
	return o
}

func (e *rtEnv) newRouter(t *testing.T, o RouterOptions) *Router {
	t.Helper()
	r, err := NewRouter(e.ctx, e.js, o)
	testutil.Require(t, err)
	return r
}

// run runs r in a goroutine; the function returned stops it and returns Run's error.
func (e *rtEnv) run(r *Router) (stop func() error) {
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// stopOK stops a router started by run and fails the test when Run failed.
func stopOK(t *testing.T, stop func() error) {
	t.Helper()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// routedCount is the number of messages in the partitioned stream.
func (e *rtEnv) routedCount(t *testing.T) uint64 {
	t.Helper()
	st, err := e.js.Stream(e.ctx, topology.PartitionedStream(rtDeployment))
	testutil.Require(t, err)
	return st.CachedInfo().State.Msgs
}

// waitRouted waits until the partitioned stream holds n messages.
func (e *rtEnv) waitRouted(t *testing.T, n int) {
	t.Helper()
	testutil.EventuallyWithin(t, 20*time.Second, fmt.Sprintf("%d routed messages", n), func() bool {
		return e.routedCount(t) >= uint64(n)
	})
}

// routedMsg is one message of the partitioned stream.
type routedMsg struct {
	seq     uint64 // its sequence in the partitioned stream
	subject string
	header  nats.Header
	data    string
}

// readRouted reads the whole partitioned stream, in order.
func (e *rtEnv) readRouted(t *testing.T) []routedMsg {
	t.Helper()
	var out []routedMsg
	testutil.EventuallyWithin(t, 10*time.Second, "the partitioned stream read", func() bool {
		var err error
		out, err = e.tryReadRouted()
		if err != nil {
			t.Logf("reading the partitioned stream: %v; again", err) // a cluster's new consumer not ready
		}
		return err == nil
	})
	return out
}

func (e *rtEnv) tryReadRouted() ([]routedMsg, error) {
	name := topology.PartitionedStream(rtDeployment)
	st, err := e.js.Stream(e.ctx, name)
	if err != nil {
		return nil, err
	}
	total := st.CachedInfo().State.Msgs
	cons, err := e.js.OrderedConsumer(e.ctx, name, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	out := make([]routedMsg, 0, total)
	for uint64(len(out)) < total {
		batch, err := cons.Fetch(int(total)-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			out = append(out, routedMsg{seq: md.Sequence.Stream, subject: m.Subject(), header: m.Headers(), data: string(m.Data())})
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkRouted checks that the partitioned stream holds every input row exactly once, in
// input order, on its key's partition subject, with its input sequence and subject.
func (e *rtEnv) checkRouted(t *testing.T) {
	t.Helper()
	msgs := e.readRouted(t)
	if len(msgs) != len(e.data) {
		t.Errorf("%d routed messages for %d input rows", len(msgs), len(e.data))
	}
	seen := make(map[uint64]bool, len(msgs))
	var prev uint64
	for _, m := range msgs {
		in, err := strconv.ParseUint(m.header.Get(RoutedSeqHeader), 10, 64)
		if err != nil {
			t.Fatalf("message %d: %s %q", m.seq, RoutedSeqHeader, m.header.Get(RoutedSeqHeader))
		}
		if seen[in] {
			t.Fatalf("message %d: input sequence %d routed twice", m.seq, in)
		}
		seen[in] = true
		if in <= prev {
			t.Fatalf("message %d: input sequence %d after %d (out of input order)", m.seq, in, prev)
		}
		prev = in
		row, ok := e.data[in]
		if !ok || m.data != row {
			t.Fatalf("message %d: input sequence %d has data %q, want %q", m.seq, in, m.data, row)
		}
		if got, want := m.header.Get(RoutedSubjectHeader), e.subjects[in]; got != want {
			t.Fatalf("message %d: %s %q, want %q", m.seq, RoutedSubjectHeader, got, want)
		}
		if want := topology.PartitionSubject(rtDeployment, userPartition(t, row)); m.subject != want {
			t.Fatalf("message %d (%s) on %s, want %s", m.seq, row, m.subject, want)
		}
	}
	for in := range e.data {
		if !seen[in] {
			t.Errorf("input sequence %d was not routed", in)
		}
	}
}

// userPartition is the partition of a userRow, from its key's text.
func userPartition(t *testing.T, row string) int {
	t.Helper()
	tok, err := rowjson.Lookup([]byte(row), rowjson.Path{"user_id"})
	testutil.Require(t, err)
	var user string
	testutil.Require(t, json.Unmarshal(tok, &user))
	return partition.OfText([]byte(user), rtPartitions)
}

// storeUnacked does what a router that crashed after publishing and before acknowledging
// did: a new router stores the rows of its first fetch (up to max rows) that are not stored
// yet and acknowledges none. It returns the router and how many rows it stored.
func (e *rtEnv) storeUnacked(t *testing.T, o RouterOptions, max int) (*Router, int) {
	t.Helper()
	r := e.newRouter(t, o)
	testutil.Require(t, r.resync(e.ctx))
	msgs, err := r.src.Fetch(e.ctx, max, 0, time.Second)
	testutil.Require(t, err)
	for len(msgs) > 0 && msgs[0].Sequence <= r.h {
		msgs = msgs[1:] // stored already; a crashed router acknowledged nothing
	}
	stored, err := r.publish(e.ctx, msgs)
	testutil.Require(t, err)
	if stored != len(msgs) || len(msgs) == 0 {
		t.Fatalf("stored %d of %d rows", stored, len(msgs))
	}
	return r, stored
}

// waitAcked waits until r's input consumer has acknowledged every row.
func (e *rtEnv) waitAcked(t *testing.T, r *Router) {
	t.Helper()
	testutil.EventuallyWithin(t, 10*time.Second, "every input row acknowledged", func() bool {
		floor, err := r.src.AckFloor(e.ctx) // an error (a cluster electing a leader): ask again
		return err == nil && floor == e.last
	})
}

// TestRouterRoutes: every row lands once, in order, on its key's partition, on a server and
// on a 3-node cluster (R3 streams), from a whole stream or a filtered one.
func TestRouterRoutes(t *testing.T) {
	server := func(t *testing.T) jetstream.JetStream { return testutil.StartJetStream(t).JS }
	cluster := func(t *testing.T) jetstream.JetStream { return testutil.StartCluster(t, 3).JetStream(t) }
	for _, tc := range []struct {
		name     string
		replicas int
		js       func(t *testing.T) jetstream.JetStream
		noise    bool // the router reads in.> of a stream that has other.> rows in between
	}{
		{"server", 1, server, false},
		{"server, filtered input", 1, server, true},
		{"cluster", 3, cluster, false},
		{"cluster, filtered input", 3, cluster, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRouterEnv(t, tc.js(t), tc.replicas)
			e.noise = tc.noise
			e.publishUsers(t, 0, rtRows/2) // waiting before the router starts
			r := e.newRouter(t, e.options())
			stop := e.run(r)
			e.publishUsers(t, rtRows/2, rtRows/2) // arriving while it runs
			e.waitRouted(t, rtRows)
			e.waitAcked(t, r)
			stopOK(t, stop)
			e.checkRouted(t)
			if got, want := r.Stats(), (RouterStats{Routed: rtRows, LastInput: e.last}); got != want {
				t.Errorf("stats %+v, want %+v", got, want)
			}
			testutil.EventuallyWithin(t, 10*time.Second, "no input pending", func() bool {
				pending, err := r.src.Pending(e.ctx)
				return err == nil && pending == 0
			})
		})
	}
}

// TestRouterRestart: a router stopped midway, or one that crashed after storing rows without
// acknowledging them, is followed by a new one that routes the rest exactly once.
func TestRouterRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first runs routers over part of the input and returns their stats, added up, and
		// how many rows the next router must skip (-1: not known).
		first func(t *testing.T, e *rtEnv, o RouterOptions) (RouterStats, int)
	}{
		{"stopped", func(t *testing.T, e *rtEnv, o RouterOptions) (RouterStats, int) {
			return runPart(t, e, o), -1
		}},
		{"crashed before acknowledging", func(t *testing.T, e *rtEnv, o RouterOptions) (RouterStats, int) {
			s := runPart(t, e, o)
			before := e.routedCount(t)
			r, n := e.storeUnacked(t, o, 300)
			if got := e.routedCount(t); got != before+uint64(n) {
				t.Fatalf("%d routed messages, want %d+%d", got, before, n)
			}
			s.Routed += r.Stats().Routed
			s.Skipped += r.Stats().Skipped
			return s, n
		}},
		{"run again", func(t *testing.T, e *rtEnv, o RouterOptions) (RouterStats, int) {
			// Run ended mid-fetch and is called again on the same Router: it rewinds.
			r := e.newRouter(t, o)
			for e.routedCount(t) < rtRows/2 {
				testutil.Require(t, e.runUntil(t, r, rtRows/8))
			}
			return r.Stats(), -1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRouterEnv(t, testutil.StartJetStream(t).JS, 1)
			e.publishUsers(t, 0, rtRows)
			o := e.options()
			o.MaxRows = 20 // many fetches, so that the stop comes midway
			before, skip := tc.first(t, e, o)

			r := e.newRouter(t, o)
			stop := e.run(r)
			e.waitRouted(t, rtRows)
			e.waitAcked(t, r)
			stopOK(t, stop)
			e.checkRouted(t)
			s := r.Stats()
			if skip >= 0 && s.Skipped != uint64(skip) {
				t.Errorf("the last router skipped %d rows, want %d", s.Skipped, skip)
			}
			// Every row is counted once as routed, by the router that saw its store
			// confirmed, and as skipped by every router that found it stored (a stop can
			// leave stores unconfirmed).
			routed, handled := before.Routed+s.Routed, before.Routed+before.Skipped+s.Routed+s.Skipped
			if routed > rtRows || handled < rtRows || s.LastInput != rtRows {
				t.Errorf("before %+v, then %+v; want %d rows in all", before, s, rtRows)
			}
		})
	}
}

// runPart runs a router until it stored a quarter of the input, stops it, and returns its
// stats.
func runPart(t *testing.T, e *rtEnv, o RouterOptions) RouterStats {
	t.Helper()
	r := e.newRouter(t, o)
	testutil.Require(t, e.runUntil(t, r, rtRows/4))
	if n := e.routedCount(t); n == rtRows {
		t.Logf("the router routed all %d rows before it was stopped", n)
	}
	return r.Stats()
}

// runUntil runs r until the partitioned stream holds at least n more messages (or all the
// input), then stops it and returns Run's error.
func (e *rtEnv) runUntil(t *testing.T, r *Router, n uint64) error {
	t.Helper()
	want := min(e.routedCount(t)+n, uint64(len(e.data)))
	stop := e.run(r)
	testutil.EventuallyWithin(t, 20*time.Second, fmt.Sprintf("%d routed messages", want), func() bool {
		return e.routedCount(t) >= want
	})
	return stop()
}

// TestRouterZombie: two routers running at once, sharing the consumer (a router that did
// not know it was replaced) or each with its own (both route every row), store each row once.
func TestRouterZombie(t *testing.T) {
	server := func(t *testing.T) (jetstream.JetStream, int) { return testutil.StartJetStream(t).JS, 1 }
	cluster := func(t *testing.T) (jetstream.JetStream, int) { return testutil.StartCluster(t, 3).JetStream(t), 3 }
	for _, tc := range []struct {
		name     string
		js       func(t *testing.T) (jetstream.JetStream, int)
		separate bool // the second router reads the input with a consumer of its own
		noise    bool // filtered input, as in TestRouterRoutes
	}{
		{"shared consumer", server, false, false},
		{"shared consumer, filtered input", server, false, true},
		{"separate consumers", server, true, false},
		{"shared consumer, cluster", cluster, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, replicas := tc.js(t)
			e := newRouterEnv(t, js, replicas)
			e.noise = tc.noise
			e.publishUsers(t, 0, rtRows/2)
			o := e.options()
			o.MaxRows = 50
			r1, r2 := e.newRouter(t, o), e.newRouter(t, o)
			if tc.separate {
				src, err := NewSource(e.ctx, e.js, e.input, "zombie", o.InputSubjects)
				testutil.Require(t, err)
				r2.src = src
			}
			stop1, stop2 := e.run(r1), e.run(r2)
			e.publishUsers(t, rtRows/2, rtRows/2)
			e.waitRouted(t, rtRows)
			testutil.EventuallyWithin(t, 20*time.Second, "both routers done", func() bool {
				s1, s2 := r1.Stats(), r2.Stats()
				done := s1.Routed+s2.Routed == rtRows
				if tc.separate {
					done = done && s1.Routed+s1.Skipped == rtRows && s2.Routed+s2.Skipped == rtRows
				}
				return done
			})
			stopOK(t, stop1)
			stopOK(t, stop2)
			e.checkRouted(t)
			s1, s2 := r1.Stats(), r2.Stats()
			if tc.separate && (s1.Routed == 0 || s2.Routed == 0) {
				t.Logf("one router routed everything: %+v, %+v", s1, s2)
			}
			t.Logf("routers: %+v, %+v", s1, s2)
		})
	}
}

// TestRouterUnreadableKeys: rows whose key cannot be read land unchanged in partition 0;
// keys are partitioned by their canonical text whatever their spelling.
func TestRouterUnreadableKeys(t *testing.T) {
	text := func(s string) int { return partition.OfText([]byte(s), rtPartitions) }
	cases := []struct {
		name, row string
		want      int
	}{
		{"string key", `{"user_id":"u7"}`, text("u7")},
		{"escaped string key", `{"user_id":"\u0075\u0037"}`, text("u7")},
		{"number key", `{"user_id":4.2e1}`, text("42")},
		{"no key field", `{"name":"u3"}`, 0},
		{"null key", `{"user_id":null}`, 0},
		{"object key", `{"user_id":{"id":"u3"}}`, 0},
		{"not JSON", `user_id=u3`, 0},
		{"not an object", `["u3"]`, 0},
		{"not UTF-8", "{\"user_id\":\"u\xff\"}", 0},
		{"empty", ``, 0},
	}
	if text("u7") == 0 || text("42") == 0 {
		t.Fatal("pick keys outside partition 0")
	}
	e := newRouterEnv(t, testutil.StartJetStream(t).JS, 1)
	rows := make([]string, len(cases))
	for i, c := range cases {
		rows[i] = c.row
	}
	e.publishRows(t, rows)
	r := e.newRouter(t, e.options())
	stop := e.run(r)
	e.waitRouted(t, len(cases))
	stopOK(t, stop)
	msgs := e.readRouted(t)
	if len(msgs) != len(cases) {
		t.Fatalf("%d routed messages, want %d", len(msgs), len(cases))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := msgs[i]
			if m.data != c.row {
				t.Errorf("data %q, want %q unchanged", m.data, c.row)
			}
			if want := topology.PartitionSubject(rtDeployment, c.want); m.subject != want {
				t.Errorf("subject %s, want %s", m.subject, want)
			}
		})
	}
}

// TestRouterStats: the counters, read while the router runs, count the rows routed and those
// skipped as stored already; a second Run at once is refused.
func TestRouterStats(t *testing.T) {
	e := newRouterEnv(t, testutil.StartJetStream(t).JS, 1)
	const rows, crashed = 50, 30
	e.publishUsers(t, 0, rows)
	o := e.options()
	if _, n := e.storeUnacked(t, o, crashed); n != crashed {
		t.Fatalf("the crashed router stored %d rows, want %d", n, crashed)
	}

	r := e.newRouter(t, o)
	stop := e.run(r)
	testutil.EventuallyWithin(t, 10*time.Second, "every row routed", func() bool {
		s := r.Stats() // while Run writes them
		return s.Routed+s.Skipped == rows
	})
	if err := r.Run(e.ctx); !errors.Is(err, ErrRouterRunning) {
		t.Errorf("a second Run at once: %v, want %v", err, ErrRouterRunning)
	}
	stopOK(t, stop)
	if got, want := r.Stats(), (RouterStats{Routed: rows - crashed, Skipped: crashed, LastInput: rows}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
	e.checkRouted(t)
}

// TestRouterOptionsRefused: NewRouter refuses incomplete options and a missing stream.
func TestRouterOptionsRefused(t *testing.T) {
	e := newRouterEnv(t, testutil.StartJetStream(t).JS, 1)
	for _, tc := range []struct {
		name   string
		change func(o *RouterOptions)
		want   error
	}{
		{"no deployment", func(o *RouterOptions) { o.Deployment = "" }, ErrRouterOptions},
		{"no input", func(o *RouterOptions) { o.InputStream = "" }, ErrRouterOptions},
		{"no key", func(o *RouterOptions) { o.Key = nil }, ErrRouterOptions},
		{"no partitions", func(o *RouterOptions) { o.Partitions = 0 }, partition.ErrCount},
		{"too many partitions", func(o *RouterOptions) { o.Partitions = partition.Max + 1 }, ErrRouterOptions},
		{"no partitioned stream", func(o *RouterOptions) { o.Deployment = "other" }, jetstream.ErrStreamNotFound},
		{"no input stream", func(o *RouterOptions) { o.InputStream = "NONE" }, jetstream.ErrStreamNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := e.options()
			tc.change(&o)
			if _, err := NewRouter(e.ctx, e.js, o); !errors.Is(err, tc.want) {
				t.Fatalf("NewRouter: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestEnsurePartitionedStream: the stream's configuration, kept in line on an update.
func TestEnsurePartitionedStream(t *testing.T) {
	e := newEnv(t)
	testutil.Require(t, EnsurePartitionedStream(e.ctx, e.js, "logins", 0, time.Hour))
	cfg := streamConfig(t, e, topology.PartitionedStream("logins"))
	if cfg.Name != "GS_LOGINS_KG" || !slices.Equal(cfg.Subjects, []string{"gs.kg.logins.*"}) || cfg.Storage != jetstream.FileStorage ||
		cfg.Retention != jetstream.LimitsPolicy || cfg.Discard != jetstream.DiscardOld || cfg.MaxAge != time.Hour || cfg.Replicas != 1 {
		t.Fatalf("config %+v", cfg)
	}
	if got := topology.PartitionSubject("logins", 7); got != "gs.kg.logins.7" {
		t.Errorf("PartitionSubject: %s", got)
	}
	testutil.Require(t, EnsurePartitionedStream(e.ctx, e.js, "logins", 0, 0))
	if cfg := streamConfig(t, e, topology.PartitionedStream("logins")); cfg.MaxAge != 0 {
		t.Fatalf("max_age %s after an update to none", cfg.MaxAge)
	}
	testutil.Require(t, EnsurePartitionedStream(e.ctx, e.js, "logins", 0, time.Minute))
	if cfg := streamConfig(t, e, topology.PartitionedStream("logins")); cfg.MaxAge != time.Minute || cfg.Duplicates > time.Minute {
		t.Fatalf("max_age %s, duplicates %s after an update to 1m", cfg.MaxAge, cfg.Duplicates)
	}
}

// TestRouterVerify: a fetch is routed only when it is the input rows the router's filter
// selects after its position; one that skipped a row is refused.
func TestRouterVerify(t *testing.T) {
	e := newRouterEnv(t, testutil.StartJetStream(t).JS, 1)
	// Input sequences: 1 in, 2 other, 3 in, 4 in, 5 other, 6 in.
	for _, subj := range []string{"in.a", "other.x", "in.a", "in.b", "other.x", "in.a"} {
		_, err := e.js.Publish(e.ctx, subj, []byte(`{"user_id":"u1"}`))
		testutil.Require(t, err)
	}
	o := e.options()
	o.InputSubjects = []string{"in.>"}
	r := e.newRouter(t, o)
	for _, tc := range []struct {
		h    uint64
		seqs []uint64
		ok   bool
	}{
		{0, []uint64{1}, true},
		{0, []uint64{1, 3, 4, 6}, true},
		{0, []uint64{1, 3}, true},
		{1, []uint64{3, 4}, true},
		{4, []uint64{6}, true},
		{0, []uint64{3}, false},       // 1 left out
		{0, []uint64{1, 4}, false},    // 3 left out
		{3, []uint64{6}, false},       // 4 left out
		{0, []uint64{1, 3, 6}, false}, // 4 left out
		{4, []uint64{6, 7}, false},    // 7 is not in the input
	} {
		t.Run(fmt.Sprintf("after %d: %v", tc.h, tc.seqs), func(t *testing.T) {
			msgs := make([]Msg, len(tc.seqs))
			for i, seq := range tc.seqs {
				msgs[i].Sequence = seq
			}
			r.h = tc.h
			err := r.verify(e.ctx, msgs)
			if tc.ok && err != nil || !tc.ok && !errors.Is(err, errInputSkipped) {
				t.Fatalf("verify: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestRouterStops: Run returns the errors that routing cannot get past.
func TestRouterStops(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup runs before the router, during says what happens while it runs; want
		// checks Run's error.
		setup, during func(t *testing.T, e *rtEnv)
		want          func(t *testing.T, e *rtEnv, err error) bool
	}{
		{"foreign message in the partitioned stream", func(t *testing.T, e *rtEnv) {
			_, err := e.js.Publish(e.ctx, topology.PartitionSubject(rtDeployment, 0), []byte("x"))
			testutil.Require(t, err)
		}, nil, func(t *testing.T, e *rtEnv, err error) bool { return errors.Is(err, ErrNotRouted) }},
		{"partitioned stream deleted", nil, func(t *testing.T, e *rtEnv) {
			e.waitRouted(t, 1)
			testutil.Require(t, e.js.DeleteStream(e.ctx, topology.PartitionedStream(rtDeployment)))
			e.publishUsers(t, 1, 1)
		}, func(t *testing.T, e *rtEnv, err error) bool {
			return Gone(err) && errors.Is(err, jetstream.ErrStreamNotFound)
		}},
		{"row too large", func(t *testing.T, e *rtEnv) {
			max := int(e.js.Conn().MaxPayload())
			e.publishRows(t, []string{userRow(1), `{"user_id":"u2","pad":"` + strings.Repeat("x", max-40) + `"}`})
		}, nil, func(t *testing.T, e *rtEnv, err error) bool {
			return errors.Is(err, ErrRowTooLarge) && e.routedCount(t) == 2 // the rows before it
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRouterEnv(t, testutil.StartJetStream(t).JS, 1)
			e.publishUsers(t, 0, 1)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			r := e.newRouter(t, e.options())
			done := make(chan error, 1)
			go func() { done <- r.Run(e.ctx) }()
			if tc.during != nil {
				tc.during(t, e)
			}
			select {
			case err := <-done:
				if !tc.want(t, e, err) {
					t.Fatalf("Run: %v", err)
				}
			case <-e.ctx.Done():
				t.Fatal("Run did not stop")
			}
		})
	}
}

// TestRouterStreamPurged: with the partitioned stream's last message gone, the router goes
// on after the input consumer's ack floor.
func TestRouterStreamPurged(t *testing.T) {
	e := newRouterEnv(t, testutil.StartJetStream(t).JS, 1)
	e.publishUsers(t, 0, 10)
	r := e.newRouter(t, e.options())
	stop := e.run(r)
	e.waitRouted(t, 10)
	e.waitAcked(t, r)
	stopOK(t, stop)
	st, err := e.js.Stream(e.ctx, topology.PartitionedStream(rtDeployment))
	testutil.Require(t, err)
	testutil.Require(t, st.Purge(e.ctx))

	e.data = map[uint64]string{} // only what follows is in the partitioned stream
	e.publishUsers(t, 10, 5)
	r = e.newRouter(t, e.options())
	stop = e.run(r)
	e.waitRouted(t, 5)
	e.waitAcked(t, r)
	stopOK(t, stop)
	e.checkRouted(t)
	if got, want := r.Stats(), (RouterStats{Routed: 5, LastInput: 15}); got != want {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}
