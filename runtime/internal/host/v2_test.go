package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// recSession is a StateSession that records what the host hands it and answers every read
// as if the key held nothing.
type recSession struct {
	events []string
	cur    int
}

func (s *recSession) Begin(i int) error {
	s.events = append(s.events, fmt.Sprintf("begin %d", i))
	s.cur = i
	return nil
}

func (s *recSession) Apply(req, dst []byte) ([]byte, error) {
	r := abi.NewOpReader(req)
	var o abi.DecodedOp
	for {
		ok, err := r.Next(&o)
		if err != nil {
			return dst, err
		}
		if !ok {
			break
		}
		s.events = append(s.events, fmt.Sprintf("%s %d", o.Op, s.cur))
		switch o.Op {
		case abi.OpValueGet, abi.OpMapGet:
			dst = abi.AppendValueAnswer(dst, false, nil)
		case abi.OpListRead:
			dst = abi.AppendListReadAnswer(dst, nil, 0)
		case abi.OpMapRead:
			dst = abi.AppendMapReadAnswer(dst, nil, false, nil)
		case abi.OpListExists, abi.OpMapExists, abi.OpMapContains:
			dst = abi.AppendBoolAnswer(dst, false)
		case abi.OpTimerList:
			dst = abi.AppendTimerListAnswer(dst, nil)
		case abi.OpTimerRegister:
			if o.Ts == 666 {
				return dst, errors.New("no 666")
			}
		}
	}
	return dst, nil
}

func (s *recSession) End(lo int, results []handler.ResultV2) {
	var st []string
	for _, r := range results {
		if r.Err != nil {
			st = append(st, "err")
		} else {
			st = append(st, fmt.Sprintf("ok:%d", len(r.Ops)))
		}
	}
	s.events = append(s.events, fmt.Sprintf("end %d %s", lo, strings.Join(st, ",")))
}

// TestProcessV2 runs the v2probe module (runtime/engine/testdata/v2probe) through the host:
// its declarations come from the v2 init result, group_begin opens each group with the
// session (indexes of the whole call, across chunks), state requests reach the session, every
// guest call ends with the session's End, a refused request fails its group whatever its
// result says, and a trap is retried group by group, each attempt ended.
func TestProcessV2(t *testing.T) {
	wasm, err := os.ReadFile("../../engine/testdata/v2probe/v2probe.wasm")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(wasm)
	cfg.Init.Mode = abi.TimeoutProcessingTime
	cfg.Limits.MaxGroupsPerCall = 2
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	if h.ABIVersion() != abi.Version2 {
		t.Fatalf("ABI version %d", h.ABIVersion())
	}
	var names []string
	for _, d := range h.VarDecls() {
		names = append(names, fmt.Sprintf("%s:%d:%d", d.Name, d.Kind, d.TTLMs))
	}
	if got := strings.Join(names, " "); got != "v:1:0 l:2:0 m:3:0 t:1:1000 on_timer:1:0" {
		t.Fatalf("declarations %s", got)
	}

	run := func(rows ...string) (*recSession, []handler.ResultV2) {
		t.Helper()
		call := &handler.CallV2{ProcessingTimeMs: 1000}
		for i, r := range rows {
			call.Groups = append(call.Groups, handler.GroupV2{Kind: abi.GroupData, Key: []byte(fmt.Sprintf(`"k%d"`, i)), Rows: [][]byte{[]byte(r)}})
		}
		s := &recSession{cur: -1}
		res := make([]handler.ResultV2, len(rows))
		if err := h.ProcessV2(context.Background(), call, s, res); err != nil {
			t.Fatal(err)
		}
		return s, res
	}
	s, res := run(`{"ops": [{"get": "g"}, {"set": 1}]}`, `{"ops": [{"reg": 666}, {"timers": "t"}, {"emit": 2}]}`, `{"ops": [{"emit": 1}, {"reg": 5}]}`)
	want := "begin 0|VALUE_GET 0|begin 1|TIMER_REGISTER 1|end 0 ok:10,err|begin 2|end 2 ok:9"
	if got := strings.Join(s.events, "|"); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	if res[0].Err != nil || len(res[0].Emits) != 1 || res[2].Err != nil || string(res[2].Emits[0]) != "1" ||
		res[1].Err == nil || !strings.Contains(res[1].Err.Error(), "state request refused: no 666") {
		t.Fatalf("results %+v", res)
	}

	s, res = run(`{"ops": [{"exit": 3}]}`, `{"ops": [{"get": "g"}]}`)
	want = "begin 0|end 0 err,err|begin 0|end 0 err|begin 1|VALUE_GET 1|end 1 ok:0"
	if got := strings.Join(s.events, "|"); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "module exited with code 3") || res[1].Err != nil {
		t.Fatalf("results %+v", res)
	}
}

// forkingSession is a handler.ForkingSession whose forks are recSessions that wait, at their
// first group, until every fork has begun one: forks that ran one after the other would wait
// for each other in vain (each gives up after a deadline and says so).
type forkingSession struct {
	recSession
	forks   []*barrierSession
	joined  int
	arrived atomic.Int32
	all     chan struct{}
}

type barrierSession struct {
	recSession
	parent *forkingSession
	waited bool
	alone  bool // the deadline passed before every fork had begun
}

func (s *forkingSession) Fork(n int) ([]handler.StateSession, error) {
	s.all = make(chan struct{})
	out := make([]handler.StateSession, n)
	for i := range out {
		f := &barrierSession{recSession: recSession{cur: -1}, parent: s}
		s.forks = append(s.forks, f)
		out[i] = f
	}
	return out, nil
}

func (s *forkingSession) Join(forks []handler.StateSession) error {
	s.joined++
	for i, f := range forks {
		if f != s.forks[i] {
			return fmt.Errorf("fork %d joined out of order", i)
		}
	}
	return nil
}

func (f *barrierSession) Begin(i int) error {
	if !f.waited {
		f.waited = true
		if int(f.parent.arrived.Add(1)) == len(f.parent.forks) {
			close(f.parent.all)
		}
		select {
		case <-f.parent.all:
		case <-time.After(20 * time.Second):
			f.alone = true
		}
	}
	return f.recSession.Begin(i)
}

// TestProcessV2Forks: with a session that can fork, a call big enough to spread runs its
// chunks on the instances at once (one fork per instance, each running its run of consecutive
// chunks in order, every guest call ended with its fork's End), and the forks are joined once,
// in order; without one (recSession), the same call's chunks run one after the other on the
// session itself.
func TestProcessV2Forks(t *testing.T) {
	wasm, err := os.ReadFile("../../engine/testdata/v2probe/v2probe.wasm")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(wasm)
	cfg.Init.Mode = abi.TimeoutProcessingTime
	cfg.Limits.Instances = 2
	cfg.Limits.MaxGroupsPerCall = 50
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	const n = 300 // 6 chunks of 50, 3 per instance
	call := &handler.CallV2{ProcessingTimeMs: 1000}
	for i := range n {
		call.Groups = append(call.Groups, handler.GroupV2{Kind: abi.GroupData, Key: fmt.Appendf(nil, `"k%d"`, i), Rows: [][]byte{[]byte(`{"ops": [{"get": "g"}, {"set": 1}]}`)}})
	}
	res := make([]handler.ResultV2, n)
	s := &forkingSession{recSession: recSession{cur: -1}}
	if err := h.ProcessV2(context.Background(), call, s, res); err != nil {
		t.Fatal(err)
	}
	if len(s.forks) != 2 || s.joined != 1 || len(s.recSession.events) != 0 {
		t.Fatalf("%d forks, joined %d times, %d events on the session itself", len(s.forks), s.joined, len(s.recSession.events))
	}
	for w, f := range s.forks {
		if f.alone {
			t.Errorf("fork %d ran its first group while the other fork had not begun: the chunks ran one after the other", w)
		}
		var want []string
		for c := range 3 {
			lo := (w*3 + c) * 50
			for i := lo; i < lo+50; i++ {
				want = append(want, fmt.Sprintf("begin %d", i), fmt.Sprintf("VALUE_GET %d", i))
			}
			want = append(want, fmt.Sprintf("end %d %s", lo, strings.TrimSuffix(strings.Repeat("ok:10,", 50), ",")))
		}
		if got := strings.Join(f.events, "|"); got != strings.Join(want, "|") {
			t.Fatalf("fork %d's events\n%s\nwant\n%s", w, got, strings.Join(want, "|"))
		}
	}
	for i, r := range res {
		if r.Err != nil || len(r.Ops) != 10 {
			t.Fatalf("group %d: %+v", i, r)
		}
	}

	one := &recSession{cur: -1} // no forks: one after the other on the session
	if err := h.ProcessV2(context.Background(), call, one, res); err != nil {
		t.Fatal(err)
	}
	if ends := strings.Count(strings.Join(one.events, "|"), "end "); ends != 6 {
		t.Fatalf("%d guest calls on a session that cannot fork, want 6", ends)
	}
}
