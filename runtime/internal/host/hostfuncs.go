package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"

	"github.com/tetratelabs/wazero/api"

	"github.com/groupstate/groupstate/abi"
)

// groupBegin implements groupstate.group_begin(index i32): the guest says which group it is
// running, so its output can be tagged with the key.
func groupBegin(ctx context.Context, _ api.Module, stack []uint64) {
	if cs, ok := ctx.Value(callStateKey{}).(*callState); ok {
		cs.group.Store(int32(uint32(stack[0])))
		if cs.sess != nil {
			cs.beginV2(int(int32(uint32(stack[0]))))
		}
	}
}

// maxLogMessage caps one log message from a guest.
const maxLogMessage = 16 << 10

// guestLog implements groupstate.log(level i32, ptr i32, len i32), logging to the logger of the
// host whose instance calls it.
func guestLog(ctx context.Context, m api.Module, stack []uint64) {
	level, ptr, n := slog.Level(int32(uint32(stack[0]))), uint32(stack[1]), uint32(stack[2])
	if n > maxLogMessage {
		n = maxLogMessage
	}
	msg, ok := m.Memory().Read(ptr, n)
	if !ok {
		return
	}
	cs, _ := ctx.Value(callStateKey{}).(*callState)
	in, _ := ctx.Value(instanceKey{}).(*instance)
	if in == nil {
		return // every call and initialization of an instance carries it
	}
	if !in.logs.take(len(msg)) {
		return
	}
	in.logger.Log(ctx, level, string(msg), "key", cs.key())
}

// instanceKey is the context key of the instance a guest call runs on.
type instanceKey struct{}

// logBudget is what an instance may still log in the current call or initialization
// (Limits.LogBytesPerCall), and what it dropped beyond that.
type logBudget struct {
	mu      sync.Mutex
	left    int
	dropped int
}

// reset gives the next call n bytes and returns what the last one dropped.
func (b *logBudget) reset(n int) (dropped int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dropped, b.left, b.dropped = b.dropped, n, 0
	return dropped
}

// take spends n bytes, or tells that they are to be dropped.
func (b *logBudget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		b.left = 0
		b.dropped += n
		return false
	}
	b.left -= n
	return true
}

// endLogs ends a call's log budget: when the call logged more than the limit, one line says
// how much was dropped.
func (in *instance) endLogs(limit int) {
	if dropped := in.logs.reset(limit); dropped > 0 {
		in.logger.Warn("the module logged more than the limit of one call; the rest was dropped", "limit_bytes", limit, "dropped_bytes", dropped, "key", in.current.Load().key())
	}
}

// logWriter receives a module's stdout or stderr and logs it line by line, tagged with the key
// of the group in progress.
type logWriter struct {
	in     *instance
	stream string
	mu     sync.Mutex
	buf    []byte
	first  string // first line written during the current call
	inCall bool
}

// startCall forgets the previous call's first line.
func (w *logWriter) startCall() {
	w.mu.Lock()
	w.first, w.inCall = "", true
	w.mu.Unlock()
}

// firstLine returns the first complete line written since startCall, for error messages.
func (w *logWriter) firstLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inCall = false
	return w.first
}

func (w *logWriter) Write(p []byte) (int, error) {
	if !w.in.logs.take(len(p)) {
		// Dropped; but the first line of a call's stderr still goes into its error message.
		w.mu.Lock()
		if w.inCall && w.first == "" {
			line, _, _ := bytes.Cut(p[:min(len(p), 4096)], []byte("\n"))
			w.noteFirst(line)
		}
		w.mu.Unlock()
		return len(p), nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLogMessage {
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

func (w *logWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

func (w *logWriter) emit(line []byte) {
	if w.inCall && w.first == "" {
		w.noteFirst(line)
	}
	w.in.logger.Info(string(line), "stream", w.stream, "key", w.in.current.Load().key())
}

// noteFirst keeps line as the call's first line, when it is not blank (w.mu held).
func (w *logWriter) noteFirst(line []byte) {
	if t := bytes.TrimSpace(line); len(t) > 0 {
		w.first = string(t)
		if len(w.first) > 200 {
			w.first = w.first[:200] + "..."
		}
	}
}

// beginV2 is group_begin of a v2 call: group i becomes the group whose state requests are
// served, through a new transaction of the session. A group is begun once per call; an index
// out of range leaves no current group (state requests are refused).
func (c *callState) beginV2(i int) {
	c.cur = -1
	if i < 0 || i >= len(c.groupsV2) {
		return
	}
	if c.begun[i] {
		c.refuse(i, fmt.Errorf("%s(%d) called again in the same call", abi.ImportGroupBegin, i))
		return
	}
	c.begun[i] = true
	if err := c.sess.Begin(c.lo + i); err != nil {
		c.refuse(i, err)
		return
	}
	c.cur = i
}

// guestState implements groupstate.state(req_ptr, req_len, resp_ptr, resp_cap) -> i32
// (abi/README.md 9.5): the request is an op list for the current group, handed to the state
// session of the call in progress, which applies its writes and answers its reads. The answers
// are written at resp_ptr when they fit in resp_cap; their size is returned either way (the
// writes were applied all the same). -1 refuses the request, and the group then fails with the
// host's message whatever its result says.
func guestState(ctx context.Context, m api.Module, stack []uint64) {
	reqPtr, reqLen, respPtr, respCap := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	refused := abi.StateRefused
	stack[0] = uint64(uint32(refused))
	cs, _ := ctx.Value(callStateKey{}).(*callState)
	if cs == nil || cs.sess == nil {
		return // a v1 call: there is no state to serve
	}
	g := int(cs.group.Load())
	if cs.cur < 0 || cs.cur != g {
		cs.refuse(g, fmt.Errorf("%s.%s called without a current group (call %s first)", abi.ImportModule, abi.ImportState, abi.ImportGroupBegin))
		return
	}
	if cs.refused[g] != nil {
		return // the group failed already: nothing more of it is applied
	}
	if err := cs.state.take(g, int64(reqLen)); err != nil {
		cs.refuse(g, err)
		return
	}
	req, ok := m.Memory().Read(reqPtr, reqLen)
	if !ok {
		cs.refuse(g, fmt.Errorf("the request %#x+%d is outside the module's memory", reqPtr, reqLen))
		return
	}
	ans, err := cs.sess.Apply(req, cs.answers[:0])
	if ans != nil {
		cs.answers = ans
	}
	if err != nil {
		cs.refuse(g, err)
		return
	}
	if len(ans) > math.MaxInt32 {
		cs.refuse(g, fmt.Errorf("the answers are %d bytes, more than one request may return", len(ans)))
		return
	}
	if len(ans) > 0 && uint32(len(ans)) <= respCap && !m.Memory().Write(respPtr, ans) {
		cs.refuse(g, fmt.Errorf("the response buffer %#x+%d is outside the module's memory", respPtr, respCap))
		return
	}
	stack[0] = uint64(uint32(len(ans)))
}
