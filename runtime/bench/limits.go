package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsLimits measures what the embedded JetStream server itself sustains on this machine, the
// ceiling the end-to-end figure sits under: rows rows published asynchronously with message
// ids (deduplicated, as groupstate's outputs are; `nats bench js pub async --dedup`), with
// the publishing groupstate's outputs use (fastPub; before round three nats.go's
// PublishMsgAsync, whose future per message made the "ceiling" slower than groupstate on a
// loaded machine), then
// consumed with every message acknowledged (`nats bench js consume --acks all`), as rows/s.
func natsLimits(ctx context.Context, dir string, rows int, logger *slog.Logger) (pub, consume float64, err error) {
	env, err := startEnv(ctx, dir, logger)
	if err != nil {
		return 0, 0, err
	}
	defer env.stop()
	if _, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "LIMIT", Subjects: []string{"limit.in"}, Duplicates: 10 * time.Minute}); err != nil {
		return 0, 0, err
	}
	fp, err := newFastPub(env.nc, rows, 8192)
	if err != nil {
		return 0, 0, err
	}
	defer fp.close()
	start := time.Now()
	for i := range rows {
		m := &nats.Msg{Subject: "limit.in", Data: fmt.Appendf(nil, `{"user_id":"u%07d","ts":%d}`, i, 1_700_000_000_000+int64(i)), Header: nats.Header{}}
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("limit.%d", i))
		if _, err := fp.publish(m, nil); err != nil {
			return 0, 0, err
		}
	}
	if _, err := fp.waitDone(rows, time.Minute); err != nil {
		return 0, 0, fmt.Errorf("publishing %d rows: %w", rows, err)
	}
	pub = float64(rows) / time.Since(start).Seconds()

	cons, err := env.js.CreateOrUpdateConsumer(ctx, "LIMIT", jetstream.ConsumerConfig{Durable: "limit", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: -1})
	if err != nil {
		return 0, 0, err
	}
	done := make(chan struct{})
	got := 0
	start = time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		_ = m.Ack()
		if got++; got == rows {
			close(done)
		}
	}, jetstream.PullMaxMessages(10_000))
	if err != nil {
		return 0, 0, err
	}
	defer cc.Stop()
	select {
	case <-done:
	case <-time.After(time.Minute):
		return 0, 0, fmt.Errorf("consuming %d rows timed out", rows)
	}
	return pub, float64(rows) / time.Since(start).Seconds(), nil
}
