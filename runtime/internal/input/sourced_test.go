package input

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// sourcedPartitions is the number of partitions of the sourced-stream tests.
const sourcedPartitions = 4

// sourcedShape is an input subject shape the server partitions by a token.
type sourcedShape struct {
	name     string
	subjects []string
	token    int
	dests    []string                       // the transforms' destinations, in the subjects' order
	subject  func(i int, key string) string // row i's subject, carrying key at token
}

var sourcedShapes = []sourcedShape{
	{
		name: "one wildcard", subjects: []string{"logins.*"}, token: 2,
		dests:   []string{"gs.kg.dep.{{partition(4,1)}}.logins.{{wildcard(1)}}"},
		subject: func(_ int, key string) string { return "logins." + key },
	},
	{
		name: "key among several wildcards", subjects: []string{"ev.*.*.x.*"}, token: 3,
		dests:   []string{"gs.kg.dep.{{partition(4,2)}}.ev.{{wildcard(1)}}.{{wildcard(2)}}.x.{{wildcard(3)}}"},
		subject: func(i int, key string) string { return fmt.Sprintf("ev.r%d.%s.x.t%d", i%3, key, i%5) },
	},
	{
		name: "'>' tail", subjects: []string{"orders.*.>"}, token: 2,
		dests:   []string{"gs.kg.dep.{{partition(4,1)}}.orders.{{wildcard(1)}}.>"},
		subject: func(i int, key string) string { return "orders." + key + strings.Repeat(".t", 1+i%3) },
	},
	{
		name: "several subjects", subjects: []string{"a.*.x", "b.*.>"}, token: 2,
		dests: []string{"gs.kg.dep.{{partition(4,1)}}.a.{{wildcard(1)}}.x", "gs.kg.dep.{{partition(4,1)}}.b.{{wildcard(1)}}.>"},
		subject: func(i int, key string) string {
			if i%2 == 0 {
				return "a." + key + ".x"
			}
			return "b." + key + ".y.z"
		},
	},
}

// TestSourcedPartitionedStream: for each subject shape the stream sources the input through
// the expected transforms, every row lands on the subject of its key's partition with its
// subject recoverable, and each partition's consumer reads its own rows only.
func TestSourcedPartitionedStream(t *testing.T) {
	js := testutil.StartJetStream(t).JS
	for i, sh := range sourcedShapes {
		t.Run(sh.name, func(t *testing.T) {
			checkSourcedShape(t, js, fmt.Sprintf("IN%d", i), sh, 1)
		})
	}
}

// TestSourcedPartitionedStreamCluster: the same on a 3-node cluster with 3 replicas; a change
// of the partitioned stream's leader copies no row twice and loses none.
func TestSourcedPartitionedStreamCluster(t *testing.T) {
	c := testutil.StartCluster(t, 3)
	js := c.JetStream(t)
	sh := sourcedShapes[0]
	e := checkSourcedShape(t, js, "IN", sh, 3)
	_, err := js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+topology.PartitionedStream("dep"), nil, 5*time.Second)
	testutil.Require(t, err)
	// The new leader sets the source up again. When its first attempt fails (a loaded machine:
	// CI once timed out here with one 30 s budget for the whole test) the server retries after
	// 10 s, then 20 s more (nats-server's source retry backoff: 5 s x 2 x failures), so this
	// phase gets its own budget covering two retries.
	ctx, cancel := context.WithTimeout(context.Background(), sourceRetryBudget)
	defer cancel()
	e.ctx = ctx
	e.publish(t, sh, 100, 50)
	e.checkLandedWithin(t, 150, sourceRetryBudget)
}

// sourceRetryBudget bounds the wait for a sourced stream whose source the server sets up again
// (a leader change): its retries come 10 s and then 20 s after a failed attempt.
const sourceRetryBudget = 45 * time.Second

// sourcedEnv is an input stream and the stream sourcing it.
type sourcedEnv struct {
	js    jetstream.JetStream
	ctx   context.Context
	input string
	sent  map[string]string // row -> the subject it was published on
}

// checkSourcedShape runs the checks of TestSourcedPartitionedStream for one shape, on input
// stream input, and returns its environment.
func checkSourcedShape(t *testing.T, js jetstream.JetStream, input string, sh sourcedShape, replicas int) *sourcedEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	e := &sourcedEnv{js: js, ctx: ctx, sent: map[string]string{}}
	var err error
	e.input, err = natsio.EnsureStream(ctx, js, natsio.StreamOptions{Name: input, Subjects: sh.subjects, Replicas: replicas})
	testutil.Require(t, err)
	// Delete a stream left by an earlier shape: each shape's partitioned stream is new.
	if err := js.DeleteStream(ctx, topology.PartitionedStream("dep")); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatal(err)
	}
	o := SourcedOptions{Deployment: "dep", InputStream: e.input, InputSubjects: sh.subjects, Token: sh.token, Partitions: sourcedPartitions, Replicas: replicas, MaxAge: time.Hour}
	testutil.Require(t, EnsureSourcedPartitionedStream(ctx, js, o))
	testutil.Require(t, EnsureSourcedPartitionedStream(ctx, js, o)) // again: nothing to change
	st, err := js.Stream(ctx, topology.PartitionedStream("dep"))
	testutil.Require(t, err)
	cfg := st.CachedInfo().Config
	if len(cfg.Subjects) != 0 || len(cfg.Sources) != 1 || cfg.Sources[0].Name != e.input || cfg.MaxAge != time.Hour || cfg.Replicas != replicas || cfg.Discard != jetstream.DiscardOld {
		t.Fatalf("config %+v", cfg)
	}
	var dests []string
	for i, tr := range cfg.Sources[0].SubjectTransforms {
		if tr.Source != sh.subjects[i] {
			t.Errorf("transform %d's source %q, want %q", i, tr.Source, sh.subjects[i])
		}
		dests = append(dests, tr.Destination)
	}
	if !slices.Equal(dests, sh.dests) {
		t.Fatalf("destinations %q, want %q", dests, sh.dests)
	}
	e.publish(t, sh, 0, 100)
	e.checkLanded(t, len(e.sent))

	// Each partition's consumer reads exactly the rows of its partition.
	for p := range sourcedPartitions {
		src, err := NewSource(ctx, js, topology.PartitionedStream("dep"), fmt.Sprintf("p%d", p), []string{topology.PartitionFilter("dep", p, true)})
		testutil.Require(t, err)
		want := 0
		for row := range e.sent {
			if keyPartition(row) == p {
				want++
			}
		}
		got := 0
		for got < want {
			msgs, err := src.Fetch(ctx, 1000, 1<<20, 100*time.Millisecond)
			testutil.Require(t, err)
			for i := range msgs {
				if keyPartition(string(msgs[i].Data)) != p {
					t.Fatalf("partition %d's consumer read %s", p, msgs[i].Data)
				}
			}
			got += len(msgs)
		}
		if got != want {
			t.Fatalf("partition %d's consumer read %d rows, want %d", p, got, want)
		}
	}
	return e
}

// keyPartition is the partition of a row made by publish: its key is the text after "k=".
func keyPartition(row string) int {
	key, _, _ := strings.Cut(strings.TrimPrefix(row, "k="), " ")
	return partition.Of([]byte(strconv.Quote(key)), sourcedPartitions)
}

// publish publishes rows from to from+n-1 on their shape's subjects, the key at the token,
// and records them.
func (e *sourcedEnv) publish(t *testing.T, sh sourcedShape, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		key := fmt.Sprintf("user-%d", i%37)
		subj := sh.subject(i, key)
		row := fmt.Sprintf("k=%s i=%d", key, i)
		_, err := e.js.Publish(e.ctx, subj, []byte(row))
		testutil.Require(t, err)
		e.sent[row] = subj
	}
}

// checkLanded waits until the partitioned stream holds n messages and checks that each is a
// row sent, once, on its key's partition, with its input subject recoverable.
func (e *sourcedEnv) checkLanded(t *testing.T, n int) {
	t.Helper()
	e.checkLandedWithin(t, n, testutil.PollDeadline)
}

// checkLandedWithin is checkLanded waiting up to d for the rows.
func (e *sourcedEnv) checkLandedWithin(t *testing.T, n int, d time.Duration) {
	t.Helper()
	st, err := e.js.Stream(e.ctx, topology.PartitionedStream("dep"))
	testutil.Require(t, err)
	testutil.EventuallyWithin(t, d, fmt.Sprintf("%d rows sourced", n), func() bool {
		info, err := st.Info(e.ctx)
		return err == nil && info.State.Msgs >= uint64(n)
	})
	info, err := st.Info(e.ctx)
	testutil.Require(t, err)
	if info.State.Msgs != uint64(n) {
		t.Fatalf("%d rows sourced, want %d", info.State.Msgs, n)
	}
	seen := map[string]bool{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		raw, err := st.GetMsg(e.ctx, seq)
		testutil.Require(t, err)
		row := string(raw.Data)
		want, ok := e.sent[row]
		if !ok || seen[row] {
			t.Fatalf("sequence %d: %q (sent %v, seen before %v)", seq, row, ok, seen[row])
		}
		seen[row] = true
		if p := topology.PartitionSubject("dep", keyPartition(row)) + "."; !strings.HasPrefix(raw.Subject, p) {
			t.Errorf("%q landed on %s, want %s...", row, raw.Subject, p)
		}
		if got := InputSubject("dep", &Msg{Subject: raw.Subject, Header: raw.Header}); got != want {
			t.Errorf("%q: input subject %q, want %q", row, got, want)
		}
	}
}

// TestPartitionTransformsRefused: combinations the server cannot partition are refused,
// saying why.
func TestPartitionTransformsRefused(t *testing.T) {
	for _, tc := range []struct {
		subjects          []string
		token, partitions int
		want              string
	}{
		{[]string{"a.b"}, 2, 4, `"a.b" has no '*' at token 2`},
		{[]string{"a.*"}, 3, 4, `"a.*" has no '*' at token 3`},
		{[]string{"a.*"}, 0, 4, `no '*' at token 0`},
		{[]string{"a.>"}, 2, 4, `"a.>" has no '*' at token 2`},
		{[]string{"a.*", "a.*.>"}, 2, 4, ""}, // disjoint: a.* has two tokens, a.*.> three or more
		{[]string{"a.*.>", "a.*.b"}, 2, 4, `"a.*.>" and "a.*.b" overlap`},
		{[]string{"a.*", "a.*"}, 2, 4, `"a.*" and "a.*" overlap`},
		{[]string{"a..*"}, 3, 4, `"a..*" has an empty token`},
		{[]string{"a.*"}, 2, 0, "the number of partitions must be from 1 to 1024"},
		{nil, 2, 4, "no input subjects"},
	} {
		_, err := PartitionTransforms("dep", tc.subjects, tc.token, tc.partitions)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q token %d: %v", tc.subjects, tc.token, err)
		case tc.want != "" && (!errors.Is(err, ErrSubjectToken) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q token %d partitions %d: %v, want ErrSubjectToken saying %q", tc.subjects, tc.token, tc.partitions, err, tc.want)
		}
	}
}

// TestPartitionedStreamModes: a partitioned stream made for the router is not taken over by
// the server's partitioning, nor the other way round, and a sourced stream's transforms are
// not changed (the server would copy the input again); its max_age is.
func TestPartitionedStreamModes(t *testing.T) {
	e := newEnv(t)
	in, err := natsio.EnsureStream(e.ctx, e.js, natsio.StreamOptions{Name: "IN", Subjects: []string{"logins.*", "signups.*"}})
	testutil.Require(t, err)
	o := SourcedOptions{Deployment: "routed", InputStream: in, InputSubjects: []string{"logins.*"}, Token: 2, Partitions: 4}
	testutil.Require(t, EnsurePartitionedStream(e.ctx, e.js, "routed", 0, 0))
	if err := EnsureSourcedPartitionedStream(e.ctx, e.js, o); !errors.Is(err, ErrPartitionMode) || !strings.Contains(err.Error(), "without key.subject_token") {
		t.Fatalf("sourcing a router's stream: %v", err)
	}

	o.Deployment = "sourced"
	testutil.Require(t, EnsureSourcedPartitionedStream(e.ctx, e.js, o))
	if err := EnsurePartitionedStream(e.ctx, e.js, "sourced", 0, 0); !errors.Is(err, ErrPartitionMode) || !strings.Contains(err.Error(), "with key.subject_token") {
		t.Fatalf("routing into a sourced stream: %v", err)
	}
	for _, change := range []func(o *SourcedOptions){
		func(o *SourcedOptions) { o.InputSubjects = []string{"logins.*", "signups.*"} },
		func(o *SourcedOptions) { o.Partitions = 8 },
		func(o *SourcedOptions) { o.InputSubjects, o.Token = []string{"signups.*"}, 2 },
	} {
		c := o
		change(&c)
		if err := EnsureSourcedPartitionedStream(e.ctx, e.js, c); !errors.Is(err, ErrSourceChanged) || !strings.Contains(err.Error(), "fixed at the first deploy") {
			t.Fatalf("%+v: %v, want ErrSourceChanged", c, err)
		}
	}
	reordered := o
	reordered.InputSubjects = []string{"signups.*", "logins.*"}
	o.InputSubjects = []string{"logins.*", "signups.*"}
	if err := e.js.DeleteStream(e.ctx, topology.PartitionedStream("sourced")); err != nil {
		t.Fatal(err)
	}
	testutil.Require(t, EnsureSourcedPartitionedStream(e.ctx, e.js, o))
	testutil.Require(t, EnsureSourcedPartitionedStream(e.ctx, e.js, reordered)) // the same subjects: no change
	o.MaxAge = time.Minute
	testutil.Require(t, EnsureSourcedPartitionedStream(e.ctx, e.js, o))
	if cfg := streamConfig(t, e, topology.PartitionedStream("sourced")); cfg.MaxAge != time.Minute {
		t.Fatalf("max_age %s after an update to 1m", cfg.MaxAge)
	}
}

// TestInputSubject: the subject a row was published on, from either kind of partitioned
// stream.
func TestInputSubject(t *testing.T) {
	routed := Msg{Subject: "gs.kg.dep.3"}
	routed.Header = map[string][]string{RoutedSubjectHeader: {"logins.web"}}
	for _, tc := range []struct {
		m    Msg
		want string
	}{
		{Msg{Subject: "gs.kg.dep.3.logins.ada"}, "logins.ada"},
		{Msg{Subject: "gs.kg.dep.0.a.b.c.d"}, "a.b.c.d"},
		{routed, "logins.web"},
		{Msg{Subject: "gs.kg.depot.3.x"}, "gs.kg.depot.3.x"}, // another deployment's
		{Msg{Subject: "logins.ada"}, "logins.ada"},
	} {
		if got := InputSubject("dep", &tc.m); got != tc.want {
			t.Errorf("InputSubject(%q) = %q, want %q", tc.m.Subject, got, tc.want)
		}
	}
	if got := topology.PartitionFilter("dep", 2, true); got != "gs.kg.dep.2.>" {
		t.Errorf("PartitionFilter by subject: %s", got)
	}
	if got := topology.PartitionFilter("dep", 2, false); got != "gs.kg.dep.2" {
		t.Errorf("PartitionFilter for the router: %s", got)
	}
}
