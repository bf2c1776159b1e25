package service

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// TestAckerDoesNotWaitForFetches: acknowledging returns while the Source is busy with a fetch
// that waits for input, and once stopped the acker has acknowledged the newest message, which
// covers all before it.
func TestAckerDoesNotWaitForFetches(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	srv, err := StartEmbedded(EmbeddedOptions{DataDir: t.TempDir(), Port: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := Connect(ConnOptions{URL: srv.ClientURL(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ACKS", Subjects: []string{"acks.in"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := js.Publish(ctx, "acks.in", fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	src, err := natsio.NewSource(ctx, js, "ACKS", "acker-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := src.Fetch(ctx, 50, time.Second)
	if err != nil || len(msgs) != 50 {
		t.Fatalf("fetched %d, %v", len(msgs), err)
	}

	// A fetch that waits for input holds the Source for up to a minute.
	fetched := make(chan error, 1)
	go func() {
		_, err := src.Fetch(ctx, 10, time.Minute)
		fetched <- err
	}()
	testutil.Eventually(t, "the fetch to wait on the server", func() bool {
		c, err := js.Consumer(ctx, "ACKS", "acker-test")
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumWaiting > 0
	})
	a := startAcker(src, quiet)
	for _, m := range msgs {
		a.ack(m) // returns at once, fetch or not
	}
	select {
	case err := <-fetched:
		t.Fatalf("the fetch ended before any new input (%v): the test proves nothing", err)
	default:
	}
	if _, err := js.Publish(ctx, "acks.in", []byte(`{"i":50}`)); err != nil { // ends the fetch
		t.Fatal(err)
	}
	if err := <-fetched; err != nil {
		t.Fatal(err)
	}
	a.stop()
	c, err := js.Consumer(ctx, "ACKS", "acker-test")
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != msgs[len(msgs)-1].Sequence {
		t.Fatalf("ack floor %d, want %d", info.AckFloor.Stream, msgs[len(msgs)-1].Sequence)
	}
}
