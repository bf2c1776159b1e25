package output

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/state"
)

// Publisher must satisfy runtime.Sink structurally.
var _ interface {
	Deliver(ctx context.Context, deployment string, entries []state.OutboxEntry) error
} = (*Publisher)(nil)

func streamMsgs(t *testing.T, e *env, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	st, err := e.js.Stream(e.ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(e.ctx, seq)
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

func setupOutputs(t *testing.T, e *env) {
	t.Helper()
	for name, subj := range map[string]string{"OUT": "dep.out", "DLQ": "dep.dlq", "LATE": "dep.late"} {
		if _, err := natsio.EnsureStream(e.ctx, e.js, natsio.StreamOptions{Name: name, Subjects: []string{subj}, Duplicates: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPublisherDeliver(t *testing.T) {
	e := newEnv(t)
	setupOutputs(t, e)
	p := NewPublisher(e.js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq", Late: "dep.late"})

	var entries []state.OutboxEntry
	for i := range 10 {
		entries = append(entries, state.OutboxEntry{
			ID:      state.OutboxID{BatchID: 7, Seq: uint32(i)},
			Kind:    state.OutboxOutput,
			Key:     fmt.Appendf(nil, `"user%d"`, i%3),
			Payload: fmt.Appendf(nil, `{"n":%d}`, i),
		})
	}
	entries = append(entries,
		state.OutboxEntry{ID: state.OutboxID{BatchID: 7, Seq: 10}, Kind: state.OutboxDeadLetter, Payload: []byte("bad"),
			Reason: "invalid_json", Sequence: 42},
		state.OutboxEntry{ID: state.OutboxID{BatchID: 7, Seq: 11}, Kind: state.OutboxLate, Key: []byte("1"), Payload: []byte(`{"late":true}`)},
		state.OutboxEntry{ID: state.OutboxID{BatchID: 8, Seq: 0}, Kind: state.OutboxOutput, Payload: []byte(`{"nokey":1}`)},
	)
	if err := p.Deliver(e.ctx, "dep", entries); err != nil {
		t.Fatal(err)
	}
	// Deliver again (as after a crash): the duplicate window drops every message.
	if err := p.Deliver(e.ctx, "dep", entries); err != nil {
		t.Fatal(err)
	}

	out := streamMsgs(t, e, "OUT")
	if len(out) != 11 {
		t.Fatalf("OUT holds %d messages, want 11 (no duplicates)", len(out))
	}
	for i, m := range out[:10] {
		if want := fmt.Sprintf(`{"n":%d}`, i); string(m.Data) != want {
			t.Fatalf("out %d: %s, want %s (order)", i, m.Data, want)
		}
		h := m.Header
		if h.Get(HeaderDeployment) != "dep" || h.Get(HeaderKey) != fmt.Sprintf(`"user%d"`, i%3) || h.Get(HeaderBatch) != "7" {
			t.Fatalf("out %d headers %v", i, h)
		}
		if got, want := h.Get(jetstream.MsgIDHeader), fmt.Sprintf("dep.7.%d", i); got != want {
			t.Fatalf("out %d Nats-Msg-Id %q, want %q", i, got, want)
		}
	}
	if last := out[10]; last.Header.Get(HeaderKey) != "" || last.Header.Get(HeaderBatch) != "8" || last.Header.Get(jetstream.MsgIDHeader) != "dep.8.0" {
		t.Fatalf("keyless entry headers %v", last.Header)
	}

	dlq := streamMsgs(t, e, "DLQ")
	if len(dlq) != 1 || string(dlq[0].Data) != "bad" || dlq[0].Header.Get(HeaderReason) != "invalid_json" ||
		dlq[0].Header.Get(HeaderSequence) != "42" || dlq[0].Header.Get(HeaderDeployment) != "dep" {
		t.Fatalf("dead letters %+v", dlq)
	}
	late := streamMsgs(t, e, "LATE")
	if len(late) != 1 || string(late[0].Data) != `{"late":true}` || late[0].Header.Get(HeaderKey) != "1" {
		t.Fatalf("late %+v", late)
	}

	// Without a late subject, late entries are dropped.
	p2 := NewPublisher(e.js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq"})
	if err := p2.Deliver(e.ctx, "dep", []state.OutboxEntry{{ID: state.OutboxID{BatchID: 9}, Kind: state.OutboxLate, Payload: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if n := len(streamMsgs(t, e, "LATE")); n != 1 {
		t.Fatalf("late entry published without late subject: %d", n)
	}
	if err := p2.Deliver(e.ctx, "dep", nil); err != nil {
		t.Fatal(err)
	}
}

func TestPublisherLargeBatch(t *testing.T) {
	e := newEnv(t)
	setupOutputs(t, e)
	p := NewPublisher(e.js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq"})
	n := PublishWindow*2 + 17
	entries := make([]state.OutboxEntry, n)
	for i := range entries {
		entries[i] = state.OutboxEntry{ID: state.OutboxID{BatchID: 1, Seq: uint32(i)}, Kind: state.OutboxOutput, Payload: fmt.Appendf(nil, "%d", i)}
	}
	if err := p.Deliver(e.ctx, "dep", entries); err != nil {
		t.Fatal(err)
	}
	st, err := e.js.Stream(e.ctx, "OUT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(n) {
		t.Fatalf("stream holds %d, want %d", info.State.Msgs, n)
	}
	m, err := st.GetMsg(e.ctx, info.State.LastSeq)
	if err != nil || string(m.Data) != fmt.Sprint(n-1) {
		t.Fatalf("last message %v, %v (order)", m, err)
	}
}

// TestPublisherStart shows that Wait collects a started delivery (more messages than the
// window), twice with the same result, and reports a delivery that failed while sending.
func TestPublisherStart(t *testing.T) {
	e := newEnv(t)
	setupOutputs(t, e)
	p := NewPublisher(e.js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq"})
	n := PublishWindow + 5
	entries := make([]state.OutboxEntry, n)
	for i := range entries {
		entries[i] = state.OutboxEntry{ID: state.OutboxID{BatchID: 2, Seq: uint32(i)}, Kind: state.OutboxOutput, Payload: fmt.Appendf(nil, "%d", i)}
	}
	d := p.Start(e.ctx, "dep", entries)
	if err := d.Wait(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(e.ctx); err != nil {
		t.Fatalf("second Wait: %v", err)
	}
	// Counted, not read: reading 16k messages one request each takes longer than e.ctx
	// allows under the race detector.
	st, err := e.js.Stream(e.ctx, "OUT")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Msgs; got != uint64(n) || info.State.LastSeq != uint64(n) {
		t.Fatalf("stream holds %d (last sequence %d), want %d", got, info.State.LastSeq, n)
	}
	bad := NewPublisher(e.js, Subjects{Output: "dep.out"}).Start(e.ctx, "dep",
		[]state.OutboxEntry{{ID: state.OutboxID{BatchID: 3}, Kind: state.OutboxDeadLetter, Payload: []byte("x")}})
	if err := bad.Wait(e.ctx); !errors.Is(err, ErrNoSubject) {
		t.Fatalf("Wait after a failed Start: %v", err)
	}
}

func TestPublisherErrors(t *testing.T) {
	e := newEnv(t)
	setupOutputs(t, e)
	// No stream captures the subject: the publish fails, Deliver reports it.
	p := NewPublisher(e.js, Subjects{Output: "nowhere.out", DeadLetter: "dep.dlq"})
	err := p.Deliver(e.ctx, "dep", []state.OutboxEntry{{ID: state.OutboxID{BatchID: 1}, Kind: state.OutboxOutput, Payload: []byte("x")}})
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Fatalf("publish without stream: %v", err)
	}
	p = NewPublisher(e.js, Subjects{Output: "dep.out"})
	err = p.Deliver(e.ctx, "dep", []state.OutboxEntry{{ID: state.OutboxID{BatchID: 1}, Kind: state.OutboxDeadLetter, Payload: []byte("x")}})
	if !errors.Is(err, ErrNoSubject) {
		t.Fatalf("dead letter without subject: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	p = NewPublisher(e.js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq"})
	err = p.Deliver(ctx, "dep", []state.OutboxEntry{{ID: state.OutboxID{BatchID: 1}, Kind: state.OutboxOutput, Payload: []byte("x")}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

func TestMsgID(t *testing.T) {
	if got := MsgID("login-count", "", 0, state.OutboxID{BatchID: 12, Seq: 3}); got != "login-count.12.3" {
		t.Fatalf("MsgID = %q", got)
	}
	if got := MsgID("login-count", "ab", 2, state.OutboxID{BatchID: 12, Seq: 3}); got != "login-count.ab.g2.12.3" {
		t.Fatalf("MsgID with generation = %q", got)
	}
	p := NewPublisher(nil, Subjects{}).WithInstance("ab").WithGeneration(2, 10)
	if got := p.msgID("d", state.OutboxID{BatchID: 9}); got != "d.ab.g1.9.0" {
		t.Fatalf("msgID before the generation = %q", got)
	}
	if got := p.msgID("d", state.OutboxID{BatchID: 10}); got != "d.ab.g2.10.0" {
		t.Fatalf("msgID in the generation = %q", got)
	}
}

// TestPublisherTooLarge: an entry larger than the server's max_payload cannot ever be
// published; it is replaced by a small dead letter saying so (same message id), so delivery
// does not fail forever and the entries after it go out.
func TestPublisherTooLarge(t *testing.T) {
	e := newEnv(t)
	setupOutputs(t, e)
	p := NewPublisher(e.js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq"}).WithInstance("abcd")
	big := bytes.Repeat([]byte("x"), int(e.nats.Conn.MaxPayload())+1)
	entries := []state.OutboxEntry{
		{ID: state.OutboxID{BatchID: 1, Seq: 0}, Kind: state.OutboxOutput, Key: []byte(`"k"`), Payload: big},
		{ID: state.OutboxID{BatchID: 1, Seq: 1}, Kind: state.OutboxOutput, Key: []byte(`"k"`), Payload: []byte(`{"ok":1}`)},
	}
	if err := p.Deliver(e.ctx, "dep", entries); err != nil {
		t.Fatal(err)
	}
	out := streamMsgs(t, e, "OUT")
	if len(out) != 1 || string(out[0].Data) != `{"ok":1}` || out[0].Header.Get(jetstream.MsgIDHeader) != "dep.abcd.1.1" {
		t.Fatalf("outputs: %d", len(out))
	}
	dlq := streamMsgs(t, e, "DLQ")
	if len(dlq) != 1 || dlq[0].Header.Get(HeaderReason) != ReasonTooLargeToPublish || !strings.Contains(dlq[0].Header.Get(HeaderError), "max_payload") ||
		dlq[0].Header.Get(HeaderKey) != `"k"` || dlq[0].Header.Get(jetstream.MsgIDHeader) != "dep.abcd.1.0" {
		t.Fatalf("dead letters: %+v", dlq)
	}
}

// TestPublisherCountsHeaderFraming: an entry whose data and header lines fit max_payload but
// not with the headers' framing used to fail on every delivery; it becomes a dead letter.
func TestPublisherCountsHeaderFraming(t *testing.T) {
	e := newEnv(t)
	setupOutputs(t, e)
	p := NewPublisher(e.js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq"})
	probe := &nats.Msg{Subject: "dep.out", Header: nats.Header{}}
	probe.Header.Set(HeaderDeployment, "dep")
	probe.Header.Set(HeaderKey, `"k"`)
	probe.Header.Set(HeaderBatch, "1")
	probe.Header.Set(jetstream.MsgIDHeader, "dep.1.0")
	room := int(e.js.Conn().MaxPayload()) - WireSize(probe) // what is left for the payload
	entries := []state.OutboxEntry{
		{ID: state.OutboxID{BatchID: 1, Seq: 0}, Kind: state.OutboxOutput, Key: []byte(`"k"`), Payload: bytes.Repeat([]byte("x"), room)},
		{ID: state.OutboxID{BatchID: 1, Seq: 1}, Kind: state.OutboxOutput, Key: []byte(`"k"`), Payload: bytes.Repeat([]byte("y"), room+1)},
	}
	if err := p.Deliver(e.ctx, "dep", entries); err != nil {
		t.Fatalf("delivery of an entry over max_payload by one byte: %v", err)
	}
	if out := streamMsgs(t, e, "OUT"); len(out) != 1 || len(out[0].Data) != room {
		t.Fatalf("the entry that fits exactly was not published: %d outputs", len(out))
	}
	if dlq := streamMsgs(t, e, "DLQ"); len(dlq) != 1 || dlq[0].Header.Get(HeaderReason) != ReasonTooLargeToPublish {
		t.Fatalf("dead letters: %+v", dlq)
	}
}

// TestPublisherReplacesRefusedMessages: a message its stream refuses for good (larger than
// the stream's max_msg_size) cannot block the deployment: it becomes a small dead letter that
// says why, and the entries after it are published.
func TestPublisherReplacesRefusedMessages(t *testing.T) {
	e := newEnv(t)
	setupOutputs(t, e)
	st, err := e.js.Stream(e.ctx, "OUT")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = 512
	if _, err := e.js.UpdateStream(e.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	entries := []state.OutboxEntry{
		{ID: state.OutboxID{BatchID: 1, Seq: 0}, Kind: state.OutboxOutput, Key: []byte(`"k"`), Payload: bytes.Repeat([]byte("x"), 1000)},
		{ID: state.OutboxID{BatchID: 1, Seq: 1}, Kind: state.OutboxOutput, Key: []byte(`"k"`), Payload: []byte(`{"ok":1}`)},
	}
	p := NewPublisher(e.js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq"})
	if err := p.Deliver(e.ctx, "dep", entries); err != nil {
		t.Fatalf("delivery with an entry over the stream's max_msg_size: %v", err)
	}
	if out := streamMsgs(t, e, "OUT"); len(out) != 1 || string(out[0].Data) != `{"ok":1}` {
		t.Fatalf("outputs: %+v", out)
	}
	dlq := streamMsgs(t, e, "DLQ")
	if len(dlq) != 1 || dlq[0].Header.Get(HeaderReason) != ReasonUnpublishable || !strings.Contains(dlq[0].Header.Get(HeaderError), "maximum") ||
		dlq[0].Header.Get(jetstream.MsgIDHeader) != "dep.1.0" {
		t.Fatalf("dead letters: %+v", dlq)
	}

}

// TestFailedDeliverySettles: when a delivery fails, Wait returns only once no publish of it
// is pending: a later message of a failed delivery that the server still stores could
// otherwise land after the outbox was sent again, out of order.
func TestFailedDeliverySettles(t *testing.T) {
	e := newEnv(t) // no stream captures the subjects
	p := NewPublisher(e.js, Subjects{Output: "nowhere.out", DeadLetter: "nowhere.dlq"})
	var entries []state.OutboxEntry
	for i := range 50 {
		entries = append(entries, state.OutboxEntry{ID: state.OutboxID{BatchID: 1, Seq: uint32(i)}, Kind: state.OutboxOutput, Payload: []byte("{}")})
	}
	d := p.Start(e.ctx, "dep", entries)
	if err := d.Wait(e.ctx); err == nil {
		t.Fatal("a delivery to no stream succeeded")
	}
	if n := d.pending(); n != 0 {
		t.Fatalf("%d publishes of the failed delivery are still pending after Wait", n)
	}
}
