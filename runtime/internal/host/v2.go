package host

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// ABIVersion implements handler.V2: the module's ABI version (abi.Version or abi.Version2).
func (h *Host) ABIVersion() uint32 { return h.version }

// VarDecls implements handler.V2: a v2 module's variable declarations, in declaration order.
// The slice is the host's: do not modify it.
func (h *Host) VarDecls() []abi.VarDecl { return h.decls }

// ProcessV2 implements handler.V2: it cuts the call into chunks (one phase: every group has
// the same kind) and runs them, each on one instance, with sess serving their state requests.
// When sess is a handler.ForkingSession and the call is big enough to spread (as Process
// spreads a v1 call: 256 groups or more, cut into a multiple of the instance count of equal
// runs), the chunks run on the instances at once: one worker per instance, each running a run
// of consecutive chunks one after the other with a fork of the session, joined in group order
// at the end (RATIONALE.md, "ABI v2: a phase's chunks run at once, each in a fork of the state
// batch"). Otherwise they run one after the other on sess (whose state batch one goroutine
// drives), as do the groups of an isolated attempt, one at a time. Whole-call failures are
// retried as Process does (every group of the failed call is reverted by its session, then
// each is run again alone), within the chunk's session.
func (h *Host) ProcessV2(ctx context.Context, call *handler.CallV2, sess handler.StateSession, results []handler.ResultV2) error {
	if len(call.Groups) == 0 {
		return nil
	}
	budget := &retryBudget{d: h.cfg.Limits.RetryTimeout}
	defer budget.stop()
	out := &outputBudget{limit: h.cfg.Limits.OutputBytesPerBatch}
	batch := &batchStateBudget{limit: h.cfg.Limits.StateBytesPerBatch}
	st := func() *stateBudget { return &stateBudget{perCall: h.cfg.Limits.StateBytesPerCall, batch: batch} }
	before := handler.IsolationOf(ctx)
	if fs, ok := sess.(handler.ForkingSession); ok && before == nil {
		if chunks := h.spreadV2(call); len(chunks) > 1 {
			return h.forkedV2(ctx, budget, call, chunks, fs, results, out, st)
		}
	}
	chunks := h.chunksV2(call)
	if before != nil {
		chunks = chunks[:0]
		for i := range call.Groups {
			chunks = append(chunks, span{i, i + 1})
		}
	}
	sb := st()
	for _, c := range chunks {
		if before != nil {
			if err := before(call.Groups[c.lo].Key); err != nil {
				return err
			}
		}
		if err := h.runChunkV2(ctx, budget, call, c, sess, results, out, sb); err != nil {
			return err
		}
	}
	if before != nil {
		return before(nil) // no group runs any more
	}
	return nil
}

// forkedV2 runs chunks (more than one) on the instances at once: min(Instances, chunks)
// workers, worker w running its run of consecutive chunks one after the other with fork w
// of fs, and joins the forks in their order once every worker is done.
func (h *Host) forkedV2(ctx context.Context, budget *retryBudget, call *handler.CallV2, chunks []span, fs handler.ForkingSession, results []handler.ResultV2, out *outputBudget, st func() *stateBudget) error {
	n := min(h.cfg.Limits.Instances, len(chunks))
	forks, err := fs.Fork(n)
	if err != nil {
		return fmt.Errorf("runtime: forking the state session: %w", err)
	}
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb := st()
			for _, c := range chunks[len(chunks)*w/n : len(chunks)*(w+1)/n] {
				if errs[w] = h.runChunkV2(ctx, budget, call, c, forks[w], results, out, sb); errs[w] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := fs.Join(forks); err != nil {
		errs[n] = fmt.Errorf("runtime: joining the state session's forks: %w", err)
	}
	return errors.Join(errs...)
}

// chunksV2 cuts a v2 call into runs of at most MaxGroupsPerCall groups and MaxBytesPerCall
// bytes (a bigger group alone), as chunks does, without spreading them over the instances.
func (h *Host) chunksV2(call *handler.CallV2) []span {
	lim := h.cfg.Limits
	return cut(len(call.Groups), lim.MaxGroupsPerCall, lim.MaxBytesPerCall, func(i int) int {
		return handler.GroupSizeV2(&call.Groups[i], h.inputs)
	})
}

// spreadV2 cuts a v2 call as chunks cuts a v1 call: spread over the instances when it is big
// enough (one chunk when it is not worth it).
func (h *Host) spreadV2(call *handler.CallV2) []span {
	lim := h.cfg.Limits
	return cut(len(call.Groups), spreadPer(len(call.Groups), lim), lim.MaxBytesPerCall, func(i int) int {
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
				st.drop(k)
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
// limit the requests of the groups that succeeded so far plus those of the calls in progress
// not refused (of every worker, when the chunks run at once: which group passes it first then
// depends on the order the calls run, as for Limits.OutputBytesPerBatch). A refused or failed
// group's writes are reverted, so they never count against another group. A stateBudget is
// used by one goroutine (a worker of ProcessV2, running its calls one after the other); the
// batch's count (batchStateBudget) is shared by the workers.
type stateBudget struct {
	perCall int64
	batch   *batchStateBudget
	group   []int64 // per group of the call in progress, its requests
}

// batchStateBudget is the per-batch count of the workers of one ProcessV2.
type batchStateBudget struct {
	mu    sync.Mutex
	limit int64
	used  int64 // the requests of the groups that succeeded, and of the calls in progress
}

// begin starts a call of n groups.
func (b *stateBudget) begin(n int) {
	b.group = append(b.group[:0], make([]int64, n)...)
}

// take counts n bytes of requests of group g of the call in progress, or says which limit
// they would pass.
func (b *stateBudget) take(g int, n int64) error {
	var own int64
	if g >= 0 && g < len(b.group) {
		own = b.group[g]
	}
	if own+n > b.perCall {
		return fmt.Errorf("%w: the key's state writes would pass the limit of %d bytes a call (serve --max-state-writes-call)", ErrStateLimit, b.perCall)
	}
	bb := b.batch
	bb.mu.Lock()
	defer bb.mu.Unlock()
	if bb.used+n > bb.limit {
		return fmt.Errorf("%w: the batch's state writes would pass the limit of %d bytes a batch (serve --max-state-writes-batch)", ErrStateLimit, bb.limit)
	}
	bb.used += n
	if g >= 0 && g < len(b.group) {
		b.group[g] += n
	}
	return nil
}

// drop leaves group g's requests out of the batch's: it was refused or failed, and its
// writes are reverted.
func (b *stateBudget) drop(g int) {
	if g >= 0 && g < len(b.group) && b.group[g] != 0 {
		b.batch.mu.Lock()
		b.batch.used -= b.group[g]
		b.batch.mu.Unlock()
		b.group[g] = 0
	}
}

// commit keeps group k's requests in the batch's count: its call succeeded for it.
func (b *stateBudget) commit(k int) {
	if k < len(b.group) {
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
