package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/samples"
)

// newDemoCommand returns `groupstate demo`, the one-command tour.
func newDemoCommand() *cobra.Command {
	var users, clicks int
	var verbose bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A one-command tour: embedded NATS, the runtime, the sessions sample and a click stream",
		Long: `Starts an embedded NATS server and the runtime in a temporary directory, deploys the
sessions sample (event-time sessionization with a 5s gap and a 10s watermark delay), publishes
a generated click stream with event times, prints sessions as they close, and exits.`,
		Example: `  go run ./cmd/groupstate demo
  groupstate demo --users 50 --clicks 5000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), users, clicks, verbose)
		},
	}
	cmd.Flags().IntVar(&users, "users", 12, "number of users clicking")
	cmd.Flags().IntVar(&clicks, "clicks", 600, "number of clicks to publish")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show the runtime's logs")
	return cmd
}

// closedSession is a row the sessions sample emits when a session closes.
type closedSession struct {
	UserID string `json:"user_id"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Events int64  `json:"events"`
}

// runDemo runs the tour: it prints its steps and the closed sessions to out and, with
// verbose, the runtime's logs to stderr.
func runDemo(ctx context.Context, out, stderr io.Writer, users, clicks int, verbose bool) error {
	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	dir, err := os.MkdirTemp("", "groupstate-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	step := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }
	step("starting an embedded NATS server with JetStream (storage in %s)", dir)
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: dir + "/nats", Port: -1, Logger: logger})
	if err != nil {
		return err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	nc, err := service.Connect(service.ConnOptions{URL: srv.ClientURL(), Name: "groupstate demo", Logger: logger})
	if err != nil {
		return err
	}
	defer nc.Close()

	step("starting the runtime")
	svc, err := service.New(ctx, service.Options{DataDir: dir + "/runtime", CacheDir: defaultCacheDir(), Conn: nc, Logger: logger}) // compiled once per machine, as deploy and test do
	if err != nil {
		return err
	}
	svcCtx, stopSvc := context.WithCancel(ctx)
	svcDone := make(chan error, 1)
	go func() { svcDone <- svc.Run(svcCtx) }()
	defer func() { stopSvc(); <-svcDone }()

	specYAML, _ := samples.FS.ReadFile("sessions/sessions.yaml")
	wasm, _ := samples.FS.ReadFile("sessions/go/sessions.wasm")
	sp, err := spec.ParseSpec(specYAML)
	if err != nil {
		return err
	}
	gs, err := client.New(ctx, nc)
	if err != nil {
		return err
	}
	defer gs.Close(context.Background())
	d, err := gs.Deploy(ctx, sp, wasm)
	if err != nil {
		return err
	}
	step("deployed %q: key %s, event time %s, watermark delay %s, gap %v (module %.12s)",
		d.Name, sp.Key.Field, sp.EventTime.Field, sp.EventTime.WatermarkDelay.Std(), sp.Config["gap"], d.ModuleDigest)

	sessions := make(chan *nats.Msg, 4096)
	sub, err := nc.ChanSubscribe(sp.Output.Subject, sessions)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()

	if err := waitRunning(ctx, gs, sp.Name); err != nil {
		return err
	}
	subject := "clicks.web"
	step("publishing %d clicks from %d users to %s", clicks, users, subject)
	lastTs, err := publishClicks(ctx, nc, subject, users, clicks)
	if err != nil {
		return err
	}
	// One click far in event time moves the watermark past every session, so all close.
	tick := lastTs + time.Minute.Milliseconds()
	if err := publishJSON(nc, subject, map[string]any{"user_id": "clock", "ts": tick, "page": "/"}); err != nil {
		return err
	}
	step("closed sessions, as the runtime emits them on %s:", sp.Output.Subject)
	n, events := 0, int64(0)
	quiet := time.NewTimer(3 * time.Second)
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case m := <-sessions:
			var s closedSession
			if json.Unmarshal(m.Data, &s) == nil {
				n++
				events += s.Events
				fmt.Fprintf(out, "    %-8s %2d clicks  %s -> %s  (%s)\n", s.UserID, s.Events,
					time.UnixMilli(s.Start).UTC().Format("15:04:05"), time.UnixMilli(s.End).UTC().Format("15:04:05"),
					time.Duration(s.End-s.Start)*time.Millisecond)
			}
			quiet.Reset(2 * time.Second)
		case <-quiet.C:
			done = true
		case <-deadline:
			done = true
		case <-ctx.Done():
			return nil
		}
	}
	st, err := gs.Status(ctx, sp.Name)
	if err != nil {
		return err
	}
	step("%d sessions closed, covering %d of %d clicks; runtime status: %d rows in (the clicks and the one that moved the watermark), %d late rows dropped, %d dead letters, %d batches",
		n, events, clicks, st.RowsIn, st.LateRows, st.DeadLetters, st.Batches)
	step("done: deploy your own handler with `groupstate serve` and `groupstate deploy` (see the README)")
	return nil
}

// waitRunning polls until the deployment's status says running.
func waitRunning(ctx context.Context, c *client.Client, name string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := c.Status(ctx, name)
		if err == nil && st.State == client.StatusRunning {
			return nil
		}
		if err == nil && st.State == client.StatusFailed {
			return fmt.Errorf("deployment %s failed: %s", name, st.Error)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("deployment %s did not start within 30s", name)
}

// publishClicks publishes a click stream: users click in bursts (sessions) separated by
// pauses longer than the gap; event time runs ahead of the wall clock, and clicks arrive up
// to two seconds out of order (within the watermark delay, so none is late). It returns the
// largest event time.
func publishClicks(ctx context.Context, nc *nats.Conn, subject string, users, clicks int) (int64, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	idleUntil := make([]int64, users)
	pages := []string{"/", "/search", "/product/42", "/cart", "/checkout", "/help"}
	var maxTs int64
	var futures []jetstream.PubAckFuture
	for i := 0; i < clicks; {
		now += 50 + rng.Int64N(150)
		u := rng.IntN(users)
		if idleUntil[u] > now {
			continue
		}
		if rng.IntN(10) == 0 {
			idleUntil[u] = now + 6_000 + rng.Int64N(30_000) // a pause longer than the 5s gap
		}
		ts := now - rng.Int64N(2_000)
		maxTs = max(maxTs, ts)
		data, _ := json.Marshal(map[string]any{"user_id": fmt.Sprintf("user%02d", u), "ts": ts, "page": pages[rng.IntN(len(pages))]})
		f, err := js.PublishAsync(subject, data)
		if err != nil {
			return 0, err
		}
		futures = append(futures, f)
		i++
		if i%50 == 0 {
			time.Sleep(20 * time.Millisecond) // a stream, not a bulk load: batches form as rows arrive
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return 0, err
		}
	}
	return maxTs, nil
}

// publishJSON publishes v as JSON to subject through JetStream and waits for the acknowledgement.
func publishJSON(nc *nats.Conn, subject string, v any) error {
	data, _ := json.Marshal(v)
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.Publish(context.Background(), subject, data)
	return err
}
