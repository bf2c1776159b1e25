package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// natsEnv is a real embedded NATS server with JetStream in a temp dir, and a client.
type natsEnv struct {
	t      *testing.T
	srv    *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	client *client.Client
}

func startNATS(t *testing.T) *natsEnv {
	t.Helper()
	return startNATSIn(t, t.TempDir())
}

// startNATSIn is startNATS with the server's data in dataDir.
func startNATSIn(t *testing.T, dataDir string) *natsEnv {
	t.Helper()
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: dataDir, Port: -1, Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := service.Connect(service.ConnOptions{URL: srv.ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	testutil.Require(t, err)
	c, err := client.New(context.Background(), nc, client.WithCacheDir(testutil.CompileCacheDir()))
	testutil.Require(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return &natsEnv{t: t, srv: srv, nc: nc, js: js, client: c}
}

// runningService is a Service running in the background until stop is called.
type runningService struct {
	cancel context.CancelFunc
	done   chan error
}

// startService starts a service over dataDir, compiling into the tests' shared compilation
// cache (testutil.CompileCacheDir).
func (e *natsEnv) startService(dataDir string, clock timeouts.Clock) *runningService {
	e.t.Helper()
	return e.startServiceCache(dataDir, clock, testutil.CompileCacheDir())
}

// startServiceCache is startService with the compilation cache in cacheDir ("": its own,
// dataDir/cache), for a test whose modules must really compile.
func (e *natsEnv) startServiceCache(dataDir string, clock timeouts.Clock, cacheDir string) *runningService {
	e.t.Helper()
	svc, err := service.New(context.Background(), service.Options{DataDir: dataDir, CacheDir: cacheDir, Conn: e.nc, Logger: testutil.DiscardLogger(), Clock: clock})
	testutil.Require(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	rs := &runningService{cancel: cancel, done: make(chan error, 1)}
	go func() { rs.done <- svc.Run(ctx) }()
	e.t.Cleanup(rs.stop)
	return rs
}

func (rs *runningService) stop() {
	if rs.cancel == nil {
		return
	}
	rs.cancel()
	<-rs.done
	rs.cancel = nil
}

func (e *natsEnv) deploy(specYAML string, wasm []byte) {
	e.t.Helper()
	_, err := e.client.Deploy(context.Background(), specFromYAML(e.t, specYAML), wasm)
	testutil.Require(e.t, err)
}

func (e *natsEnv) publish(subject string, rows ...string) {
	e.t.Helper()
	for _, r := range rows {
		_, err := e.js.Publish(context.Background(), subject, []byte(r))
		testutil.Require(e.t, err, "publish")
	}
}

// streamMsgs returns every message the stream holds.
func (e *natsEnv) streamMsgs(stream string) []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	testutil.Require(e.t, err)
	info, err := s.Info(ctx)
	testutil.Require(e.t, err)
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		testutil.Require(e.t, err)
		out = append(out, m)
	}
	return out
}

// waitStream waits until the stream holds exactly n messages and returns their payloads.
func (e *natsEnv) waitStream(stream string, n int) []string {
	e.t.Helper()
	var got []string
	testutil.Eventually(e.t, fmt.Sprintf("%d messages on %s", n, stream), func() bool {
		msgs := e.streamMsgs(stream)
		got = got[:0]
		for _, m := range msgs {
			got = append(got, string(m.Data))
		}
		return len(msgs) >= n
	})
	if len(got) != n {
		e.t.Fatalf("%s holds %d messages, want %d: %v", stream, len(got), n, got)
	}
	return got
}

// waitTotals waits until the logincount outputs show these totals, and checks that no output
// appears twice (a duplicate after a restart would repeat a user's total).
func (e *natsEnv) waitTotals(want map[string]int) {
	e.t.Helper()
	var got map[string]int
	var outs []string
	testutil.Eventually(e.t, fmt.Sprintf("totals %v", want), func() bool {
		got, outs = map[string]int{}, nil
		for _, m := range e.streamMsgs("LOGINCOUNT_OUT") {
			var v struct {
				UserID string `json:"user_id"`
				Total  int    `json:"total_logins"`
			}
			testutil.Require(e.t, json.Unmarshal(m.Data, &v))
			got[v.UserID] = max(got[v.UserID], v.Total)
			outs = append(outs, string(m.Data))
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	seen := map[string]bool{}
	for _, o := range outs {
		if seen[o] {
			e.t.Fatalf("output %s appears twice: %v", o, outs)
		}
		seen[o] = true
	}
}

// compileDeadline bounds a wait that includes the service compiling a module it has not
// compiled before (a deployment's first start, a redeploy with a new module). The Go samples
// are 3 to 5 MB: that takes seconds, and under the race detector on a busy machine more than
// testutil.PollDeadline.
const compileDeadline = 2 * time.Minute

func (e *natsEnv) waitRunning(name string) {
	e.t.Helper()
	testutil.EventuallyWithin(e.t, compileDeadline, name+" running", func() bool {
		st, err := e.client.Status(context.Background(), name)
		return err == nil && st.State == client.StatusRunning
	})
}

const logincountSpec = `
name: logincount
module: unused.wasm
input:
  subjects: ["logins.>"]
key:
  field: user_id
timeout: processing_time
output:
  subject: logincount.out
  stream: LOGINCOUNT_OUT
dead_letter:
  subject: logincount.dlq
  stream: LOGINCOUNT_DLQ
config:
  idle_timeout: 10s
`

func logincountWasm(t testing.TB) []byte {
	return testutil.ReadFile(t, "../../samples/logincount/go/logincount.wasm")
}

// TestServiceEndToEnd: deploy, publish, outputs on the output stream; bad rows in the
// dead-letter stream with headers; a restart of the runtime keeps state and position with no
// duplicate outputs; a redeploy keeps state; undeploy stops consumption.
// specFromYAML parses a spec written in a test.
func specFromYAML(t testing.TB, y string) *spec.Spec {
	t.Helper()
	sp, err := spec.ParseSpec([]byte(strings.TrimSpace(y)))
	testutil.Require(t, err)
	return sp
}

func TestServiceEndToEnd(t *testing.T) {
	env := startNATS(t)
	dataDir := t.TempDir()
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	svc := env.startService(dataDir, clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")

	env.publish("logins.web", `{"user_id":"ada"}`, `{"user_id":"bob"}`, `not json`, `{"user_id":"ada"}`, `{"nokey":true}`)
	env.waitTotals(map[string]int{"ada": 2, "bob": 1})
	var dlq []*jetstream.RawStreamMsg
	testutil.Eventually(t, "2 dead letters", func() bool { dlq = env.streamMsgs("LOGINCOUNT_DLQ"); return len(dlq) == 2 })
	for _, m := range dlq {
		h := m.Header
		if h.Get(output.HeaderReason) == "" || h.Get(output.HeaderSubject) != "logins.web" || h.Get(output.HeaderSequence) == "" || h.Get(output.HeaderDeployment) != "logincount" {
			t.Fatalf("dead letter %s headers %v", m.Data, h)
		}
	}
	if r := dlq[0].Header.Get(output.HeaderReason); r != engine.ReasonInvalidJSON || string(dlq[0].Data) != "not json" {
		t.Fatalf("first dead letter: %q reason %q", dlq[0].Data, r)
	}
	outMsgs := env.streamMsgs("LOGINCOUNT_OUT")
	if h := outMsgs[0].Header; h.Get(output.HeaderKey) == "" || h.Get(output.HeaderBatch) == "" || h.Get(nats.MsgIdHdr) == "" {
		t.Fatalf("output headers %v", h)
	}

	// Restart the runtime: state and position survive, nothing is output twice.
	svc.stop()
	svc = env.startService(dataDir, clock)
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 3, "bob": 1})

	// The state command's API answers from the running runtime.
	ks, found, err := env.client.State(context.Background(), "logincount", client.KeyFromArg("ada"))
	testutil.Require(t, err)
	if !found || string(ks.Value) != `{"login_count":3}` || ks.TimeoutMs != 1_000_000+10_000 || ks.UpdatedMs != 1_000_000 {
		t.Fatalf("state of ada: %+v found=%v", ks, found)
	}
	if _, found, err := env.client.State(context.Background(), "logincount", client.KeyFromArg("nobody")); err != nil || found {
		t.Fatalf("state of nobody: found=%v err=%v", found, err)
	}
	keys, _, err := env.client.Keys(context.Background(), "logincount", nil, 10)
	testutil.Require(t, err)
	if len(keys) != 2 || string(keys[0].Key) != `"ada"` || string(keys[1].Key) != `"bob"` {
		t.Fatalf("keys %+v", keys)
	}

	// Redeploy with a different config: the state is kept, and the counters go on with it.
	old, err := env.client.Status(context.Background(), "logincount")
	testutil.Require(t, err)
	env.deploy(strings.Replace(logincountSpec, "idle_timeout: 10s", "idle_timeout: 20s", 1), logincountWasm(t))
	testutil.Eventually(t, "redeploy", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && st.State == client.StatusRunning && st.StartedAt.After(old.StartedAt) && st.RowsIn > 0 && st.RowsIn >= old.RowsIn
	})
	env.publish("logins.web", `{"user_id":"bob"}`)
	env.waitTotals(map[string]int{"ada": 3, "bob": 2})
	outputs := len(env.streamMsgs("LOGINCOUNT_OUT"))

	// Undeploy: the runner stops, and rows published afterwards are not consumed. The service
	// writes the stopped status once the runner's loop and fetcher ended; a pull request the
	// fetcher left on the server lasts at most trigger.interval, and then nothing pulls.
	testutil.Require(t, env.client.Undeploy(context.Background(), "logincount"))
	testutil.Eventually(t, "stopped", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && st.State == client.StatusStopped
	})
	const inStream = "GS_LOGINCOUNT_IN"
	testutil.Eventually(t, "no pull request on the input consumer", func() bool {
		return env.consumerInfo(inStream, "logincount").NumWaiting == 0
	})
	inputs := len(env.streamMsgs(inStream))
	env.publish("logins.web", `{"user_id":"carol"}`)
	testutil.Eventually(t, "carol's row in the input stream", func() bool { return len(env.streamMsgs(inStream)) == inputs+1 })
	if c := env.consumerInfo(inStream, "logincount"); c.NumPending != 1 || c.NumAckPending != 0 {
		t.Fatalf("an undeployed deployment consumed input: %d pending, %d delivered and not acknowledged", c.NumPending, c.NumAckPending)
	}
	if n := len(env.streamMsgs("LOGINCOUNT_OUT")); n != outputs {
		t.Fatalf("an undeployed deployment produced output: %d messages, had %d", n, outputs)
	}
	svc.stop()
}

// TestServiceTimeouts: processing-time timeouts fire with no new input as the clock passes
// them; event-time timeouts fire once the watermark passes them.
func TestServiceTimeouts(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	env.startService(t.TempDir(), clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.deploy(sessionsServiceSpec, testutil.ReadFile(t, "../../samples/sessions/go/sessions.wasm"))
	env.waitRunning("logincount")
	env.waitRunning("sessions")

	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitStream("LOGINCOUNT_OUT", 1)
	clock.Advance(9 * time.Second) // ada's timeout is T+10s: not yet
	// Rows of two other users are the barrier: every batch at T+9s had its chance to fire
	// ada's timeout by the time m1's output is out, and m2's output is sent only after m1's
	// batch (and anything it fired) was acknowledged.
	env.publish("logins.web", `{"user_id":"m1"}`)
	env.waitStream("LOGINCOUNT_OUT", 2)
	env.publish("logins.web", `{"user_id":"m2"}`)
	for _, o := range env.waitStream("LOGINCOUNT_OUT", 3) {
		if strings.Contains(o, "session_closed") {
			t.Fatalf("timeout fired early: %s", o)
		}
	}
	clock.Advance(2 * time.Second) // T+11s: ada's timeout has passed, m1's and m2's (T+19s) not
	out := env.waitStream("LOGINCOUNT_OUT", 4)
	if out[3] != `{"user_id":"ada","total_logins":1,"session_closed":true}` {
		t.Fatalf("processing-time timeout: %v", out)
	}

	// Event time: sessions end at their last event + 5s and close once the watermark (max event
	// time - 10s) is strictly past that. Each step's expected output is also the barrier that
	// shows nothing else closed before it.
	session := func(user string, start, end, events int) string {
		return fmt.Sprintf(`{"user_id":%q,"start":%d,"end":%d,"events":%d}`, user, start, end, events)
	}
	env.publish("clicks.web", `{"user_id":"p","ts":20000}`, `{"user_id":"p","ts":21000}`,
		`{"user_id":"s","ts":14000}`, `{"user_id":"v","ts":20500}`, `{"user_id":"x","ts":21500}`)
	env.publish("clicks.web", `{"user_id":"r","ts":35000}`) // watermark 25000: s (19000) closes
	if out := env.waitStream("GS_SESSIONS_OUT", 1); out[0] != session("s", 14000, 14000, 1) {
		t.Fatalf("watermark 25000: %v", out)
	}
	env.publish("clicks.web", `{"user_id":"u","ts":36000}`) // 26000: v (25500) closes, p (26000) not
	if out := env.waitStream("GS_SESSIONS_OUT", 2); out[1] != session("v", 20500, 20500, 1) {
		t.Fatalf("watermark 26000: %v", out)
	}
	// A row that closes x's session by data (a gap of more than 5s), in a later batch: had p
	// closed at watermark 26000 (not strictly past its end), its output would come before x's.
	env.publish("clicks.web", `{"user_id":"x","ts":27000}`)
	if out := env.waitStream("GS_SESSIONS_OUT", 3); out[2] != session("x", 21500, 21500, 1) {
		t.Fatalf("after x's gap: %v", out)
	}
	env.publish("clicks.web", `{"user_id":"q","ts":40000}`) // 30000: p closes
	if out := env.waitStream("GS_SESSIONS_OUT", 4); out[3] != session("p", 20000, 21000, 2) {
		t.Fatalf("event-time timeout: %v", out)
	}
}

const sessionsServiceSpec = `
name: sessions
module: unused.wasm
input:
  subjects: ["clicks.>"]
key:
  field: user_id
event_time:
  field: ts
  watermark_delay: 10s
timeout: event_time
output:
  subject: sessions.out
config:
  gap: 5s
`

// TestDeployRefusals: an invalid module or spec is refused with a message that says what is
// wrong, and a refused redeploy leaves the running revision alone.
func TestDeployRefusals(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	sp := specFromYAML(t, logincountSpec)
	_, err := env.client.Deploy(ctx, sp, []byte("definitely not wasm"))
	if !errors.Is(err, engine.ErrInvalidModule) || !strings.Contains(err.Error(), "not a WebAssembly binary") {
		t.Fatalf("garbage module: %v", err)
	}
	bad := specFromYAML(t, sessionsServiceSpec)
	bad.Config = map[string]any{"gap": "0s"}
	_, err = env.client.Deploy(ctx, bad, testutil.ReadFile(t, "../../samples/sessions/go/sessions.wasm"))
	if !errors.Is(err, engine.ErrModuleInit) || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("module whose init fails: %v", err)
	}
	invalid := *sp
	invalid.OnError = "explode"
	if _, err := env.client.Deploy(ctx, &invalid, logincountWasm(t)); !errors.Is(err, spec.ErrInvalidSpec) {
		t.Fatalf("invalid spec: %v", err)
	}
	if ds, err := env.client.List(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("refused deploys left deployments: %v %v", ds, err)
	}
	if err := env.client.Undeploy(ctx, "nothing"); !errors.Is(err, client.ErrNotDeployed) {
		t.Fatalf("undeploy of nothing: %v", err)
	}
}

// TestOneRuntimePerDeployment: with two runtimes on one NATS, exactly one runs each
// deployment (its state lives on that runtime's disk), so no row is counted twice. A runtime
// with a fresh data directory gets a new identity, so its outputs do not collide with an
// earlier runtime's message ids.
func TestOneRuntimePerDeployment(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	first := env.startService(t.TempDir(), clock)
	env.startService(t.TempDir(), clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	for range 20 {
		env.publish("logins.web", `{"user_id":"alice"}`)
	}
	env.waitTotals(map[string]int{"alice": 20})
	last := 0
	for _, m := range env.streamMsgs("LOGINCOUNT_OUT") {
		var v struct {
			Total int `json:"total_logins"`
		}
		testutil.Require(t, json.Unmarshal(m.Data, &v))
		if v.Total <= last {
			t.Fatalf("totals not increasing (two runtimes counted): %d after %d", v.Total, last)
		}
		last = v.Total
	}

	// The owner goes away for good; a runtime with a new disk takes over after an undeploy
	// and deploy (the undeploy removed the owner: the one that owned it is not running), and
	// its outputs are not dropped as duplicates of the old ones.
	first.stop()
	testutil.Require(t, env.client.Undeploy(context.Background(), "logincount"))
	before := len(env.streamMsgs("LOGINCOUNT_OUT"))
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"bob"}`)
	testutil.Eventually(t, "an output from the new owner", func() bool { return len(env.streamMsgs("LOGINCOUNT_OUT")) == before+1 })
}

func TestDeployNeedsSubjects(t *testing.T) {
	env := startNATS(t)
	sp := specFromYAML(t, "name: x\nkey: {field: k}\n")
	_, err := env.client.Deploy(context.Background(), sp, logincountWasm(t))
	if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), "input.subjects is required") || !strings.Contains(err.Error(), "output.subject is required") {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := env.client.State(context.Background(), "nothing", []byte(`"k"`)); !errors.Is(err, client.ErrNotDeployed) {
		t.Fatalf("state of an undeployed name: %v", err)
	}
}

// TestServiceFailPolicy: under on_error: fail, a failing key stops the deployment with the
// error in its status and nothing of that batch commits; a redeploy starts it again.
func TestServiceFailPolicy(t *testing.T) {
	env := startNATS(t)
	env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(5000)))
	sp := `
name: strict
module: unused.wasm
input: {subjects: ["strict.in"]}
key: {field: k}
timeout: processing_time
output: {subject: strict.out}
on_error: fail
`
	env.deploy(sp, probeWasm(t))
	env.waitRunning("strict")
	env.publish("strict.in", `{"k":"a","ops":[{"emit":"ok"}]}`)
	env.waitStream("GS_STRICT_OUT", 1)
	env.publish("strict.in", `{"k":"b","ops":[{"fail":"bad b"}]}`)
	var st *client.Status
	testutil.Eventually(t, "failed status", func() bool {
		var err error
		st, err = env.client.Status(context.Background(), "strict")
		return err == nil && st.State == client.StatusFailed
	})
	if !strings.Contains(st.Error, `key "b": bad b`) || st.Position != 1 {
		t.Fatalf("status %+v", st)
	}
	// Redeploying the same spec and module restarts it; the failing row fails it again.
	env.deploy(sp, probeWasm(t))
	testutil.Eventually(t, "failed again after the redeploy", func() bool {
		s, err := env.client.Status(context.Background(), "strict")
		return err == nil && s.State == client.StatusFailed && s.StartedAt.After(st.StartedAt)
	})
	if n := len(env.streamMsgs("GS_STRICT_OUT")); n != 1 {
		t.Fatalf("outputs %d", n)
	}
}

// TestServiceSurvivesNATSRestart: the NATS server restarts while rows flow; the runtime
// pauses, reconnects and resumes with nothing lost and nothing counted twice.
func TestServiceSurvivesNATSRestart(t *testing.T) {
	testutil.Long(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Require(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	natsDir := t.TempDir()
	start := func() *server.Server {
		srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: natsDir, Port: port, Logger: testutil.DiscardLogger()})
		testutil.Require(t, err)
		return srv
	}
	srv := start()
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := service.Connect(service.ConnOptions{URL: srv.ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	testutil.Require(t, err)
	c, err := client.New(context.Background(), nc, client.WithCacheDir(testutil.CompileCacheDir()))
	testutil.Require(t, err)
	env := &natsEnv{t: t, srv: srv, nc: nc, js: js, client: c}
	env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(1_000_000)))
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")

	publish := func(n int) {
		for i := range n {
			for {
				_, err := js.Publish(context.Background(), "logins.web", []byte(fmt.Sprintf(`{"user_id":"u%d"}`, i%5)))
				if err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond) // the server is coming back
			}
		}
	}
	publish(100)
	srv.Shutdown()
	srv.WaitForShutdown()
	srv = start()
	env.srv = srv
	publish(100)
	env.waitTotals(map[string]int{"u0": 40, "u1": 40, "u2": 40, "u3": 40, "u4": 40})
	// The outage shows in the status after the recovery.
	testutil.Eventually(t, "the outage in status", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && st.LastError != "" && st.Error == "" && st.State == client.StatusRunning
	})
}

// TestServiceStorageFault: a Pebble write error halts the deployment with a clear error and
// no acknowledgement of its input; once the fault is gone the runtime reopens the store and
// resumes with nothing lost.
func TestServiceStorageFault(t *testing.T) {
	env := startNATS(t)
	toggle := &errorfs.Toggle{Injector: errorfs.ErrInjected.If(errorfs.Writes)}
	fs := errorfs.Wrap(vfs.NewMem(), toggle)
	svc, err := service.New(context.Background(), service.Options{CacheDir: testutil.CompileCacheDir(),
		DataDir: "/data", Conn: env.nc, Logger: testutil.DiscardLogger(),
		Clock:        timeouts.NewManualClock(time.UnixMilli(1_000_000)),
		StateOptions: &state.Options{FS: fs},
	})
	testutil.Require(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	defer func() { cancel(); <-done }()
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 1})

	toggle.On()
	env.publish("logins.web", `{"user_id":"ada"}`, `{"user_id":"bob"}`)
	testutil.Eventually(t, "the failure in status", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && strings.Contains(st.LastError, "state")
	})
	toggle.Off()
	env.waitTotals(map[string]int{"ada": 2, "bob": 1})
	env.waitRunning("logincount")
}

func probeWasm(t testing.TB) []byte {
	return testutil.ReadFile(t, "../engine/testdata/probe/probe.wasm")
}

// consumerInfo returns the info of the durable input consumer of deployment name.
func (e *natsEnv) consumerInfo(stream, name string) *jetstream.ConsumerInfo {
	e.t.Helper()
	ctx := context.Background()
	c, err := e.js.Consumer(ctx, stream, topology.Consumer(name))
	testutil.Require(e.t, err)
	info, err := c.Info(ctx)
	testutil.Require(e.t, err)
	return info
}

// TestRefusedRedeployLeavesConsumer: a redeploy whose module fails to initialize is refused
// before anything of the running revision is touched, even when its input subjects differ:
// the durable consumer keeps its filter and its position (it is neither updated nor rewound),
// the input stream keeps its subjects, and the running revision goes on processing.
func TestRefusedRedeployLeavesConsumer(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(1_000_000)))
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`, `{"user_id":"bob"}`)
	env.waitTotals(map[string]int{"ada": 1, "bob": 1})
	const inStream = "GS_LOGINCOUNT_IN"
	var before *jetstream.ConsumerInfo
	testutil.Eventually(t, "the input acknowledged", func() bool {
		before = env.consumerInfo(inStream, "logincount")
		return before.AckFloor.Stream == 2 && before.NumAckPending == 0
	})
	st, err := env.js.Stream(ctx, inStream)
	testutil.Require(t, err)
	subjectsBefore := st.CachedInfo().Config.Subjects
	running, err := env.client.Status(ctx, "logincount")
	testutil.Require(t, err)

	// Straight into the registry, past the client's validation: a module whose
	// initialization fails (the sessions sample refuses a gap of 0s), reading other subjects.
	reg, err := registry.OpenRegistry(ctx, env.js, 0)
	testutil.Require(t, err)
	wasm := testutil.ReadFile(t, "../../samples/sessions/go/sessions.wasm")
	digest, err := reg.PutModule(ctx, wasm)
	testutil.Require(t, err)
	bad := specFromYAML(t, strings.Replace(logincountSpec, `subjects: ["logins.>"]`, `subjects: ["elsewhere.>"]`, 1))
	bad.Config = map[string]any{"gap": "0s"}
	specJSON, err := json.Marshal(bad)
	testutil.Require(t, err)
	_, err = reg.Put(ctx, registry.Record{Name: "logincount", Spec: specJSON, ModuleDigest: digest, ModuleSize: int64(len(wasm)), DeployedAt: time.Now().UTC()})
	testutil.Require(t, err)
	var refused *client.Status
	testutil.EventuallyWithin(t, compileDeadline, "the redeploy refused", func() bool {
		refused, err = env.client.Status(ctx, "logincount")
		return err == nil && strings.Contains(refused.Error, "redeploy refused")
	})
	if !strings.Contains(refused.Error, "gap") || refused.State != client.StatusRunning || refused.ModuleDigest != running.ModuleDigest || !refused.StartedAt.Equal(running.StartedAt) {
		t.Fatalf("status after the refused redeploy: %+v", refused)
	}

	after := env.consumerInfo(inStream, "logincount")
	if after.Config.FilterSubject != before.Config.FilterSubject || fmt.Sprint(after.Config.FilterSubjects) != fmt.Sprint(before.Config.FilterSubjects) {
		t.Fatalf("the consumer's filter changed: %q %v, was %q %v", after.Config.FilterSubject, after.Config.FilterSubjects, before.Config.FilterSubject, before.Config.FilterSubjects)
	}
	type position struct{ delivered, ackFloor jetstream.SequenceInfo }
	pos := func(c *jetstream.ConsumerInfo) position {
		p := position{c.Delivered, c.AckFloor}
		p.delivered.Last, p.ackFloor.Last = nil, nil
		return p
	}
	if pos(after) != pos(before) {
		t.Fatalf("the consumer moved (rewound or updated): %+v, was %+v", pos(after), pos(before))
	}
	st, err = env.js.Stream(ctx, inStream)
	testutil.Require(t, err)
	if got := st.CachedInfo().Config.Subjects; fmt.Sprint(got) != fmt.Sprint(subjectsBefore) {
		t.Fatalf("the input stream's subjects changed: %v, were %v", got, subjectsBefore)
	}

	// The running revision still processes its input.
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitTotals(map[string]int{"ada": 2, "bob": 1})
}

// TestRedeployUnderLoad: redeploys while rows flow keep exactly-once: every row's output
// appears once, none is lost or repeated across the switches between revisions.
func TestRedeployUnderLoad(t *testing.T) {
	env := startNATS(t)
	ctx := context.Background()
	env.startService(t.TempDir(), timeouts.NewManualClock(time.UnixMilli(1_000_000)))
	const steady = `
name: steady
module: unused.wasm
input: {subjects: ["steady.in"]}
key: {field: k}
timeout: processing_time
trigger: {max_rows: 100}
output: {subject: steady.out}
config: {revision: 0}
`
	env.deploy(steady, probeWasm(t))
	env.waitRunning("steady")

	const rounds, perRound = 4, 500
	inFlight := 0 // redeploys made while input was still unprocessed
	var lastDeploy time.Time
	for round := range rounds {
		for i := round * perRound; i < (round+1)*perRound; i++ {
			_, err := env.js.PublishAsync("steady.in", fmt.Appendf(nil, `{"k":"u%d","ops":[{"emit":%d}]}`, i%7, i))
			testutil.Require(t, err)
		}
		select {
		case <-env.js.PublishAsyncComplete():
		case <-time.After(testutil.PollDeadline):
			t.Fatal("publishing timed out")
		}
		if round == rounds-1 {
			break
		}
		if c := env.consumerInfo("GS_STEADY_IN", "steady"); c.NumPending+uint64(c.NumAckPending) > 0 {
			inFlight++
		}
		lastDeploy = time.Now()
		env.deploy(strings.Replace(steady, "revision: 0", fmt.Sprintf("revision: %d", round+1), 1), probeWasm(t))
	}
	if inFlight == 0 {
		t.Fatal("every redeploy came after all input was processed: the test proves nothing")
	}
	testutil.Eventually(t, "the last revision running", func() bool {
		st, err := env.client.Status(ctx, "steady")
		return err == nil && st.State == client.StatusRunning && st.StartedAt.After(lastDeploy)
	})
	// A last row after everything: once its output is out, any repeat of an earlier batch
	// would be out too (outputs are delivered in batch order).
	const n = rounds * perRound
	env.publish("steady.in", fmt.Sprintf(`{"k":"end","ops":[{"emit":%d}]}`, n))
	got := env.waitStream("GS_STEADY_OUT", n+1)
	seen := make([]bool, n+1)
	for _, o := range got {
		var i int
		testutil.Require(t, json.Unmarshal([]byte(o), &i), o)
		if i < 0 || i > n || seen[i] {
			t.Fatalf("output %s is unexpected or repeated", o)
		}
		seen[i] = true
	}
	if !seen[n] {
		t.Fatal("the last row's output is missing")
	}
}
