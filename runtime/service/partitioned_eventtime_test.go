package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/replay"
	"github.com/groupstate/groupstate/timeouts"
)

// partitionedSessionsSpec is the sessions sample (gap 5 s, watermark delay 10 s) split into 2
// partitions, with partitions idle after 30 s without rows and late rows kept.
const partitionedSessionsSpec = `
name: sessions
module: unused.wasm
input:
  subjects: ["clicks.>"]
key:
  field: user_id
event_time:
  field: ts
  watermark_delay: 10s
  idle: 30s
timeout: event_time
output:
  subject: sessions.out
  stream: SESSIONS_OUT
dead_letter:
  subject: sessions.dlq
  stream: SESSIONS_DLQ
late:
  subject: sessions.late
  stream: SESSIONS_LATE
replication: changelog
partitions: 2
config:
  gap: 5s
`

func sessionsWasm(t testing.TB) []byte {
	return testutil.ReadFile(t, "../../samples/sessions/c/sessions.wasm") // the smallest build: compiles fastest
}

// usersOf returns n user ids of partition p of 2.
func usersOf(p, n int) []string {
	var users []string
	for i := 0; len(users) < n; i++ {
		u := fmt.Sprintf("user%d", i)
		if partition.OfText([]byte(u), 2) == p {
			users = append(users, u)
		}
	}
	return users
}

// sessions returns the sessions emitted, as "user start-end/events", sorted.
func (e *natsEnv) sessions() []string {
	e.t.Helper()
	var out []string
	for _, m := range e.streamMsgs("SESSIONS_OUT") {
		var v struct {
			UserID     string `json:"user_id"`
			Start, End int64
			Events     int
		}
		testutil.Require(e.t, json.Unmarshal(m.Data, &v))
		out = append(out, fmt.Sprintf("%s %d-%d/%d", v.UserID, v.Start, v.End, v.Events))
	}
	slices.Sort(out)
	return out
}

// click publishes a click of user at event time ts.
func (e *natsEnv) click(user string, ts int64) {
	e.t.Helper()
	e.publish("clicks.web", fmt.Sprintf(`{"user_id":%q,"ts":%d}`, user, ts))
}

// waitPartitions waits until the partitions' watermarks are want (by partition) and the
// sessions emitted are exactly sessions; no row may be late.
func (e *natsEnv) waitPartitions(what string, want []int64, sessions ...string) {
	e.t.Helper()
	slices.Sort(sessions)
	var got []int64
	var out []string
	defer func() {
		if e.t.Failed() {
			e.t.Logf("watermarks %v, sessions %v", got, out)
		}
	}()
	testutil.EventuallyWithin(e.t, compileDeadline, what, func() bool {
		st, err := e.client.Status(context.Background(), "sessions")
		if err != nil || st.State != client.StatusRunning || len(st.Partitions) != len(want) {
			return false
		}
		got = make([]int64, len(want))
		for _, p := range st.Partitions {
			got[p.Partition] = p.WatermarkMs
		}
		out = e.sessions()
		return slices.Equal(got, want) && slices.Equal(out, sessions)
	})
	if late := e.streamMsgs("SESSIONS_LATE"); len(late) > 0 {
		e.t.Fatalf("%d rows dropped as late, first %s", len(late), late[0].Data)
	}
}

// waitPublished waits until the watermarks bucket holds partition p's max event time ms.
func (e *natsEnv) waitPublished(p int, ms int64) {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), cluster.WatermarksBucket)
	testutil.Require(e.t, err)
	testutil.EventuallyWithin(e.t, compileDeadline, fmt.Sprintf("partition %d's max event time %d published", p, ms), func() bool {
		en, err := kv.Get(context.Background(), fmt.Sprintf("sessions.%d", p))
		if err != nil {
			return false
		}
		var r cluster.WatermarkRecord
		return json.Unmarshal(en.Value(), &r) == nil && r.MaxEventMs == ms
	})
}

// TestPartitionedEventTime: a sessions deployment split into 2 partitions on two runtimes
// runs at one watermark, the min over the partitions of their max event time less the delay.
// A partition that runs behind holds the other's watermark back, so that rows of the one
// ahead that its own events alone would have made late are not; when it catches up, the
// partition ahead, which gets no new rows, still advances and fires its sessions' event-time
// timeouts (a no-data batch); and a partition idle for event_time.idle is left out, also of
// its own bound: the other moves on without it, and the idle one follows, its sessions timing
// out, rather than staying at its own max.
func TestPartitionedEventTime(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000_000))
	env.startRuntime(t.TempDir(), clock)
	env.startRuntime(t.TempDir(), clock)
	env.deploy(partitionedSessionsSpec, sessionsWasm(t))
	env.waitOwners("sessions", func(o []string) bool { return len(o) == 2 && !slices.Contains(o, "") })
	a, b := usersOf(0, 4), usersOf(1, 3)

	env.click(a[0], 10_000)
	env.click(b[0], 10_000)
	env.waitPublished(0, 10_000)
	env.waitPublished(1, 10_000)
	env.waitPartitions("both partitions at 10000 - 10000", []int64{0, 0})
	// A shadow runs each partition's batches at their recorded watermarks, the shared ones
	// included: it emits the same sessions (checked at the end).
	shadowSpec := specFromYAML(t, strings.Replace(partitionedSessionsSpec, "name: sessions", "name: sessions-v2", 1))
	shadow, err := env.client.Deploy(context.Background(), shadowSpec, sessionsWasm(t), client.AsShadowOf("sessions"))
	testutil.Require(t, err)

	// Partition 0 runs ahead (100000), partition 1 behind (12000): the watermark is the
	// min, 12000 - 10000, on both.
	env.click(a[1], 100_000)
	env.click(b[0], 12_000)
	clock.Advance(2 * time.Second) // past the 1/s bound of the bucket's puts
	env.waitPublished(0, 100_000)
	env.waitPublished(1, 12_000)
	env.waitPartitions("partition 1 holds partition 0 back", []int64{2_000, 2_000})
	// Not late on partition 0: its own events alone would have put its watermark at 90000.
	env.click(a[2], 50_000)

	// Partition 1 catches up. Partition 0 gets no rows, yet its watermark follows (90000)
	// and its sessions time out: a[0]'s (10000, due at 15000) and a[2]'s (50000, at 55000).
	env.click(b[1], 100_000)
	clock.Advance(2 * time.Second)
	env.waitPartitions("partition 0 moved by partition 1", []int64{90_000, 90_000},
		a[0]+" 10000-10000/1", a[2]+" 50000-50000/1", b[0]+" 10000-12000/2")

	// event_time.idle (30 s) without rows: both are idle and nothing moves, until partition
	// 0 gets a row (200000): it counts, partition 1 does not, so both go to 190000 and the
	// sessions of both time out, a[1]'s (100000, due at 105000) and b[1]'s (100000).
	clock.Advance(31 * time.Second)
	env.click(a[3], 200_000)
	env.waitPartitions("partition 1 idle follows partition 0", []int64{190_000, 190_000},
		a[0]+" 10000-10000/1", a[2]+" 50000-50000/1", b[0]+" 10000-12000/2", a[1]+" 100000-100000/1", b[1]+" 100000-100000/1")

	// Partition 1 gets a row again (195000, not late at 190000): it counts again, and the min
	// less the delay, 185000, is below both watermarks, which never go back.
	env.click(b[2], 195_000)
	env.waitPartitions("partition 1 back", []int64{190_000, 190_000},
		a[0]+" 10000-10000/1", a[2]+" 50000-50000/1", b[0]+" 10000-12000/2", a[1]+" 100000-100000/1", b[1]+" 100000-100000/1")

	testutil.EventuallyWithin(t, compileDeadline, "the shadow's partitions caught up", func() bool {
		return env.partitionsCaughtUp("sessions", "sessions-v2", 2)
	})
	primary, err := env.client.Get(context.Background(), "sessions")
	testutil.Require(t, err)
	same, err := replay.Diff(context.Background(), replay.DiffOptions{JS: env.js, Primary: primary.Spec, Shadow: shadow.RunSpec()})
	testutil.Require(t, err)
	if !same.Same() || same.Equal != 5 {
		t.Fatalf("diff of the shadow: %+v, want the 5 sessions equal", same)
	}
}
