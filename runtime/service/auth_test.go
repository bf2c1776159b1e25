package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/auth"
	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/timeouts"
)

const runtimePassword = "runtime-password-for-tests-0123456789"

var testUsers = []auth.User{
	{Name: "admin", Password: "a-Secret-1", Role: auth.Admin},
	{Name: "ops", Password: "o-Secret-2", Role: auth.Reader},
	{Name: "loader", Password: "l-Secret-3", Role: auth.Producer, Subjects: []string{"logins.>"}},
	{Name: "app", Password: "c-Secret-4", Role: auth.Consumer, Subjects: []string{"logincount.out"}},
}

// authEnv is an embedded server with the test users, and a runtime on it.
type authEnv struct {
	t   *testing.T
	srv *server.Server
}

func startAuthEnv(t *testing.T) *authEnv {
	t.Helper()
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: t.TempDir(), Port: -1, Logger: testutil.DiscardLogger(),
		Users: testUsers, RuntimePassword: runtimePassword})
	testutil.Require(t, err)
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := service.Connect(service.ConnOptions{URL: srv.ClientURL(), User: auth.RuntimeUser, Password: runtimePassword, Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	t.Cleanup(nc.Close)
	// A clock that does not move: logincount's idle timeout never closes a session (and
	// removes its state) while the test reads it, however slow the machine.
	svc, err := service.New(context.Background(), service.Options{CacheDir: testutil.CompileCacheDir(), DataDir: t.TempDir(), Conn: nc, Logger: testutil.DiscardLogger(),
		Clock: timeouts.NewManualClock(time.UnixMilli(1_000_000))})
	testutil.Require(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testutil.Eventually(t, "the runtime ready", svc.Ready)
	return &authEnv{t: t, srv: srv}
}

// conn connects as user with password.
func (e *authEnv) conn(user, password string) *nats.Conn {
	e.t.Helper()
	nc, err := service.Connect(service.ConnOptions{URL: e.srv.ClientURL(), User: user, Password: password, Logger: testutil.DiscardLogger()})
	testutil.Require(e.t, err, "connecting as "+user)
	e.t.Cleanup(nc.Close)
	return nc
}

func (e *authEnv) client(nc *nats.Conn) *client.Client {
	e.t.Helper()
	c, err := client.New(context.Background(), nc, client.WithCacheDir(testutil.CompileCacheDir()))
	testutil.Require(e.t, err, "opening a client")
	e.t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// deniedPublish publishes to subj on nc and reports whether the server refused it: it
// answers a publish it does not permit with a permissions violation naming the subject,
// before the reply to the flush that follows.
func deniedPublish(t *testing.T, nc *nats.Conn, subj string) bool {
	t.Helper()
	testutil.Require(t, nc.Publish(subj, []byte(`{}`)))
	testutil.Require(t, nc.Flush())
	le := nc.LastError()
	return le != nil && strings.Contains(strings.ToLower(le.Error()), "permissions violation") && strings.Contains(le.Error(), `"`+subj+`"`)
}

// TestAuthRoles: with users, anonymous connections are refused, and each role can do what
// it may and nothing else, through the client and through raw NATS requests.
func TestAuthRoles(t *testing.T) {
	e := startAuthEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := service.Connect(service.ConnOptions{URL: e.srv.ClientURL(), Logger: testutil.DiscardLogger()}); err == nil {
		t.Fatal("an anonymous connection was accepted")
	}
	if _, err := service.Connect(service.ConnOptions{URL: e.srv.ClientURL(), User: "admin", Password: "wrong-password", Logger: testutil.DiscardLogger()}); err == nil {
		t.Fatal("a wrong password was accepted")
	}

	// admin deploys.
	adminNC := e.conn("admin", "a-Secret-1")
	admin := e.client(adminNC)
	_, err := admin.Deploy(ctx, specFromYAML(t, logincountSpec), logincountWasm(t))
	testutil.Require(t, err, "admin deploys")
	testutil.EventuallyWithin(t, compileDeadline, "logincount running", func() bool {
		st, err := admin.Status(ctx, "logincount")
		return err == nil && st.State == client.StatusRunning
	})

	// producer publishes its subjects, core and JetStream, and nothing else.
	loaderNC := e.conn("loader", "l-Secret-3")
	loaderJS, err := jetstream.New(loaderNC)
	testutil.Require(t, err)
	_, err = loaderJS.Publish(ctx, "logins.web", []byte(`{"user_id":"ada"}`))
	testutil.Require(t, err, "producer publishes with JetStream")
	testutil.Require(t, loaderNC.Publish("logins.web", []byte(`{"user_id":"ada"}`)), "producer publishes")
	testutil.Require(t, loaderNC.Flush())

	// consumer subscribes to its subject and reads the stream that keeps it.
	appNC := e.conn("app", "c-Secret-4")
	appJS, err := jetstream.New(appNC)
	testutil.Require(t, err)
	cons, err := appJS.OrderedConsumer(ctx, "LOGINCOUNT_OUT", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"logincount.out"}})
	testutil.Require(t, err, "consumer reads the output stream")
	var outputs int
	testutil.EventuallyWithin(t, compileDeadline, "two outputs read by the consumer", func() bool {
		batch, err := cons.FetchNoWait(10)
		if err != nil {
			return false
		}
		for range batch.Messages() {
			outputs++
		}
		return outputs >= 2
	})

	// reader lists, reads status and state.
	opsNC := e.conn("ops", "o-Secret-2")
	ops := e.client(opsNC)
	ds, err := ops.List(ctx)
	if err != nil || len(ds) != 1 || ds[0].Name != "logincount" {
		t.Fatalf("reader list: %v %v", ds, err)
	}
	if _, err := ops.Status(ctx, "logincount"); err != nil {
		t.Fatalf("reader status: %v", err)
	}
	ks, found, err := ops.State(ctx, "logincount", []byte(`"ada"`))
	if err != nil || !found {
		t.Fatalf("reader state: %+v %v %v", ks, found, err)
	}

	// Denials.
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 3*time.Second) }
	{
		c, cancel := short()
		_, err := ops.Deploy(c, specFromYAML(t, strings.Replace(logincountSpec, "name: logincount", "name: other", 1)), logincountWasm(t))
		cancel()
		if !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), "user ops may not deploy other") {
			t.Errorf("reader deploy: %v, want permission denied naming the user and the operation", err)
		}
	}
	{
		c, cancel := short()
		err := ops.Undeploy(c, "logincount")
		cancel()
		if !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), "user ops may not undeploy logincount") {
			t.Errorf("reader undeploy: %v, want permission denied naming the user and the operation", err)
		}
		c, cancel = short()
		_, err = ops.Drain(c, "logincount")
		cancel()
		if !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), "user ops may not drain logincount") {
			t.Errorf("reader drain: %v, want permission denied", err)
		}
		c, cancel = short()
		_, err = client.New(c, loaderNC, client.WithCacheDir(testutil.CompileCacheDir()))
		cancel()
		if !errors.Is(err, client.ErrPermissionDenied) || !strings.Contains(err.Error(), "user loader may not read the deployments") {
			t.Errorf("producer opens a client: %v, want permission denied", err)
		}
	}
	for _, who := range []struct {
		name string
		nc   *nats.Conn
	}{{"ops", opsNC}, {"loader", loaderNC}, {"app", appNC}} {
		for _, subj := range []string{
			"$KV.groupstate-deployments.pwned", // the registry
			"$JS.API.STREAM.DELETE.LOGINCOUNT_OUT",
			"$JS.API.STREAM.PURGE.GS_LOGINCOUNT_IN",
			"$JS.API.CONSUMER.DELETE.GS_LOGINCOUNT_IN.groupstate-logincount",
			"gs.cl.logincount.0",               // a changelog record
			"$KV.groupstate-status.logincount", // a status
			"logincount.out",                   // a forged output
			"groupstate.api.drain.logincount",
		} {
			if !deniedPublish(t, who.nc, subj) {
				t.Errorf("%s may publish to %s", who.name, subj)
			}
		}
	}
	for _, subj := range []string{"gs.cl.logincount.0", "gs.batches.logincount.0", "$KV.groupstate-status.logincount", "logincount.out", "logincount.dlq"} {
		if !deniedPublish(t, adminNC, subj) { // only the runtime writes what it reads back
			t.Errorf("admin may publish to %s", subj)
		}
	}
	if _, err := admin.Status(ctx, "logincount"); err != nil {
		t.Fatalf("status after the denials: %v", err)
	}
	if !deniedPublish(t, loaderNC, "$JS.API.STREAM.INFO.LOGINCOUNT_OUT") {
		t.Error("the producer reads stream info")
	}
	{
		sub, err := appNC.SubscribeSync("logins.>")
		if err == nil {
			_ = appNC.Flush()
			_, err = sub.NextMsg(500 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, nats.ErrPermissionViolation) && !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("consumer subscribes to the input: %v", err)
		}
		if le := appNC.LastError(); le == nil || !strings.Contains(strings.ToLower(le.Error()), "permissions violation") {
			t.Errorf("consumer subscribing to the input: no permissions violation (%v)", le)
		}
	}
}

// TestPingsUnderRequestFlood: a flood of state requests (thousands fired at once, as any
// client may) does not keep a runtime from answering pings, which peers take as its being
// alive.
func TestPingsUnderRequestFlood(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	svc, err := service.New(context.Background(), service.Options{CacheDir: testutil.CompileCacheDir(), DataDir: t.TempDir(), Conn: env.nc, Logger: testutil.DiscardLogger(),
		Clock: timeouts.NewManualClock(time.UnixMilli(1_000_000))}) // no session closes (and drops its key) under a slow run
	testutil.Require(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	const users = 3000 // a keys page of 3000 keys takes the runtime a few milliseconds to answer
	rows := make([]string, users)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"user_id":"user-%05d"}`, i)
	}
	env.publish("logins.web", rows...)
	testutil.EventuallyWithin(t, compileDeadline, "every user counted", func() bool {
		st, err := env.client.Status(context.Background(), "logincount")
		return err == nil && st.StateKeys == users
	})

	flooder, err := service.Connect(service.ConnOptions{URL: env.srv.ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(t, err)
	defer flooder.Close()
	inbox := nats.NewInbox()
	replies, err := flooder.SubscribeSync(inbox)
	testutil.Require(t, err)
	const flood = 5000
	for i := range flood {
		testutil.Require(t, flooder.PublishRequest("groupstate.api.keys.logincount", inbox, []byte(`{"limit":10000}`)))
		if i == flood/2 {
			up, err := api.Ping(context.Background(), env.nc, svc.ID())
			if err != nil || !up {
				t.Fatalf("ping during the flood: up %v, %v", up, err)
			}
		}
	}
	testutil.Require(t, flooder.Flush())
	up, err := api.Ping(context.Background(), env.nc, svc.ID())
	if err != nil || !up {
		t.Fatalf("ping after the flood: up %v, %v", up, err)
	}
	// Every request that was not dropped as a slow consumer's excess got its answer.
	testutil.Eventually(t, "answers to the flood", func() bool {
		n, _, _ := replies.Pending()
		return n > 0
	})
}
