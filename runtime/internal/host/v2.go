package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// ABIVersion implements handler.V2: the module's ABI version (abi.Version or abi.Version2).
func (h *Host) ABIVersion() uint32 { return h.version }

// VarDecls implements handler.V2: a v2 module's variable declarations, in declaration order.
// The slice is the host's: do not modify it.
func (h *Host) VarDecls() []abi.VarDecl { return h.decls }

// ProcessV2 implements handler.V2: it cuts the call into chunks (one phase: every group has
// the same kind) and runs them one after the other, each on one instance, with sess serving
// their state requests. Unlike Process, a v2 call never runs chunks in parallel: the session
// is the engine's state batch, which one goroutine drives (state.Batch and its KeyTxn are not
// safe for concurrent use, and only one KeyTxn may be open at a time). Whole-call failures are
// retried as Process does (every group of the failed call is reverted by the session, then
// each is run again alone).
func (h *Host) ProcessV2(ctx context.Context, call *handler.CallV2, sess handler.StateSession, results []handler.ResultV2) error {
	if len(call.Groups) == 0 {
		return nil
	}
	budget := &retryBudget{d: h.cfg.Limits.RetryTimeout}
	defer budget.stop()
	out := &outputBudget{limit: h.cfg.Limits.OutputBytesPerBatch}
	st := &stateBudget{perCall: h.cfg.Limits.StateBytesPerCall, perBatch: h.cfg.Limits.StateBytesPerBatch}
	chunks := h.chunksV2(call)
	before := handler.IsolationOf(ctx)
	if before != nil {
		chunks = chunks[:0]
		for i := range call.Groups {
			chunks = append(chunks, span{i, i + 1})
		}
	}
	for _, c := range chunks {
		if before != nil {
			if err := before(call.Groups[c.lo].Key); err != nil {
				return err
			}
		}
		if err := h.runChunkV2(ctx, budget, call, c, sess, results, out, st); err != nil {
			return err
		}
	}
	if before != nil {
		return before(nil) // no group runs any more
	}
	return nil
}

// chunksV2 cuts a v2 call into runs of at most MaxGroupsPerCall groups and MaxBytesPerCall
// bytes (a bigger group alone), as chunks does, without spreading them over the instances.
func (h *Host) chunksV2(call *handler.CallV2) []span {
	lim := h.cfg.Limits
	return cut(len(call.Groups), lim.MaxGroupsPerCall, lim.MaxBytesPerCall, func(i int) int {
		return handler.GroupSizeV2(&call.Groups[i], h.inputs)
	})
}

// runChunkV2 is runChunk for a v2 chunk: every guest call (the first, and each retry) is
// followed by the session's End of its groups, which applies the successful groups' remaining
// ops and reverts the failed groups' writes, before the next guest call begins. Failures are
// settled as runChunk's, one call at a time.
func (h *Host) runChunkV2(ctx context.Context, budget *retryBudget, call *handler.CallV2, s span, sess handler.StateSession, results []handler.ResultV2, out *outputBudget, st *stateBudget) error {
	groups, res := call.Groups[s.lo:s.hi], results[s.lo:s.hi]
	run := func(ctx context.Context, lo, hi int) error {
		sub := &handler.CallV2{ProcessingTimeMs: call.ProcessingTimeMs, WatermarkMs: call.WatermarkMs, Groups: groups[lo:hi]}
		err := h.withInstance(ctx, func(in *instance) error {
			return in.processV2(ctx, sub, s.lo+lo, sess, res[lo:hi], h.cfg.Limits, h.inputs, st)
		})
		took := make([]int64, hi-lo) // the output bytes each group took
		if err != nil {
			handler.FailAllV2(res[lo:hi], pinned(err, hi-lo))
		} else {
			for k := range took {
				if r := &res[lo+k]; r.Err == nil {
					n := emitted(r.Emits)
					if oerr := out.take(n); oerr != nil {
						*r = handler.ResultV2{Err: oerr}
					} else {
						took[k] = n
					}
				}
			}
		}
		sess.End(s.lo+lo, res[lo:hi])
		for k := range took {
			if res[lo+k].Err != nil {
				out.refund(took[k])
			} else {
				st.commit(k)
			}
		}
		return err
	}
	fail := func(lo, hi int, err error) {
		handler.FailAllV2(res[lo:hi], err)
		sess.End(s.lo+lo, res[lo:hi])
	}
	return h.settle(ctx, budget, 0, len(groups), run(ctx, 0, len(groups)), false, run, fail)
}

// stateBudget counts the ABI v2 state requests of one ProcessV2 (Limits.StateBytesPerCall
// and StateBytesPerBatch): the bytes of each state request (reads included) and of each
// result's ops. The per-call limit bounds each group's own requests in a call; the per-batch
// limit the requests of the groups that succeeded so far plus those of the call in progress
// not refused. A refused or failed group's writes are reverted, so they never count against
// another group. Used by one goroutine at a time (ProcessV2 runs its calls one after the
// other).
type stateBudget struct {
	perCall, perBatch int64
	used              int64   // the requests of the batch's groups that succeeded
	call              int64   // the requests of the call in progress, refused groups' left out
	group             []int64 // per group of the call in progress, its requests
}

// begin starts a call of n groups.
func (b *stateBudget) begin(n int) {
	b.call = 0
	b.group = append(b.group[:0], make([]int64, n)...)
}

// take counts n bytes of requests of group g of the call in progress, or says which limit
// they would pass.
func (b *stateBudget) take(g int, n int64) error {
	var own int64
	if g >= 0 && g < len(b.group) {
		own = b.group[g]
	}
	switch {
	case own+n > b.perCall:
		return fmt.Errorf("%w: the key's state writes would pass the limit of %d bytes a call (serve --max-state-writes-call)", ErrStateLimit, b.perCall)
	case b.used+b.call+n > b.perBatch:
		return fmt.Errorf("%w: the batch's state writes would pass the limit of %d bytes a batch (serve --max-state-writes-batch)", ErrStateLimit, b.perBatch)
	}
	b.call += n
	if g >= 0 && g < len(b.group) {
		b.group[g] += n
	}
	return nil
}

// drop leaves group g's requests out of the call's: it was refused, and its writes are
// reverted.
func (b *stateBudget) drop(g int) {
	if g >= 0 && g < len(b.group) {
		b.call -= b.group[g]
		b.group[g] = 0
	}
}

// commit counts group k's writes for the batch: its call succeeded for it.
func (b *stateBudget) commit(k int) {
	if k < len(b.group) {
		b.used += b.group[k]
		b.group[k] = 0
	}
}

// processV2 runs one v2 guest call for sub, with the rows' input indexes when inputs (the
// module's init had abi.InitHasInputs). An error means the instance is no longer usable.
func (in *instance) processV2(ctx context.Context, sub *handler.CallV2, lo int, sess handler.StateSession, res []handler.ResultV2, lim Limits, inputs bool, st *stateBudget) error {
	n := len(sub.Groups)
	st.begin(n)
	cs := &callState{env: callEnv{timeMs: sub.ProcessingTimeMs}, groupsV2: sub.Groups, lo: lo, sess: sess, cur: -1, begun: make([]bool, n), refused: make([]error, n), state: st}
	out, err := in.runProcess(ctx, cs, handler.EncodedSizeV2(sub, inputs), func(dst []byte) []byte {
		return handler.EncodeV2(dst, sub, inputs)
	}, lim)
	if err != nil {
		return err
	}
	var callErr *abi.CallError
	if err := handler.DecodeV2(out, res); errors.As(err, &callErr) {
		handler.FailAllV2(res, &handler.GroupError{Message: callErr.Message})
		return nil
	} else if err != nil {
		return fmt.Errorf("module returned a malformed result: %w", err)
	}
	for i, e := range cs.refused {
		if e == nil && res[i].Err == nil && len(res[i].Ops) > 0 {
			if serr := st.take(i, int64(len(res[i].Ops))); serr != nil {
				e = &handler.GroupError{Message: "the module's result holds state writes over a limit: " + serr.Error()}
			}
		}
		if e != nil {
			res[i] = handler.ResultV2{Err: e}
		}
	}
	return nil
}
