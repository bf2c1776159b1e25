package output

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/state"
)

// TestPubAckError: the server's acknowledgements are told apart without decoding the
// successful ones, and the failed ones keep their JetStream errors (which refused consults).
func TestPubAckError(t *testing.T) {
	noResponders := &nats.Msg{Header: nats.Header{natsio.StatusHeader: []string{"503"}}}
	for _, c := range []struct {
		msg  *nats.Msg
		want error
	}{
		{&nats.Msg{Data: []byte(`{"stream":"OUT","seq":7}`)}, nil},
		{&nats.Msg{Data: []byte(`{"stream":"OUT","domain":"hub","seq":7,"duplicate":true}`)}, nil},
		{&nats.Msg{Data: []byte(`{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}`)}, jetstream.ErrStreamMessageExceedsMaximum},
		{&nats.Msg{Data: []byte(`{"stream":"OUT","error":{"code":503,"err_code":10077,"description":"x"}}`)}, &jetstream.APIError{ErrorCode: 10077}},
		{noResponders, jetstream.ErrNoStreamResponse},
		{&nats.Msg{}, jetstream.ErrInvalidJSAck},
		{&nats.Msg{Data: []byte(`{"seq":7}`)}, jetstream.ErrInvalidJSAck},
		{&nats.Msg{Data: []byte(`not json`)}, jetstream.ErrInvalidJSAck},
	} {
		got := pubAckError(c.msg)
		if (got == nil) != (c.want == nil) || (got != nil && !errors.Is(got, c.want)) {
			t.Errorf("%q: got %v, want %v", c.msg.Data, got, c.want)
		}
	}
}

// TestDeliveryFailsOnDisconnect: when the connection drops while publishes await their
// acknowledgements, Wait fails at once (the outbox is delivered again) instead of after
// PublishAckTimeout.
func TestDeliveryFailsOnDisconnect(t *testing.T) {
	e := newEnv(t)
	// A plain subscriber answers nothing: the publish awaits its acknowledgement.
	if _, err := e.nats.Conn.Subscribe("silent.out", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	p := NewPublisher(e.js, Subjects{Output: "silent.out", DeadLetter: "silent.dlq"})
	d := p.Start(e.ctx, "dep", []state.OutboxEntry{{ID: state.OutboxID{BatchID: 1}, Kind: state.OutboxOutput, Payload: []byte("{}")}})
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	e.nats.Stop()
	err := d.Wait(e.ctx)
	if !errors.Is(err, nats.ErrDisconnected) {
		t.Fatalf("Wait after a disconnect: %v", err)
	}
	if took := time.Since(start); took > PublishAckTimeout/3 {
		t.Fatalf("Wait took %v after the disconnect", took)
	}
}
