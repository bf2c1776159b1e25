package input

import (
	"context"
	"fmt"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StoredMsg is a message as a stream stores it.
type StoredMsg struct {
	Subject  string
	Sequence uint64
	Header   nats.Header
	Data     []byte
	Time     time.Time
}

// StreamReader reads the messages a stream held when the reader was opened, in sequence
// order, with an ephemeral consumer that acknowledges nothing (see [OpenStreamReader]). Not
// safe for concurrent use.
type StreamReader struct {
	js     jetstream.JetStream
	stream string
	cons   jetstream.Consumer
	left   uint64 // messages not read yet
	batch  jetstream.MessageBatch
	got    int                // messages of batch read
	cancel context.CancelFunc // of batch's fetch
}

// OpenStreamReader opens a reader of the messages of stream whose subjects match filters
// (every message when filters is empty), from sequence from on (0 or 1: the first). Close it.
func OpenStreamReader(ctx context.Context, js jetstream.JetStream, stream string, filters []string, from uint64) (*StreamReader, error) {
	return openStreamReader(ctx, js, stream, filters, from, time.Time{})
}

// OpenStreamReaderAt is [OpenStreamReader] from the first message stored at or after since.
func OpenStreamReaderAt(ctx context.Context, js jetstream.JetStream, stream string, filters []string, since time.Time) (*StreamReader, error) {
	return openStreamReader(ctx, js, stream, filters, 0, since)
}

func openStreamReader(ctx context.Context, js jetstream.JetStream, stream string, filters []string, from uint64, since time.Time) (*StreamReader, error) {
	cfg := jetstream.ConsumerConfig{
		FilterSubjects:    filters,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
		MemoryStorage:     true,
	}
	switch {
	case !since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	case from > 1:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := js.CreateConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("natsio: reading stream %s: %w", stream, err)
	}
	return &StreamReader{js: js, stream: stream, cons: cons, left: cons.CachedInfo().NumPending}, nil
}

// Next returns the next message; ok is false once every message the stream held when the
// reader was opened was read. The message is the caller's to keep.
func (r *StreamReader) Next(ctx context.Context) (m StoredMsg, ok bool, err error) {
	for {
		if r.batch == nil {
			if r.left == 0 {
				return StoredMsg{}, false, nil
			}
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r.batch, err = r.cons.Fetch(int(min(r.left, 1000)), jetstream.FetchContext(fctx))
			r.cancel = cancel
			if err != nil {
				return StoredMsg{}, false, fmt.Errorf("natsio: reading stream %s: %w", r.stream, err)
			}
			r.got = 0
		}
		msg, open := <-r.batch.Messages()
		if !open {
			err := r.batch.Error()
			r.cancel()
			if err == nil && r.got == 0 {
				err = fmt.Errorf("no message came though %d are pending", r.left)
			}
			r.batch = nil
			if err != nil {
				return StoredMsg{}, false, fmt.Errorf("natsio: reading stream %s: %w", r.stream, err)
			}
			continue
		}
		r.got++
		md, err := msg.Metadata()
		if err != nil {
			return StoredMsg{}, false, fmt.Errorf("natsio: reading stream %s: %w", r.stream, err)
		}
		r.left = md.NumPending
		return StoredMsg{Subject: msg.Subject(), Sequence: md.Sequence.Stream, Header: msg.Headers(), Data: msg.Data(), Time: md.Timestamp}, true, nil
	}
}

// Close deletes the reader's consumer.
func (r *StreamReader) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), natsio.ResolveTimeout)
	defer cancel()
	_ = r.js.DeleteConsumer(ctx, r.stream, r.cons.CachedInfo().Name)
}
