package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// instance is one instantiated, initialized module. It runs one call at a time.
type instance struct {
	mod       api.Module
	mem       api.Memory
	allocFn   api.Function
	processFn api.Function
	stack     []uint64
	logger    *slog.Logger
	stop      api.MutableGlobal         // the stop flag (interrupt.go)
	frames    api.MutableGlobal         // the estimate of the call stack's size (interrupt.go)
	stackMax  uint32                    // LoadLimits.StackBytes
	cell      uint32                    // the group cell of a v1 module (gs_group_cell); 0: none
	current   atomic.Pointer[callState] // the call in progress, for the module's output, clocks and random source
	env       *guestEnv                 // the module's clocks and random source
	out       *logWriter
	errOut    *logWriter
	logs      logBudget // what the current call may still log
}

// callState is what host functions and the log writers see of the call in progress.
type callState struct {
	groups []handler.Group
	group  atomic.Int32 // index of the group the guest said it is running, -1 before any
	// cell, when not 0, is where the guest writes the index of the group it is running (a
	// v1 module's gs_group_cell, in mem): it replaces group.
	cell uint32
	mem  api.Memory
	env  callEnv // the call's T, for the module's clocks and random source

	// Of an ABI v2 call only (sess != nil), used on the call's goroutine only:
	groupsV2 []handler.GroupV2 // the call's groups
	lo       int               // the index of groupsV2[0] in the session's groups
	sess     handler.StateSession
	cur      int     // the group whose state requests are served (-1: none)
	begun    []bool  // per group: group_begin was called for it
	refused  []error // per group: why its state was refused (the group fails with it)
	answers  []byte  // the answers of the last state request
	state    *stateBudget
}

// groupIndex returns the index of the group the guest said it is running, through its group
// cell or else group_begin (-1 before any, and possibly out of range): what tags its output
// and picks its random stream.
func (c *callState) groupIndex() int {
	if c.cell != 0 {
		v, _ := c.mem.ReadUint32Le(c.cell) // inside the memory, which never shrinks (handshake)
		return int(int32(v))
	}
	return int(c.group.Load())
}

// key returns the key of the group in progress, or "" when unknown.
func (c *callState) key() string {
	if c == nil {
		return ""
	}
	i := c.groupIndex()
	if c.sess != nil {
		if i < 0 || i >= len(c.groupsV2) {
			return ""
		}
		return string(c.groupsV2[i].Key)
	}
	if i < 0 || i >= len(c.groups) {
		return ""
	}
	return string(c.groups[i].Key)
}

// refuse fails group i (of the call) with err, the first reason kept.
func (c *callState) refuse(i int, err error) {
	if i >= 0 && i < len(c.refused) && c.refused[i] == nil {
		c.refused[i] = &handler.GroupError{Message: "state request refused: " + err.Error()}
		if c.state != nil {
			c.state.drop(i)
		}
	}
}

type callStateKey struct{}

func (h *Host) newInstance(ctx context.Context) (*instance, error) {
	in := &instance{logger: h.cfg.Logger, stack: make([]uint64, 2)}
	in.out = &logWriter{in: in, stream: "stdout"}
	in.errOut = &logWriter{in: in, stream: "stderr"}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStdout(in.out).
		WithStderr(in.errOut)
	in.env = newGuestEnv(in, h.cfg.Init.Name)
	mc = in.env.configure(mc)
	// The start function and _initialize run below, where the stop flag can interrupt them;
	// instantiation itself only lays out memory, tables and globals.
	mc = mc.WithStartFunctions()
	in.logs.reset(h.cfg.Limits.LogBytesPerCall)
	defer in.endLogs(h.cfg.Limits.LogBytesPerCall)
	ictx, cancel := context.WithTimeout(context.WithValue(ctx, instanceKey{}, in), h.cfg.Limits.CallTimeout)
	defer cancel()
	mod, err := h.rt.InstantiateModule(ictx, h.compiled, mc)
	if err != nil {
		return nil, fmt.Errorf("%w: instantiating: %v", ErrInit, describeTrap(err))
	}
	in.mod = mod
	if src := h.pySources; src != nil && (mod.Memory() == nil || !src.Write(mod.Memory().Write)) {
		mod.Close(ctx)
		return nil, fmt.Errorf("%w: the Python handler's sources do not fit in the module's memory", ErrInit)
	}
	in.stop, _ = mod.ExportedGlobal(StopGlobal).(api.MutableGlobal)
	in.frames, _ = mod.ExportedGlobal(StackGlobal).(api.MutableGlobal)
	in.stackMax = uint32(h.cfg.Load.withDefaults().StackBytes)
	if in.stop == nil || in.frames == nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("%w: the instrumented module lost its stop flag", ErrInit)
	}
	for _, name := range []string{StartExport, abi.ExportInitialize} {
		if name == StartExport && !h.hasStart {
			continue
		}
		if f := mod.ExportedFunction(name); f != nil {
			if err := in.invoke(ictx, f); err != nil {
				mod.Close(ctx)
				what := name
				if name == StartExport {
					what = "the start function"
				}
				return nil, fmt.Errorf("%w: %s: %v", ErrInit, what, describeTrap(err))
			}
		}
	}
	in.mem = mod.Memory()
	in.allocFn = mod.ExportedFunction(abi.ExportAlloc)
	in.processFn = mod.ExportedFunction(abi.ExportProcess)
	if err := in.handshake(ictx, h); err != nil {
		in.close(context.Background())
		return nil, err
	}
	return in, nil
}

// handshake checks the module's ABI version and runs gs_init with the init buffer of that
// version (abi/README.md 1: the host writes the version it speaks, the module's). The first
// instance (made by New, before any other) sets the host's version and, for v2, its variable
// declarations; a later instance must agree with them (a module is deterministic).
func (in *instance) handshake(ctx context.Context, h *Host) error {
	if err := in.invoke(ctx, in.mod.ExportedFunction(abi.ExportABIVersion)); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInit, abi.ExportABIVersion, describeTrap(err))
	}
	v := uint32(in.stack[0])
	initBuf := h.initBuf
	switch v {
	case abi.Version:
	case abi.Version2:
		initBuf = h.initBufV2
	default:
		return fmt.Errorf("%w: the module implements ABI version %d; this runtime supports versions %d and %d (rebuild it with a matching SDK)", ErrABIVersion, v, abi.Version, abi.Version2)
	}
	res, err := in.call(ctx, in.mod.ExportedFunction(abi.ExportInit), len(initBuf), 1<<20, func(dst []byte) []byte {
		return append(dst, initBuf...)
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInit, err)
	}
	var (
		st    abi.Status
		msg   []byte
		decls []abi.VarDecl
	)
	if v == abi.Version2 {
		st, msg, decls, err = abi.ParseInitResultV2(res)
		if err != nil {
			return fmt.Errorf("%w: %s returned a malformed result: %v", ErrInit, abi.ExportInit, err)
		}
	} else if st, msg, err = abi.ParseInitResult(res); err != nil {
		return fmt.Errorf("%w: %s returned a malformed result", ErrInit, abi.ExportInit)
	}
	if st != abi.StatusOK {
		return fmt.Errorf("%w: %s", ErrInit, msg)
	}
	if h.version != 0 && (v != h.version || !slices.Equal(decls, h.decls)) {
		return fmt.Errorf("%w: this instance's %s or declarations differ from the first instance's (a module must be deterministic)", ErrInit, abi.ExportABIVersion)
	}
	if v == abi.Version {
		if err := in.groupCell(ctx); err != nil {
			return err
		}
	}
	if h.version == 0 {
		h.version, h.decls = v, decls
	}
	return nil
}

// groupCell asks a v1 module that exports gs_group_cell where its group cell is
// (abi/README.md 2.1). A cell outside the memory fails the instance's init.
func (in *instance) groupCell(ctx context.Context) error {
	fn := in.mod.ExportedFunction(abi.ExportGroupCell)
	if fn == nil {
		return nil
	}
	if err := in.invoke(ctx, fn); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInit, abi.ExportGroupCell, describeTrap(err))
	}
	p := uint32(in.stack[0])
	if _, ok := in.mem.ReadUint32Le(p); p != 0 && !ok {
		return fmt.Errorf("%w: %s returned %#x, outside the module's memory", ErrInit, abi.ExportGroupCell, p)
	}
	in.cell = p
	return nil
}

// call asks the guest for size bytes (gs_alloc), lets write append the input directly into
// that guest memory, calls fn(ptr, size), and returns a view of the result buffer in guest
// memory, valid until the next call into the instance.
func (in *instance) call(ctx context.Context, fn api.Function, size int, maxResult uint32, write func(dst []byte) []byte) ([]byte, error) {
	if uint64(size) >= 1<<31 {
		return nil, fmt.Errorf("input of %d bytes is too large for one call", size)
	}
	in.stack[0] = uint64(size)
	if err := in.invoke(ctx, in.allocFn); err != nil {
		return nil, fmt.Errorf("%s: %w", abi.ExportAlloc, describeTrap(err))
	}
	ptr := uint32(in.stack[0])
	view, ok := in.mem.Read(ptr, uint32(size))
	if ptr == 0 || !ok {
		return nil, fmt.Errorf("%s(%d) returned %#x, outside the module's memory (out of memory?)", abi.ExportAlloc, size, ptr)
	}
	if got := write(view[:0]); len(got) != size || (size > 0 && &got[0] != &view[0]) {
		return nil, errors.New("host: encoded input does not match its computed size")
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(size)
	if err := in.invoke(ctx, fn); err != nil {
		return nil, describeTrap(err)
	}
	rptr, rlen := abi.UnpackResult(in.stack[0])
	if rlen > maxResult {
		return nil, fmt.Errorf("result of %d bytes exceeds the limit of %d bytes per call", rlen, maxResult)
	}
	res, ok := in.mem.Read(rptr, rlen)
	if !ok {
		return nil, fmt.Errorf("result buffer %#x+%d is outside the module's memory", rptr, rlen)
	}
	return res, nil
}

// runProcess runs gs_process on the process buffer encode writes (size bytes), with cs as
// the call's state (for the host functions and the module's output), within
// lim.CallTimeout, and returns the result buffer. An error, with the first line the module
// wrote to stderr in the call, means the instance is no longer usable.
func (in *instance) runProcess(ctx context.Context, cs *callState, size int, encode func([]byte) []byte, lim Limits) ([]byte, error) {
	cs.group.Store(-1)
	if in.cell != 0 {
		in.mem.WriteUint32Le(in.cell, 0xFFFFFFFF) // no group yet: a failure before the first is no group's
	}
	in.current.Store(cs)
	defer in.current.Store(nil)
	cctx, cancel := context.WithTimeout(context.WithValue(context.WithValue(ctx, callStateKey{}, cs), instanceKey{}, in), lim.CallTimeout)
	defer cancel()
	in.logs.reset(lim.LogBytesPerCall)
	defer in.endLogs(lim.LogBytesPerCall)
	in.errOut.startCall()
	out, err := in.call(cctx, in.processFn, size, lim.MaxResultBytes, encode)
	if err != nil {
		if line := in.errOut.firstLine(); line != "" {
			err = fmt.Errorf("%w (stderr: %s)", err, line)
		}
		return nil, &callFailure{group: cs.groupIndex(), err: err}
	}
	return out, nil
}

// callFailure is the error of a guest call that failed as a whole, with the index of the
// group the guest said it was running when it failed (its group cell, or its last
// group_begin; -1 or out of range: none).
type callFailure struct {
	group int
	err   error
}

func (f *callFailure) Error() string { return f.err.Error() }
func (f *callFailure) Unwrap() error { return f.err }

// suspect returns the index, below n, of the group that was running when the call of err
// failed, if the guest said which.
func suspect(err error, n int) (int, bool) {
	var f *callFailure
	if errors.As(err, &f) && f.group >= 0 && f.group < n {
		return f.group, true
	}
	return 0, false
}

// process runs one guest call for sub. An error means the instance is no longer usable.
func (in *instance) process(ctx context.Context, sub *handler.Call, res []handler.Result, lim Limits) error {
	out, err := in.runProcess(ctx, &callState{groups: sub.Groups, cell: in.cell, mem: in.mem, env: callEnv{timeMs: sub.ProcessingTimeMs}}, handler.EncodedSize(sub), func(dst []byte) []byte {
		return handler.Encode(dst, sub)
	}, lim)
	if err != nil {
		return err
	}
	var callErr *abi.CallError
	if err := handler.Decode(out, res); errors.As(err, &callErr) {
		// The module refused the whole call but is still usable.
		handler.FailAll(res, &handler.GroupError{Message: callErr.Message})
		return nil
	} else if err != nil {
		return fmt.Errorf("module returned a malformed result: %w", err)
	}
	return nil
}

func (in *instance) close(ctx context.Context) {
	in.out.flush()
	in.errOut.flush()
	_ = in.mod.Close(ctx)
}

// invoke calls fn with the instance's stack. The guest is interrupted through its stop flag
// when ctx is done (its deadline passed or it was canceled).
func (in *instance) invoke(ctx context.Context, fn api.Function) error {
	in.stop.Set(0)
	in.frames.Set(0)
	var once sync.Once
	var fired atomic.Bool
	stopWatching := context.AfterFunc(ctx, func() {
		once.Do(func() {
			fired.Store(true)
			in.stop.Set(1)
		})
	})
	err := fn.CallWithStack(ctx, in.stack)
	stopWatching()
	once.Do(func() {}) // wait for a trigger in flight, or keep a late one from firing
	if fired.Load() && err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ErrTimeLimit
		}
		return context.Canceled
	}
	if err != nil && uint32(in.frames.Get()) > in.stackMax {
		return fmt.Errorf("%w: the call stack passed the runtime's limit of %d bytes", ErrStackOverflow, in.stackMax)
	}
	return err
}

// ErrStackOverflow is the error of a guest call whose call stack passed its limit
// (LoadLimits.StackBytes).
var ErrStackOverflow = errors.New("module trapped: stack overflow")

// describeTrap turns wazero's errors into messages that say what happened.
func describeTrap(err error) error {
	if errors.Is(err, ErrTimeLimit) || errors.Is(err, context.Canceled) || errors.Is(err, ErrStackOverflow) {
		return err
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return ErrTimeLimit
		case sys.ExitCodeContextCanceled:
			return context.Canceled
		}
		return fmt.Errorf("module exited with code %d", exit.ExitCode())
	}
	msg, _, _ := strings.Cut(err.Error(), "\n") // the wasm stack trace goes to the log, not to dead letters
	return fmt.Errorf("module trapped: %s", msg)
}

// ErrTimeLimit is the error of a guest call that overran its time limit.
var ErrTimeLimit = errors.New("module exceeded the per-call time limit")
