package output

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/state"
)

// startWithPermissions starts an embedded JetStream server with one user whose publish
// permissions deny denied (none when empty), and returns it, its options (to reload) and a
// JetStream context connected as that user.
func startWithPermissions(t *testing.T, denied string) (*server.Server, *server.Options, jetstream.JetStream) {
	t.Helper()
	opts := &server.Options{ServerName: "perm", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: "app", Password: "pw", Permissions: publishDenying(denied)}}}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("the embedded NATS server did not start")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("app", "pw"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return srv, opts, js
}

func publishDenying(subject string) *server.Permissions {
	p := &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}}, Subscribe: &server.SubjectPermission{Allow: []string{">"}}}
	if subject != "" {
		p.Publish.Deny = []string{subject}
	}
	return p
}

// TestPermissionErrorDoesNotStick: an output the server refuses for want of a publish
// permission becomes an "unpublishable" dead letter; once the permission is granted, a later
// publish to the same subject whose acknowledgement times out (here: no stream captures the
// subject, only a subscriber that never answers) is a timeout, retried, and not a refusal
// because the connection's last error is still the earlier violation.
func TestPermissionErrorDoesNotStick(t *testing.T) {
	srv, opts, js := startWithPermissions(t, "dep.out")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := natsio.EnsureStream(ctx, js, natsio.StreamOptions{Name: "DLQ", Subjects: []string{"dep.dlq"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// A subscriber that never acknowledges: a publish to dep.out then has no responder error
	// and no acknowledgement, so it times out.
	sub, err := js.Conn().SubscribeSync("dep.out")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	p := NewPublisher(js, Subjects{Output: "dep.out", DeadLetter: "dep.dlq"})
	p.ackTimeout = 500 * time.Millisecond
	entry := func(batch uint64) []state.OutboxEntry {
		return []state.OutboxEntry{{ID: state.OutboxID{BatchID: batch}, Kind: state.OutboxOutput, Key: []byte(`"k"`), Payload: []byte(`{"n":1}`)}}
	}

	// Denied: replaced by a dead letter saying why.
	if err := p.Deliver(ctx, "dep", entry(1)); err != nil {
		t.Fatalf("delivery to a denied subject: %v, want it replaced by a dead letter", err)
	}
	e := &env{js: js, ctx: ctx}
	if dlq := streamMsgs(t, e, "DLQ"); len(dlq) != 1 || dlq[0].Header.Get(HeaderReason) != ReasonUnpublishable {
		t.Fatalf("dead letters after the denied publish: %+v", dlq)
	}
	if last := js.Conn().LastError(); !errors.Is(last, nats.ErrPermissionViolation) {
		t.Fatalf("the connection's last error %v, want the permission violation", last)
	}

	// The permission granted: a timeout is a timeout.
	fixed := *opts
	fixed.Users = []*server.User{{Username: "app", Password: "pw", Permissions: publishDenying("")}}
	if err := srv.ReloadOptions(&fixed); err != nil {
		t.Fatal(err)
	}
	err = p.Deliver(ctx, "dep", entry(2))
	if !errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
		t.Fatalf("delivery after the permission was granted: %v, want a publish acknowledgement timeout", err)
	}
	if dlq := streamMsgs(t, e, "DLQ"); len(dlq) != 1 {
		t.Fatalf("the timed-out output was replaced by a dead letter: %d dead letters, want 1", len(dlq))
	}
	if _, err := sub.NextMsg(time.Second); err != nil {
		t.Fatalf("the permitted publish did not reach the subscriber: %v", err)
	}
}
