package service_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// TestIdleDeploymentWaits: an idle deployment does not ask JetStream for input every trigger
// interval (10 ms): its fetch is a long poll, so a few pull requests reach its consumer in
// seconds of idling, not hundreds; and a row published into it while it idles is still taken
// at once (the long poll ends when the row arrives), its output out well within a second.
func TestIdleDeploymentWaits(t *testing.T) {
	env := startNATS(t)
	var pulls atomic.Int64
	sub, err := env.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT.*.groupstate-logincount", func(*nats.Msg) { pulls.Add(1) })
	testutil.Require(t, err)
	defer sub.Unsubscribe()
	env.startService(t.TempDir(), nil)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	env.publish("logins.web", `{"user_id":"ada"}`)
	env.waitStream("LOGINCOUNT_OUT", 1)

	const window = 3 * time.Second // ada's timeout is 10 s away: nothing is due
	before := pulls.Load()
	time.Sleep(window)
	if n := pulls.Load() - before; n > 6 {
		t.Fatalf("%d pull requests in %v of idling (one every %v); want a few long polls", n, window, window/time.Duration(n))
	}

	env.publish("logins.web", `{"user_id":"bob"}`)
	testutil.EventuallyWithin(t, time.Second, "bob's output from an idle deployment", func() bool {
		return len(env.streamMsgs("LOGINCOUNT_OUT")) == 2
	})
}

// TestIdleStatusOnHeartbeat: an idle deployment's status is kept fresh by one mechanism, the
// service's heartbeat (client.StatusHeartbeat), not also by a put at every long poll of its
// runner, and its lag asks the server nothing while the deployment is idle (its last fetch
// found nothing): each idle deployment costs a status put every heartbeat and no more
// (issue 30: 100 idle deployments made 70 status puts and 70 consumer-info requests a second).
// Its long poll lasts a heartbeat too: a pull request every 5 s, not every 2 s.
func TestIdleStatusOnHeartbeat(t *testing.T) {
	env := startNATS(t)
	var puts, infos, pulls atomic.Int64
	sub3, err := env.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT.*.groupstate-logincount", func(*nats.Msg) { pulls.Add(1) })
	testutil.Require(t, err)
	defer sub3.Unsubscribe()
	sub, err := env.nc.Subscribe("$KV.groupstate-status.logincount", func(*nats.Msg) { puts.Add(1) })
	testutil.Require(t, err)
	defer sub.Unsubscribe()
	sub2, err := env.nc.Subscribe("$JS.API.CONSUMER.INFO.*.groupstate-logincount", func(*nats.Msg) { infos.Add(1) })
	testutil.Require(t, err)
	defer sub2.Unsubscribe()
	env.startService(t.TempDir(), nil)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	// Past the first long poll (5 s, the heartbeat), which finds nothing: the runner idles,
	// and no timer is due (no key has state), so no batch runs in the window.
	time.Sleep(client.StatusHeartbeat + time.Second)

	const window = 3 * client.StatusHeartbeat
	p0, i0, l0 := puts.Load(), infos.Load(), pulls.Load()
	time.Sleep(window)
	if n := pulls.Load() - l0; n > 4 {
		t.Errorf("%d pull requests in %v of idling; want one a heartbeat (%v)", n, window, client.StatusHeartbeat)
	}
	if n := puts.Load() - p0; n > 4 {
		t.Errorf("%d status puts in %v of idling; want one a heartbeat (%v)", n, window, client.StatusHeartbeat)
	}
	if n := infos.Load() - i0; n > 0 {
		t.Errorf("%d consumer info requests in %v of idling; want none", n, window)
	}
	st, err := env.client.Status(context.Background(), "logincount")
	testutil.Require(t, err)
	if st.Stale || st.InputLag != 0 || st.State != client.StatusRunning {
		t.Fatalf("an idle deployment's status: %+v", st)
	}
}

// TestDeployCachesCompiledModule: a client with a cache directory (the CLI's) keeps the
// module it compiled to validate a deploy there, so the next deploy of the same module, from
// another client (another CLI process), loads it instead of compiling it again.
func TestDeployCachesCompiledModule(t *testing.T) {
	env := startNATS(t)
	dir := t.TempDir()
	c, err := client.New(context.Background(), env.nc, client.WithCacheDir(dir))
	testutil.Require(t, err)
	defer c.Close(context.Background())
	_, err = c.Deploy(context.Background(), specFromYAML(t, logincountSpec), logincountWasm(t))
	testutil.Require(t, err)
	var files int
	testutil.Require(t, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return err
	}))
	if files == 0 {
		t.Fatal("the compiled module is not in the client's cache directory")
	}
}
