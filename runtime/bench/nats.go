package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// natsEnv is an embedded NATS server with file storage, a connection and a running service.
type natsEnv struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	client *client.Client
	stop   func()
}

func startEnv(ctx context.Context, dir string, logger *slog.Logger) (*natsEnv, error) {
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: filepath.Join(dir, "nats"), Port: -1, Logger: logger})
	if err != nil {
		return nil, err
	}
	nc, err := service.Connect(service.ConnOptions{URL: srv.ClientURL(), Logger: logger})
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(8192))
	client, err := client.New(ctx, nc)
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, err
	}
	svc, err := service.New(ctx, service.Options{DataDir: filepath.Join(dir, "runtime"), Conn: nc, Logger: logger})
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { svc.Run(sctx); close(done) }()
	return &natsEnv{nc: nc, js: js, client: client, stop: func() {
		cancel()
		<-done
		client.Close(context.Background())
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
	}}, nil
}

func (e *natsEnv) deploy(ctx context.Context, yaml string, wasm []byte) error {
	sp, err := spec.ParseSpec([]byte(yaml))
	if err != nil {
		return err
	}
	if _, err := e.client.Deploy(ctx, sp, wasm); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := e.client.Status(ctx, sp.Name); err == nil && st.State == client.StatusRunning {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("deployment %s did not start", sp.Name)
}

// publishAll publishes n rows made by row(i) to subject through JetStream, waiting for acks.
func (e *natsEnv) publishAll(ctx context.Context, subject string, n int, row func(i int) []byte) error {
	for i := 0; i < n; i++ {
		if _, err := e.js.PublishAsync(subject, row(i)); err != nil {
			return err
		}
		if i%4096 == 4095 {
			select {
			case <-e.js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
		return nil
	case <-time.After(time.Minute):
		return errors.New("publishing timed out")
	}
}

// startedAt returns when deployment name started running (its status's started_at: its
// consumer, state and module instances ready, right before its first batch), the start of
// its processing; deploy has waited for it.
func (e *natsEnv) startedAt(ctx context.Context, name string) (time.Time, error) {
	st, err := e.client.Status(ctx, name)
	if err != nil {
		return time.Time{}, err
	}
	if st.StartedAt.IsZero() {
		return time.Time{}, fmt.Errorf("deployment %s has no start time", name)
	}
	return st.StartedAt, nil
}

// waitCount waits until stream holds n messages and returns the time from since to then.
func (e *natsEnv) waitCount(ctx context.Context, stream string, n int, since time.Time) (time.Duration, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if s, err := e.js.Stream(ctx, stream); err == nil {
			if info, err := s.Info(ctx); err == nil && info.State.Msgs >= uint64(n) {
				return time.Since(since), nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s did not reach %d messages", stream, n)
}

const e2eSpec = `
name: e2e
module: x.wasm
input: {subjects: ["e2e.in"], stream: E2E_IN}
key: {field: user_id}
timeout: processing_time
output: {subject: e2e.out, stream: E2E_OUT}
`

// endToEnd returns rows/s of groupstate (JetStream in, WASM, Pebble, JetStream out, with
// exactly-once) and of the fastest raw pass-through of the same rows (passThrough). Each row
// has its own key, so each yields one output. The rows wait in each side's input stream; each
// side is timed from the moment it starts processing (the raw consumer starts; the deployment
// is running, its status's started_at) to its last output stored.
func endToEnd(ctx context.Context, dir string, wasm []byte, rows int, logger *slog.Logger) (e2e, raw float64, err error) {
	env, err := startEnv(ctx, dir, logger)
	if err != nil {
		return 0, 0, err
	}
	defer env.stop()
	row := func(i int) []byte {
		return fmt.Appendf(nil, `{"user_id":"u%07d","ts":%d}`, i, 1_700_000_000_000+int64(i))
	}

	// The raw baseline.
	for _, s := range []jetstream.StreamConfig{{Name: "RAW_IN", Subjects: []string{"raw.in"}}, {Name: "RAW_OUT", Subjects: []string{"raw.out"}}} {
		if _, err := env.js.CreateStream(ctx, s); err != nil {
			return 0, 0, err
		}
	}
	if err := env.publishAll(ctx, "raw.in", rows, row); err != nil {
		return 0, 0, err
	}
	cons, err := env.js.CreateOrUpdateConsumer(ctx, "RAW_IN", jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckAllPolicy, MaxAckPending: -1})
	if err != nil {
		return 0, 0, err
	}
	rawStart := time.Now()
	stopRaw, err := passThrough(env.js, cons, "raw.out")
	if err != nil {
		return 0, 0, err
	}
	rawTime, err := env.waitCount(ctx, "RAW_OUT", rows, rawStart)
	if rerr := stopRaw(); err == nil {
		err = rerr
	}
	if err != nil {
		return 0, 0, err
	}

	// groupstate: the rows wait in the input stream; the deployment starts on them.
	if _, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "E2E_IN", Subjects: []string{"e2e.in"}}); err != nil {
		return 0, 0, err
	}
	if err := env.publishAll(ctx, "e2e.in", rows, row); err != nil {
		return 0, 0, err
	}
	if err := env.deploy(ctx, e2eSpec, wasm); err != nil {
		return 0, 0, err
	}
	gsStart, err := env.startedAt(ctx, "e2e")
	if err != nil {
		return 0, 0, err
	}
	gsTime, err := env.waitCount(ctx, "E2E_OUT", rows, gsStart)
	if err != nil {
		return 0, 0, err
	}
	return float64(rows) / gsTime.Seconds(), float64(rows) / rawTime.Seconds(), nil
}

const replicationSpec = `
name: %s
module: x.wasm
input: {subjects: ["%s.in"]}
key: {field: user_id}
timeout: processing_time
output: {subject: %s.out, stream: %s_OUT}
replication: %s
`

// replicationCost returns rows/s of the same deployment without replication and with
// replication: changelog (the best of two runs each), each timed from the deployment running (started_at) to its last
// output stored,
// over the same rows
// waiting in its input stream (so the two see the same batches).
func replicationCost(ctx context.Context, dir string, wasm []byte, rows int, logger *slog.Logger) (none, changelog float64, err error) {
	env, err := startEnv(ctx, dir, logger)
	if err != nil {
		return 0, 0, err
	}
	defer env.stop()
	row := func(i int) []byte {
		return fmt.Appendf(nil, `{"user_id":"u%07d","ts":%d}`, i, 1_700_000_000_000+int64(i))
	}
	// Each side runs twice, in turns (none, changelog, none, changelog), and keeps its best:
	// a run of this size lasts about a second, in which one hiccup of the shared machine (a
	// compaction, the server's own flush) moves a single figure by half.
	var rates [2]float64
	for round := range 4 {
		i, mode := round%2, []string{"none", "changelog"}[round%2]
		name := fmt.Sprintf("repl-%s-%d", mode, round/2)
		subj := strings.ReplaceAll(name, "-", "")
		if _, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: strings.ToUpper(subj) + "_IN", Subjects: []string{subj + ".in"}}); err != nil {
			return 0, 0, err
		}
		if err := env.publishAll(ctx, subj+".in", rows, row); err != nil {
			return 0, 0, err
		}
		out := strings.ToUpper(subj)
		if err := env.deploy(ctx, fmt.Sprintf(replicationSpec, name, subj, subj, out, mode), wasm); err != nil {
			return 0, 0, err
		}
		started, err := env.startedAt(ctx, name)
		if err != nil {
			return 0, 0, err
		}
		d, err := env.waitCount(ctx, out+"_OUT", rows, started)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", mode, err)
		}
		rates[i] = max(rates[i], float64(rows)/d.Seconds())
	}
	return rates[0], rates[1], nil
}

const latencySpec = `
name: latency
module: x.wasm
input: {subjects: ["lat.in"]}
key: {field: user_id}
timeout: processing_time
output: {subject: lat.out}
`

// latency publishes rate rows/s for secs seconds and returns the p50 and p99 of the time from
// publishing a row to receiving its output, in milliseconds.
func latency(ctx context.Context, dir string, wasm []byte, rate, secs int, logger *slog.Logger) (p50, p99 float64, err error) {
	env, err := startEnv(ctx, dir, logger)
	if err != nil {
		return 0, 0, err
	}
	defer env.stop()
	if err := env.deploy(ctx, latencySpec, wasm); err != nil {
		return 0, 0, err
	}
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lat []time.Duration
	sub, err := env.nc.Subscribe("lat.out", func(m *nats.Msg) {
		now := time.Now()
		var v struct {
			UserID string `json:"user_id"`
		}
		if json.Unmarshal(m.Data, &v) != nil {
			return
		}
		mu.Lock()
		if t, ok := sent[v.UserID]; ok {
			lat = append(lat, now.Sub(t))
			delete(sent, v.UserID)
		}
		mu.Unlock()
	})
	if err != nil {
		return 0, 0, err
	}
	defer sub.Unsubscribe()
	// Half a second of warm-up at the same rate (instances, consumer, caches), not measured.
	warm := rate / 2
	total := rate*secs + warm
	perTick := rate / 1000
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := 0; i < total; {
		<-tick.C
		for j := 0; j < perTick && i < total; j, i = j+1, i+1 {
			key := fmt.Sprintf("k%07d", i)
			mu.Lock()
			if i >= warm {
				sent[key] = time.Now()
			}
			mu.Unlock()
			if err := env.nc.Publish("lat.in", fmt.Appendf(nil, `{"user_id":%q}`, key)); err != nil {
				return 0, 0, err
			}
		}
	}
	measured := total - warm
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(lat)
		mu.Unlock()
		if n == measured {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lat) < measured*99/100 {
		return 0, 0, fmt.Errorf("only %d of %d outputs arrived", len(lat), measured)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	return pct(0.50), pct(0.99), nil
}

// rawInstance stands for the state store identity in the raw baseline's message ids (a
// store's ID is 16 hex digits).
const rawInstance = "0123456789abcdef"

// passThrough is the raw baseline of the end-to-end figure, the fastest pass-through a Go
// engineer would write with nats.go: it consumes cons with prefetch (Consume), republishes
// each message to subject with the headers groupstate's outputs carry (the same names, values
// of the same lengths, and a Nats-Msg-Id of the same shape, so the stream stores and
// deduplicates what it does for groupstate), and acknowledges the inputs (AckAll) as the
// publishes before them are acknowledged by the output stream: at least once, like groupstate
// without its state. Since round three (issue 32) it publishes and collects acknowledgements
// as groupstate does (fastPub: core publishes, one inbox for the acknowledgements, a window),
// and acknowledges its inputs in batches, once per advance of the acknowledged publishes;
// with nats.go's per-message futures it was slower than groupstate. stop ends it and returns
// the first error it met.
func passThrough(js jetstream.JetStream, cons jetstream.Consumer, subject string) (stop func() error, err error) {
	pub, err := newFastPub(js.Conn(), 1<<16, 8192)
	if err != nil {
		return nil, err
	}
	var firstErr error
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	acked := make(chan struct{})
	go func() { // acknowledges the inputs up to the last publish acknowledged, at each advance
		defer close(acked)
		prev := 0
		for {
			d, tag, err := pub.waitBeyond(prev)
			if err != nil {
				fail(err)
				return
			}
			if d <= prev {
				return // stopped
			}
			_ = tag.(jetstream.Msg).Ack()
			prev = d
		}
	}()
	n := 0
	cc, err := cons.Consume(func(m jetstream.Msg) {
		n++
		meta, _ := m.Metadata()
		seq := uint64(n)
		if meta != nil {
			seq = meta.Sequence.Stream
		}
		batch := seq/10_000 + 1 // groupstate's batches: trigger.max_rows
		h := nats.Header{}
		h.Set(service.HeaderDeployment, "raw")
		h.Set(service.HeaderKey, fmt.Sprintf(`"u%07d"`, seq))
		h.Set(service.HeaderBatch, strconv.FormatUint(batch, 10))
		h.Set(jetstream.MsgIDHeader, output.MsgID("raw", rawInstance, 0, state.OutboxID{BatchID: batch, Seq: uint32(seq % 10_000)}))
		if _, err := pub.publish(&nats.Msg{Subject: subject, Data: m.Data(), Header: h}, m); err != nil {
			fail(err)
		}
	}, jetstream.PullMaxMessages(10_000))
	if err != nil {
		pub.stop()
		<-acked
		pub.close()
		return nil, err
	}
	return func() error {
		cc.Stop()
		<-cc.Closed()
		pub.stop()
		<-acked
		pub.close()
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}, nil
}
