package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
)

// hostileSpec runs a module of the hostile corpus (runtime/internal/host/hostile), whose
// keys that start with "x" are hostile and the others emit {"ok":true}.
const hostileSpec = `
name: hostile
module: unused.wasm
input:
  subjects: ["hostile.in"]
key:
  field: k
output:
  subject: hostile.out
  stream: HOSTILE_OUT
dead_letter:
  subject: hostile.dlq
  stream: HOSTILE_DLQ
limits:
  call_timeout: 500ms
`

// TestHostileServe: the worst of the hostile corpus on a live runtime, beside logincount. A
// module whose hostile keys recurse without end (2^44 calls, no loop: before the instrumenter
// checked function entries, one such row froze the whole process, embedded NATS included, at
// the next garbage collection) costs only its own keys: they are dead-lettered with the time
// limit, its healthy keys emit, the runtime answers pings within a second and status requests
// throughout, logincount's outputs keep coming, and the runtime stops promptly.
func TestHostileServe(t *testing.T) {
	env := startNATS(t)
	rs := env.startService(t.TempDir(), nil)
	env.deploy(logincountSpec, logincountWasm(t))
	env.deploy(hostileSpec, testutil.ReadFile(t, "../internal/host/testdata/hostile/recursion-call.wasm"))
	env.waitRunning("logincount")
	env.waitRunning("hostile")
	ctx := context.Background()
	st, err := env.client.Status(ctx, "hostile")
	testutil.Require(t, err)
	owner := st.Owner

	// Pings and status requests while the hostile keys run.
	stop := make(chan struct{})
	var slowest atomic.Int64
	var failures atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			start := time.Now()
			up, err := api.Ping(ctx, env.nc, owner)
			if _, serr := env.client.Status(ctx, "logincount"); !up || err != nil || serr != nil {
				failures.Add(1)
			}
			if d := int64(time.Since(start)); d > slowest.Load() {
				slowest.Store(d)
			}
		}
	}()
	var rows []string
	for i := range 4 {
		rows = append(rows, fmt.Sprintf(`{"k":"x%d"}`, i), fmt.Sprintf(`{"k":"ok%d"}`, i))
	}
	env.publish("hostile.in", rows...)
	for i := range 20 {
		env.publish("logins.web", fmt.Sprintf(`{"user_id":"u%d"}`, i%5))
	}
	env.waitTotals(map[string]int{"u0": 4, "u1": 4, "u2": 4, "u3": 4, "u4": 4})
	env.waitStream("HOSTILE_DLQ", 4)
	outs := env.waitStream("HOSTILE_OUT", 4)
	close(stop)
	<-done
	for _, o := range outs {
		if o != `{"ok":true}` {
			t.Errorf("output %s", o)
		}
	}
	for _, m := range env.streamMsgs("HOSTILE_DLQ") {
		if r, e := m.Header.Get(service.HeaderReason), m.Header.Get(service.HeaderError); r != engine.ReasonHandlerError || !strings.Contains(e, "time limit") || !strings.Contains(string(m.Data), `"x`) {
			t.Errorf("dead letter %s: reason %q, error %q", m.Data, r, e)
		}
	}
	if d := time.Duration(slowest.Load()); failures.Load() > 0 || d > time.Second {
		t.Errorf("while the hostile keys ran: %d pings or status requests failed, the slowest took %v", failures.Load(), d)
	}
	st, err = env.client.Status(ctx, "hostile")
	testutil.Require(t, err)
	if st.State != client.StatusRunning {
		t.Errorf("hostile: status %+v", st)
	}
	start := time.Now()
	rs.stop()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the runtime took %v to stop", d)
	}
	t.Logf("slowest ping and status %v", time.Duration(slowest.Load()))
}
