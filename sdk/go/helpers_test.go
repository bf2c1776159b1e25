package groupstate

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

// group is one group of a test process buffer.
type group struct {
	flags uint32
	key   string
	state []byte
	rows  []string
}

// result is one decoded group result.
type result struct {
	status    abi.Status
	action    abi.Action
	timeout   bool
	timeoutMs int64
	state     string
	err       string
	emits     []string
}

// initBuf returns an init buffer.
func initBuf(mode abi.TimeoutMode, flags uint32, config string) []byte {
	return abi.AppendInit(nil, abi.Init{ABIVersion: abi.Version, Mode: mode, Flags: flags, Name: []byte("test"), Config: []byte(config)})
}

// newTestModule returns an initialized module running h.
func newTestModule(t testing.TB, mode abi.TimeoutMode, flags uint32, config string, h RawHandler) *Module {
	t.Helper()
	m := NewModule()
	m.HandleRaw(h)
	requireInitOK(t, m.Init(initBuf(mode, flags, config)))
	return m
}

func requireInitOK(t testing.TB, b []byte) {
	t.Helper()
	st, msg, err := abi.ParseInitResult(b)
	if err != nil || st != abi.StatusOK {
		t.Fatalf("init: status %d, %q, %v", st, msg, err)
	}
}

// processBuf returns a process buffer.
func processBuf(procMs, wmMs int64, groups ...group) []byte {
	b := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: uint32(len(groups)), ProcessingTimeMs: procMs, WatermarkMs: wmMs})
	for _, g := range groups {
		rows := make([][]byte, len(g.rows))
		for i, r := range g.rows {
			rows[i] = []byte(r)
		}
		flags := g.flags
		if g.state != nil {
			flags |= abi.GroupStateExists
		}
		b = abi.AppendGroup(b, flags, []byte(g.key), g.state, rows)
	}
	return b
}

// parseResults decodes a result buffer.
func parseResults(t testing.TB, b []byte) []result {
	t.Helper()
	rr, err := abi.NewResultReader(b)
	if err != nil {
		t.Fatalf("result: %v", err)
	}
	var out []result
	var g abi.GroupResult
	for {
		ok, err := rr.Next(&g)
		if err != nil {
			t.Fatalf("result: %v", err)
		}
		if !ok {
			break
		}
		r := result{status: g.Status, action: g.Action, timeout: g.Flags&abi.ResultTimeoutSet != 0,
			timeoutMs: g.TimeoutMs, state: string(g.State), err: string(g.Error)}
		for e := range g.Emits() {
			r.emits = append(r.emits, string(e))
		}
		out = append(out, r)
	}
	return out
}

// run processes groups with h and returns their results.
func run(t testing.TB, mode abi.TimeoutMode, flags uint32, procMs, wmMs int64, h RawHandler, groups ...group) []result {
	t.Helper()
	m := newTestModule(t, mode, flags, "{}", h)
	res := parseResults(t, m.Process(processBuf(procMs, wmMs, groups...)))
	if len(res) != len(groups) {
		t.Fatalf("got %d results for %d groups", len(res), len(groups))
	}
	return res
}

// callError returns the message of a call-error result, or fails.
func callError(t testing.TB, b []byte) string {
	t.Helper()
	_, err := abi.NewResultReader(b)
	var ce *abi.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("want a call error, got %v", err)
	}
	return ce.Message
}

func requireErrContains(t testing.TB, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("error %q does not contain %q", got, want)
	}
}

// check is a handler step that fails the group when cond is false.
func check(cond bool, what string) error {
	if !cond {
		return errors.New("check failed: " + what)
	}
	return nil
}
