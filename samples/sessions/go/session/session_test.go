package session

import (
	"testing"

	"github.com/groupstate/groupstate/abi"
	groupstate "github.com/groupstate/groupstate/sdk/go"
)

// TestNative runs the handler natively: one data call that closes a session and opens the
// next, then the timeout call of the open session.
func TestNative(t *testing.T) {
	m := groupstate.NewModule()
	Register(m)
	st, msg, _ := abi.ParseInitResult(m.Init(abi.AppendInit(nil, abi.Init{ABIVersion: abi.Version,
		Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark, Config: []byte(`{"gap":"5s"}`)})))
	if st != abi.StatusOK {
		t.Fatalf("init: %s", msg)
	}
	in := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 1, ProcessingTimeMs: 1, WatermarkMs: 0})
	in = abi.AppendGroup(in, 0, []byte(`"p"`), nil, [][]byte{[]byte(`{"ts":30000}`), []byte(`{"ts":20000}`), []byte(`{"ts":21000}`)})
	r := one(t, m.Process(in))
	if len(r.emits) != 1 || r.emits[0] != `{"user_id":"p","start":20000,"end":21000,"events":2}` ||
		r.state != `{"start":30000,"end":30000,"events":1}` || r.timeout != 35000 {
		t.Fatalf("data call: %+v", r)
	}
	in = abi.AppendProcessHeader(in[:0], abi.ProcessHeader{GroupCount: 1, ProcessingTimeMs: 2, WatermarkMs: 40000})
	in = abi.AppendGroup(in, abi.GroupTimedOut|abi.GroupStateExists, []byte(`"p"`), []byte(r.state), nil)
	r = one(t, m.Process(in))
	if len(r.emits) != 1 || r.emits[0] != `{"user_id":"p","start":30000,"end":30000,"events":1}` || r.action != abi.ActionRemove {
		t.Fatalf("timeout call: %+v", r)
	}
}

type result struct {
	emits   []string
	state   string
	action  abi.Action
	timeout int64
}

func one(t *testing.T, b []byte) result {
	t.Helper()
	rr, err := abi.NewResultReader(b)
	if err != nil {
		t.Fatal(err)
	}
	var g abi.GroupResult
	if ok, err := rr.Next(&g); !ok || err != nil {
		t.Fatalf("next: %v %v", ok, err)
	}
	if g.Status != abi.StatusOK {
		t.Fatalf("group failed: %s", g.Error)
	}
	r := result{state: string(g.State), action: g.Action, timeout: g.TimeoutMs}
	for e := range g.Emits() {
		r.emits = append(r.emits, string(e))
	}
	return r
}

// BenchmarkProcess runs the handler natively over calls of 1024 groups of 3 rows each, with
// state: the figure to watch is allocs/op (the typed layer's fast path allocates nothing per
// group) and ns/group.
func BenchmarkProcess(b *testing.B) {
	m := groupstate.NewModule()
	Register(m)
	m.Init(abi.AppendInit(nil, abi.Init{ABIVersion: abi.Version, Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark}))
	const groups = 1024
	in := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: groups, ProcessingTimeMs: 1, WatermarkMs: 0})
	for i := range groups {
		key := []byte(`"user-` + string(rune('a'+i%26)) + `"`)
		in = abi.AppendGroup(in, abi.GroupStateExists, key, []byte(`{"start":19000,"end":19500,"events":4}`),
			[][]byte{[]byte(`{"user_id":"x","ts":30000,"page":"/a"}`), []byte(`{"user_id":"x","ts":20000,"page":"/b"}`), []byte(`{"user_id":"x","ts":21000,"page":"/c"}`)})
	}
	b.ReportAllocs()
	for b.Loop() {
		m.Process(in)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*groups), "ns/group")
}
