package host

import (
	"bytes"
	"context"
	"log/slog"
	"sync"

	"github.com/tetratelabs/wazero/api"
)

// groupBegin implements groupstate.group_begin(index i32): the guest says which group it is
// running, so its output can be tagged with the key.
func groupBegin(ctx context.Context, _ api.Module, stack []uint64) {
	if cs, ok := ctx.Value(callStateKey{}).(*callState); ok {
		cs.group.Store(int32(uint32(stack[0])))
	}
}

// maxLogMessage caps one log message from a guest.
const maxLogMessage = 16 << 10

// guestLog implements groupstate.log(level i32, ptr i32, len i32).
func (h *Host) guestLog(ctx context.Context, m api.Module, stack []uint64) {
	level, ptr, n := slog.Level(int32(uint32(stack[0]))), uint32(stack[1]), uint32(stack[2])
	if n > maxLogMessage {
		n = maxLogMessage
	}
	msg, ok := m.Memory().Read(ptr, n)
	if !ok {
		return
	}
	cs, _ := ctx.Value(callStateKey{}).(*callState)
	h.cfg.Logger.Log(ctx, level, string(msg), "key", cs.key())
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
	if w.inCall && w.first == "" && len(bytes.TrimSpace(line)) > 0 {
		w.first = string(bytes.TrimSpace(line))
		if len(w.first) > 200 {
			w.first = w.first[:200] + "..."
		}
	}
	w.in.logger.Info(string(line), "stream", w.stream, "key", w.in.current.Load().key())
}
