package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/replay"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/timeouts"
)

const logincountSpec = `
name: logincount
module: unused.wasm
input: {subjects: ["logins.>"]}
key: {field: user_id}
timeout: processing_time
output: {subject: logincount.out, stream: LOGINCOUNT_OUT}
config: {idle_timeout: 10s}
`

// env is an embedded NATS server with a groupstate runtime on a manual clock.
type env struct {
	t      *testing.T
	nc     *nats.Conn
	js     jetstream.JetStream
	client *client.Client
	clock  *timeouts.ManualClock
	dir    string
	stop   context.CancelFunc
	done   chan error
}

func startEnv(t *testing.T) *env {
	t.Helper()
	nc, js := startNATS(t)
	c, err := client.New(context.Background(), nc, client.WithCacheDir(testutil.CompileCacheDir()))
	testutil.Require(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	e := &env{t: t, nc: nc, js: js, client: c, clock: timeouts.NewManualClock(time.UnixMilli(1_000_000_000)), dir: t.TempDir()}
	e.startRuntime()
	t.Cleanup(e.stopRuntime)
	return e
}

// startNATS starts an embedded NATS server with JetStream, stopped when t ends, and returns a
// connection to it.
func startNATS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: t.TempDir(), Port: -1, Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := service.Connect(service.ConnOptions{URL: srv.ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	testutil.Require(t, err)
	return nc, js
}

// startRuntime starts the runtime over the env's data directory.
func (e *env) startRuntime() {
	svc, err := service.New(context.Background(), service.Options{DataDir: e.dir, CacheDir: testutil.CompileCacheDir(), Conn: e.nc, Logger: testutil.DiscardLogger(), Clock: e.clock})
	testutil.Require(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	e.stop, e.done = cancel, make(chan error, 1)
	go func() { e.done <- svc.Run(ctx) }()
}

// stopRuntime stops the runtime (a clean shutdown: the batch in flight commits).
func (e *env) stopRuntime() {
	if e.stop != nil {
		e.stop()
		<-e.done
		e.stop = nil
	}
}

func (e *env) waitRunning(name string) {
	testutil.EventuallyWithin(e.t, 2*time.Minute, name+" running", func() bool {
		st, err := e.client.Status(context.Background(), name)
		return err == nil && st.State == client.StatusRunning
	})
}

// waitPosition waits until deployment name committed input position pos.
func (e *env) waitPosition(name string, pos uint64) {
	testutil.Eventually(e.t, fmt.Sprintf("position %d", pos), func() bool {
		st, err := e.client.Status(context.Background(), name)
		return err == nil && st.Position >= pos
	})
}

// waitMessages waits until stream holds n messages.
func (e *env) waitMessages(stream string, n uint64) {
	testutil.Eventually(e.t, fmt.Sprintf("%d messages in %s", n, stream), func() bool {
		s, err := e.js.Stream(context.Background(), stream)
		return err == nil && s.CachedInfo().State.Msgs == n
	})
}

func (e *env) publish(subject string, rows ...string) {
	for _, r := range rows {
		_, err := e.js.Publish(context.Background(), subject, []byte(r))
		testutil.Require(e.t, err)
	}
}

func logincountWasm(t testing.TB) []byte {
	return testutil.ReadFile(t, "../../samples/logincount/go/logincount.wasm")
}

func parseSpec(t testing.TB, y string) *spec.Spec {
	sp, err := spec.ParseSpec([]byte(y))
	testutil.Require(t, err)
	return sp
}

// history runs logincount over NATS: logins of five users, their sessions closed by the idle
// timeout, a restart of the runtime, then more logins; it returns the number of rows.
func history(e *env) int {
	_, err := e.client.Deploy(context.Background(), parseSpec(e.t, logincountSpec), logincountWasm(e.t))
	testutil.Require(e.t, err)
	e.waitRunning("logincount")
	n := 0
	login := func(users ...int) {
		for _, u := range users {
			e.publish("logins.web", fmt.Sprintf(`{"user_id":"u%d"}`, u))
			n++
		}
		e.waitPosition("logincount", uint64(n))
	}
	login(0, 1, 2, 0, 3)
	login(4, 0)
	e.clock.Advance(11 * time.Second) // every session times out
	testutil.Eventually(e.t, "5 sessions closed", func() bool {
		st, err := e.client.Status(context.Background(), "logincount")
		return err == nil && st.TimeoutsFired >= 5
	})
	login(1, 1, 2)
	e.stopRuntime()
	e.startRuntime()
	e.waitRunning("logincount")
	login(2, 3)
	e.clock.Advance(5 * time.Second)
	login(3)
	return n
}

// TestReplaySameModule: replaying a deployment's history with its own module emits exactly
// what it published, batch by batch and key by key, across timeouts and a restart.
func TestReplaySameModule(t *testing.T) {
	e := startEnv(t)
	rows := history(e)
	d, err := e.client.Get(context.Background(), "logincount")
	testutil.Require(t, err)
	var progress []int
	rep, err := replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t),
		Progress: func(done, total int) { progress = append(progress, done) }})
	testutil.Require(t, err)
	t.Logf("report %+v", rep)
	if !rep.Same() || rep.Rows != rows || rep.Equal == 0 || rep.Compared != rep.Batches {
		t.Fatalf("replay of the running module: %+v, want every one of %d rows run and every output equal", rep, rows)
	}
	if len(progress) != rep.Batches || progress[len(progress)-1] != rep.Batches {
		t.Errorf("progress %v over %d batches", progress, rep.Batches)
	}
	// The last 6 seconds of processing time (the clock moved 5s before the last batch): every
	// batch runs, the last ones are compared.
	recent, err := replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t), Since: 6 * time.Second})
	testutil.Require(t, err)
	if !recent.Same() || recent.Batches != rep.Batches || recent.Compared == 0 || recent.Compared >= rep.Compared {
		t.Errorf("replay of the last 6s: %+v, want every batch run and some of them compared", recent)
	}
	from, err := replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t), FromBatch: 1 << 40})
	testutil.Require(t, err)
	if from.Compared != 0 || from.Batches != rep.Batches {
		t.Errorf("replay from a batch after the last: %+v, want every batch run and none compared", from)
	}
}

// TestReplayChangedHandler: the same history run with a longer idle timeout (1h instead of
// 10s) closes no session: the closing outputs are only in the old run, and the counts after
// them go on from the old counts instead of starting again; with Keys, only that key's.
func TestReplayChangedHandler(t *testing.T) {
	e := startEnv(t)
	history(e)
	d, err := e.client.Get(context.Background(), "logincount")
	testutil.Require(t, err)
	changed := *d.Spec
	changed.Config = map[string]any{"idle_timeout": "1h"}
	rep, err := replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: &changed, Module: logincountWasm(t)})
	testutil.Require(t, err)
	// The old run closed every session in batch 7, so u1's two logins after counted 2 and u2's
	// 1 then 2 and 3 (after the restart); the new run counts on: 3, then 2 and 3 and 4.
	if rep.OnlyOld != 5 || rep.Changed == 0 {
		t.Fatalf("replay with a 1h timeout: %+v, want the 5 closing outputs only in the old run, and the counts after them changed", rep)
	}
	for _, diff := range rep.Differences {
		t.Logf("batch %d key %s: old %s new %s", diff.Batch, diff.Key, diff.Old, diff.New)
	}
	one, err := replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: &changed, Module: logincountWasm(t), Keys: [][]byte{[]byte(`"u1"`)}})
	testutil.Require(t, err)
	for _, diff := range one.Differences {
		if string(diff.Key) != `"u1"` {
			t.Errorf("difference of key %s, want only u1's", diff.Key)
		}
	}
	if len(one.Differences) == 0 {
		t.Errorf("no difference for u1: %+v", one)
	}
}

// TestReplayHistoryGone: a history whose input rows the stream no longer holds is refused,
// naming the first missing sequence.
func TestReplayHistoryGone(t *testing.T) {
	e := startEnv(t)
	history(e)
	d, err := e.client.Get(context.Background(), "logincount")
	testutil.Require(t, err)
	in, err := e.js.StreamNameBySubject(context.Background(), "logins.web")
	testutil.Require(t, err)
	s, err := e.js.Stream(context.Background(), in)
	testutil.Require(t, err)
	testutil.Require(t, s.Purge(context.Background(), jetstream.WithPurgeSequence(3)))
	_, err = replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t)})
	if !errors.Is(err, replay.ErrHistoryGone) || !contains(err.Error(), "no longer holds sequence 1") {
		t.Fatalf("replay after the stream lost rows 1 and 2: %v, want ErrHistoryGone naming sequence 1", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

const sessionsSpec = `
name: sessions
module: unused.wasm
input: {subjects: ["clicks.>"]}
key: {field: user_id}
event_time: {field: ts, watermark_delay: 10s}
timeout: event_time
output: {subject: sessions.out, stream: SESSIONS_OUT}
late: {subject: sessions.late, stream: SESSIONS_LATE}
config: {gap: 5s}
`

// TestReplayEventTime: the sessions sample (event-time timeouts, a watermark 10s behind the
// clicks) over rounds of clicks with a late one and a restart: replayed with its module, the
// same sessions; with a gap of 10s instead of 5s, the sessions 5s to 10s apart merge: exactly
// u1's two sessions become one.
func TestReplayEventTime(t *testing.T) {
	e := startEnv(t)
	wasm := testutil.ReadFile(t, "../../samples/sessions/go/sessions.wasm")
	_, err := e.client.Deploy(context.Background(), parseSpec(t, sessionsSpec), wasm)
	testutil.Require(t, err)
	e.waitRunning("sessions")
	n := 0
	click := func(clicks ...string) {
		e.publish("clicks.web", clicks...)
		n += len(clicks)
		e.waitPosition("sessions", uint64(n))
	}
	c := func(user string, ts int) string { return fmt.Sprintf(`{"user_id":%q,"ts":%d}`, user, ts) }
	click(c("u1", 10_000), c("u2", 11_000), c("u1", 12_000))
	click(c("u1", 19_000), c("u2", 30_000)) // u1: 7s after 12s, a new session with a 5s gap
	e.stopRuntime()
	e.startRuntime()
	e.waitRunning("sessions")
	click(c("u1", 5_000))                   // late: the watermark is at 20s
	click(c("u3", 60_000), c("u2", 61_000)) // the watermark passes every session before
	// Four sessions closed (u1's first by its next click, then u2's at 11s, u1's at 19s and
	// u2's at 30s by the watermark) and one late click. Counted on the streams: the status
	// counts only since the restart, and whether u2's first session closed before the restart
	// (in the batch without data that the watermark's move runs) depends on timing.
	e.waitMessages("SESSIONS_OUT", 4)
	e.waitMessages("SESSIONS_LATE", 1)
	d, err := e.client.Get(context.Background(), "sessions")
	testutil.Require(t, err)
	rep, err := replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: wasm})
	testutil.Require(t, err)
	if !rep.Same() || rep.Rows != n || rep.Equal < 3 {
		t.Fatalf("replay of the running module: %+v, want every one of %d rows run and the same sessions", rep, n)
	}
	wider := *d.Spec
	wider.Config = map[string]any{"gap": "10s"}
	rep, err = replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: &wider, Module: wasm})
	testutil.Require(t, err)
	for _, diff := range rep.Differences {
		t.Logf("batch %d key %s: old %s new %s", diff.Batch, diff.Key, diff.Old, diff.New)
	}
	// u1's session of 10s-12s is not closed when the watermark passes 17s; it goes on at 19s
	// and closes once at 24s with all three clicks. Nothing else changes.
	if len(rep.Differences) != 2 || rep.OnlyOld != 1 || rep.Changed != 1 || rep.OnlyNew != 0 {
		t.Fatalf("replay with a 10s gap: %+v, want u1's two sessions merged into one", rep)
	}
	merged := rep.Differences[1]
	if string(merged.Key) != `"u1"` || len(merged.New) != 1 || string(merged.New[0]) != `{"user_id":"u1","start":10000,"end":19000,"events":3}` {
		t.Errorf("the merged session: %+v", merged)
	}
}

// TestReplayEachTimeoutMode: in each timeout mode, a history of 2,000 rows over 50 keys in
// four rounds, with the runtime restarted between the second and third, processing time
// moving between rounds (sessions closed by the idle timeout) and, under event time, late
// rows in every round, replays with the running module to the same outputs.
func TestReplayEachTimeoutMode(t *testing.T) {
	for _, tc := range []struct {
		mode, spec, wasm, subject string
		row                       func(round, i int) string
	}{
		{"none", `
name: counter
module: unused.wasm
input: {subjects: ["counts.>"]}
key: {field: key}
timeout: none
output: {subject: counter.out}
`, "../../samples/counter/go/counter.wasm", "counts.web", func(_, i int) string { return fmt.Sprintf(`{"key":"k%d"}`, i%50) }},
		{"processing_time", logincountSpec, "../../samples/logincount/go/logincount.wasm", "logins.web",
			func(_, i int) string { return fmt.Sprintf(`{"user_id":"u%d"}`, i%50) }},
		{"event_time", sessionsSpec, "../../samples/sessions/go/sessions.wasm", "clicks.web", func(round, i int) string {
			ts := round*60_000 + i*100
			if i%40 == 39 {
				ts = 0 // late once the watermark passed it
			}
			// Half the users click in a round, the other half in the next: the watermark
			// closes the idle half's sessions.
			return fmt.Sprintf(`{"user_id":"u%d","ts":%d}`, (i%25)*2+round%2, ts)
		}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			e := startEnv(t)
			sp := parseSpec(t, tc.spec)
			wasm := testutil.ReadFile(t, tc.wasm)
			_, err := e.client.Deploy(context.Background(), sp, wasm)
			testutil.Require(t, err)
			e.waitRunning(sp.Name)
			const rounds, perRound = 4, 500
			for round := range rounds {
				if round == 2 {
					e.stopRuntime()
					e.startRuntime()
					e.waitRunning(sp.Name)
				}
				for i := range perRound {
					_, err := e.js.PublishAsync(tc.subject, []byte(tc.row(round, i)))
					testutil.Require(t, err)
				}
				select {
				case <-e.js.PublishAsyncComplete():
				case <-time.After(testutil.PollDeadline):
					t.Fatal("publishing timed out")
				}
				e.waitPosition(sp.Name, uint64((round+1)*perRound))
				e.clock.Advance(time.Duration(3+8*(round%2)) * time.Second) // 3s, then 11s: the idle sessions close
			}
			// The history holds what the mode does: since the restart, timeouts fired (and
			// under event time, late rows were dropped).
			testutil.Eventually(t, "timeouts fired and late rows since the restart", func() bool {
				st, err := e.client.Status(context.Background(), sp.Name)
				return err == nil && (sp.Timeout == timeouts.None || st.TimeoutsFired > 0) && (sp.Timeout != timeouts.EventTime || st.LateRows > 0)
			})
			d, err := e.client.Get(context.Background(), sp.Name)
			testutil.Require(t, err)
			rep, err := replay.Run(context.Background(), replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: wasm})
			testutil.Require(t, err)
			t.Logf("%s: %d batches, %d rows, %d outputs equal", tc.mode, rep.Batches, rep.Rows, rep.Equal)
			if !rep.Same() || rep.Rows != rounds*perRound || rep.Equal == 0 {
				t.Fatalf("replay of the running module: %+v, want all %d rows run and the same outputs", rep, rounds*perRound)
			}
		})
	}
}

// TestReplayFromSnapshot: a replicated deployment's replay starts from empty state while its
// whole history is recorded; once the manifests before a snapshot of its state are gone, it
// starts from that snapshot and runs the batches after it, to the same outputs; --since
// starts from it too.
func TestReplayFromSnapshot(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	sp := parseSpec(t, logincountSpec+"replication: changelog\nsnapshot: {interval: 10s}\n")
	_, err := e.client.Deploy(ctx, sp, logincountWasm(t))
	testutil.Require(t, err)
	e.waitRunning("logincount")
	snaps, err := changelog.OpenSnapshots(ctx, e.js, 0)
	testutil.Require(t, err)
	n := 0
	round := func() {
		for u := range 10 {
			e.publish("logins.web", fmt.Sprintf(`{"user_id":"u%d"}`, u))
		}
		n += 10
		e.waitPosition("logincount", uint64(n))
	}
	var snap changelog.SnapshotMeta
	var lastRound time.Time
	testutil.EventuallyWithin(t, 90*time.Second, "a snapshot", func() bool {
		if time.Since(lastRound) >= time.Second { // a batch a second: one comes after the interval
			lastRound = time.Now()
			round()
		}
		metas, err := snaps.List(ctx, "logincount", 0)
		if err == nil && len(metas) > 0 {
			snap = metas[0]
		}
		return err == nil && len(metas) > 0
	})
	for range 3 {
		round()
	}
	d, err := e.client.Get(ctx, "logincount")
	testutil.Require(t, err)
	whole, err := replay.Run(ctx, replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t)})
	testutil.Require(t, err)
	if !whole.Same() || whole.Rows != n || len(whole.FromSnapshots) != 0 {
		t.Fatalf("replay of the whole history: %+v, want all %d rows from empty state, the same outputs", whole, n)
	}

	// The manifests before the snapshot's batch go (as the stream's retention would take them).
	rd, err := input.OpenStreamReader(ctx, e.js, topology.ManifestsStream("logincount"), nil, 0)
	testutil.Require(t, err)
	var keep uint64
	for keep == 0 {
		m, ok, err := rd.Next(ctx)
		testutil.Require(t, err)
		if !ok {
			t.Fatalf("no manifest of the snapshot's batch %d", snap.BatchID)
		}
		var man engine.Manifest
		testutil.Require(t, json.Unmarshal(m.Data, &man))
		if man.Batch == snap.BatchID {
			keep = m.Sequence
		}
	}
	rd.Close()
	ms, err := e.js.Stream(ctx, topology.ManifestsStream("logincount"))
	testutil.Require(t, err)
	testutil.Require(t, ms.Purge(ctx, jetstream.WithPurgeSequence(keep)))

	cut, err := replay.Run(ctx, replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t)})
	testutil.Require(t, err)
	t.Logf("from the snapshot of batch %d: %d batches, %d rows, %d outputs equal", snap.BatchID, cut.Batches, cut.Rows, cut.Equal)
	if !cut.Same() || cut.Rows >= n || cut.Rows < 30 || cut.Equal == 0 ||
		len(cut.FromSnapshots) != 1 || cut.FromSnapshots[0].Batch != snap.BatchID {
		t.Fatalf("replay of the history after the snapshot: %+v, want it started from the snapshot of batch %d, the same outputs", cut, snap.BatchID)
	}
	recent, err := replay.Run(ctx, replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t), Since: time.Millisecond})
	testutil.Require(t, err)
	if !recent.Same() || len(recent.FromSnapshots) != 1 {
		t.Fatalf("replay --since of the history after the snapshot: %+v", recent)
	}
}

// TestReplayInitialState: a deployment that started from an initial state replays to the same
// outputs with that state applied in its first batch, as the deployment did; without it, the
// totals of the keys in the file differ.
func TestReplayInitialState(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	file := `{"key": "u0", "state": {"login_count": 10}}` + "\n" + `{"key": "u9", "state": {"login_count": 90}}` + "\n"
	_, err := e.client.Deploy(ctx, parseSpec(t, logincountSpec), logincountWasm(t), client.WithInitialState([]byte(file)))
	testutil.Require(t, err)
	e.waitRunning("logincount")
	// The first batch applies the file: each key in it is called with no rows (totals 10 and
	// 90). Then logins: u0's 11 and u1's 1, u0's 12.
	e.waitMessages("LOGINCOUNT_OUT", 2)
	e.publish("logins.web", `{"user_id":"u0"}`, `{"user_id":"u1"}`)
	e.waitPosition("logincount", 2)
	e.publish("logins.web", `{"user_id":"u0"}`)
	e.waitPosition("logincount", 3)
	d, err := e.client.Get(ctx, "logincount")
	testutil.Require(t, err)
	e.waitMessages("LOGINCOUNT_OUT", 5)

	data, err := e.client.InitialState(ctx, d)
	testutil.Require(t, err)
	is, err := engine.ParseInitialState(strings.NewReader(string(data)))
	testutil.Require(t, err)
	rep, err := replay.Run(ctx, replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t), InitialState: is})
	testutil.Require(t, err)
	if !rep.Same() || rep.Equal != 5 || rep.Rows != 3 {
		t.Fatalf("replay with the initial state: %+v, want the 5 outputs equal over 3 rows", rep)
	}
	without, err := replay.Run(ctx, replay.Options{JS: e.js, CacheDir: testutil.CompileCacheDir(), Spec: d.Spec, Module: logincountWasm(t)})
	testutil.Require(t, err)
	if without.Same() || without.Changed != 2 || without.OnlyOld != 2 {
		t.Fatalf("replay without the initial state: %+v, want u0's 2 totals after logins changed, and the first batch's 2 only old", without)
	}

	// A shadow starts from its primary's initial state too: the same outputs.
	sd, err := e.client.Deploy(ctx, parseSpec(t, strings.Replace(logincountSpec, "name: logincount", "name: logincount-v2", 1)), logincountWasm(t), client.AsShadowOf("logincount"))
	testutil.Require(t, err)
	if sd.InitialState != d.InitialState {
		t.Fatalf("the shadow's initial state %q, the primary's %q", sd.InitialState, d.InitialState)
	}
	var diff *replay.Report
	testutil.Eventually(t, "the shadow's outputs equal", func() bool {
		diff, err = replay.Diff(ctx, replay.DiffOptions{JS: e.js, Primary: d.Spec, Shadow: sd.RunSpec()})
		return err == nil && diff.Same() && diff.Equal == 5
	})
}
