package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// v2engine is what an engine of an ABI v2 (transformWithState) module has besides v1's
// (docs/semantics.md, "transformWithState handlers"). Its batches run in phases, INITIAL
// (first batch only), DATA, TIMERS, each a handler call whose groups read and write their
// key's state variables through a state session (v2session) over the batch's state.Batch.
type v2engine struct {
	h     handler.V2
	decls []state.VarDecl // the module's declarations, in its order
	// vars are the declarations as the last commit resolved them (nil until a batch of this
	// engine committed its DeclareVars).
	vars *state.Vars

	sess    v2session
	groups  []handler.GroupV2 // the phase's groups (reused)
	results []handler.ResultV2
	index   map[string]int // TIMERS phase: key -> group
}

// newV2 returns the v2 side of an engine whose module is h, after checking that the module's
// declarations may replace the keyspace's (a kind change is refused: state.ErrVarKind) and
// that the keyspace ran under the timeout mode mode, if it recorded one (ErrTimeModeChanged).
func newV2(ks *state.Deployment, h handler.V2, mode timeouts.Mode) (*v2engine, error) {
	if was, ok, err := ks.TimeMode(); err != nil {
		return nil, err
	} else if ok && timeouts.Mode(was) != mode {
		return nil, fmt.Errorf("%w: it was %s and is now %s; the deployment's timers were registered under %s (deploy under a new name to change it)",
			ErrTimeModeChanged, timeouts.Mode(was), mode, timeouts.Mode(was))
	}
	ad := h.VarDecls()
	decls := make([]state.VarDecl, len(ad))
	for i, d := range ad {
		decls[i] = state.VarDecl{Name: d.Name, Kind: state.VarKind(d.Kind), TTLMs: d.TTLMs}
	}
	if err := ks.CheckVars(decls); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	return &v2engine{h: h, decls: decls}, nil
}

// runV2 runs in as a new batch of a v2 module: INITIAL, DATA and TIMERS phases, each built
// after the one before it was applied, then the TTL expiry, then one commit (a v2 batch never
// commits in chunks: the TIMERS phase takes the timers of at most chunkKeys keys, and when more
// are expired the report asks for another batch at once, NeedsNoDataBatch).
func (e *Engine) runV2(ctx context.Context, in BatchInput, start time.Time) (*BatchReport, error) {
	b := &e.batch
	v := e.v2
	b.begin(in)
	defer func() {
		clear(v.groups[:cap(v.groups)])
		clear(v.results[:cap(v.results)])
		v.sess = v2session{}
		b.end()
	}()
	if in.Drain {
		if err := b.drainBound(); err != nil {
			return nil, err
		}
	}
	b.groupRows(in.Rows)
	b.nextW, b.ownMax, b.recordMax = e.nextWatermark(b)
	if in.NextWatermarkMs != nil {
		b.nextW = *in.NextWatermarkMs
	}

	vars := v.vars
	declared := vars != nil
	if !declared {
		var err error
		if vars, err = b.sb.DeclareVars(v.decls); err != nil {
			return nil, fmt.Errorf("engine: declaring state variables: %w", err)
		}
		b.sb.SetTimeMode(uint8(e.rules.Mode))
	}
	v.sess = v2session{b: b, vars: vars, noTimers: e.rules.Mode == timeouts.None}
	calls := 0

	// INITIAL: once per keyspace, every key of the file, with its line's state.
	if e.initial != nil {
		b.sb.MarkInitialStateApplied()
		b.initialApplied = true
		v.groups = v.groups[:0]
		e.initial.each(func(key, st []byte) {
			v.groups = append(v.groups, handler.GroupV2{Kind: abi.GroupInitial, Key: b.keep(key), Initial: st})
		})
		if err := b.phase(ctx); err != nil {
			return nil, err
		}
		b.rep.InitialCalls += len(v.groups)
		calls += len(v.groups)
	}

	// DATA: every key with rows, its rows in arrival order.
	v.groups = v.groups[:0]
	for i := range b.nData {
		g := &b.groups[i]
		v.groups = append(v.groups, handler.GroupV2{Kind: abi.GroupData, Key: g.Key, Rows: g.Rows, Inputs: g.Inputs})
	}
	if err := b.phase(ctx); err != nil {
		return nil, err
	}
	b.rep.DataCalls += b.nData
	calls += b.nData

	// TIMERS: the expired timers, as the batch sees them after its data calls.
	more, err := b.collectTimers(in.Drain)
	if err != nil {
		return nil, err
	}
	if err := b.phase(ctx); err != nil {
		return nil, err
	}
	for i := range v.groups {
		b.rep.TimeoutCalls += len(v.groups[i].Timers)
	}
	calls += len(v.groups)

	// TTL: entries expired at T go at the end of the batch.
	n, err := b.sb.ExpireTTL(b.T)
	if err != nil {
		return nil, fmt.Errorf("engine: expiring TTL: %w", err)
	}
	b.rep.TTLExpired = n

	if len(in.Rows) == 0 && calls == 0 && n == 0 && declared && (in.Position == 0 || in.Position == e.progress.Position) && b.nextW == b.W {
		return b.skipCommit(ctx, start) // nothing to commit, as run says for v1
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("engine: batch %d: %w", b.id, err)
	}
	p, err := b.commit(in.Position, false)
	if err != nil {
		return nil, err
	}
	v.vars = vars
	b.committed(ctx, p)
	return b.report(start, more), nil
}

// collectTimers makes the TIMERS phase's groups: the timers expired before the batch's bound
// (ts < T or ts < W; with a drain, every timer held before the batch), as the batch sees them
// now, one group per key in the order of its first timer, its timers ascending. It takes the
// keys of at most chunkKeys (not for a drain, which takes them all) and tells whether expired
// timers of more keys are left.
func (b *batch) collectTimers(drain bool) (more bool, err error) {
	v := b.e.v2
	v.groups = v.groups[:0]
	if !b.hasBound {
		return false, nil
	}
	if v.index == nil {
		v.index = map[string]int{}
	}
	clear(v.index)
	limit := b.e.chunkKeys
	if drain {
		limit = math.MaxInt
	}
	err = b.sb.ExpiredTimers(state.TimerPos{TimeoutMs: math.MinInt64}, b.bound, func(key []byte, ts int64) error {
		if i, ok := v.index[string(key)]; ok {
			v.groups[i].Timers = append(v.groups[i].Timers, ts)
			return nil
		}
		if len(v.groups) >= limit {
			more = true
			return errChunkFull
		}
		k := b.keep(key)
		v.index[string(k)] = len(v.groups)
		v.groups = append(v.groups, handler.GroupV2{Kind: abi.GroupTimers, Key: k, Timers: []int64{ts}})
		return nil
	})
	if err != nil && err != errChunkFull {
		return false, fmt.Errorf("engine: scanning timers: %w", err)
	}
	return more, nil
}

// phase runs the groups of e.v2.groups (one kind) and records their outcomes: emits in the
// outbox, failures by the deployment's policy. The session applied their state as they ran
// and reverted the failed ones.
func (b *batch) phase(ctx context.Context) error {
	v := b.e.v2
	if len(v.groups) == 0 {
		return nil
	}
	v.results = resize(v.results, len(v.groups))
	clear(v.results)
	v.sess.start(v.groups)
	call := &handler.CallV2{ProcessingTimeMs: b.T, WatermarkMs: b.W, Groups: v.groups}
	ctx, err := b.e.att.begin(ctx, b.id)
	if err != nil {
		return err
	}
	if err := v.h.ProcessV2(ctx, call, &v.sess, v.results); err != nil {
		return fmt.Errorf("engine: running the handler: %w", err)
	}
	if v.sess.fatal != nil {
		return fmt.Errorf("engine: batch %d: state: %w", b.id, v.sess.fatal)
	}
	for i := range v.results {
		r := &v.results[i]
		b.e.quar.outcome(v.groups[i].Key, r.Err, b.T, b.id)
		if r.Err != nil {
			if err := b.failV2(i, &v.groups[i], r.Err); err != nil {
				return err
			}
			continue
		}
		for _, row := range r.Emits {
			b.append(state.OutboxEntry{Kind: state.OutboxOutput, Key: v.groups[i].Key, Payload: row})
		}
		b.rep.Emitted += len(r.Emits)
	}
	return nil
}

// failV2 handles the failure of group i of a v2 phase (its writes are already reverted): under
// on_error: fail the batch fails; under dead_letter a DATA group's rows are dead-lettered, a
// TIMERS group gets one dead letter naming the key and its timers (which are consumed), an
// INITIAL group one naming the key.
func (b *batch) failV2(i int, g *handler.GroupV2, err error) error {
	kerr := &KeyError{Key: string(g.Key), Err: err}
	if b.e.spec.OnError == spec.OnErrorFail {
		return fmt.Errorf("%w: %w", ErrKeyFailed, kerr)
	}
	b.rep.FailedKeys++
	b.e.logger.Warn("handler failed for a key; dead-lettering", "key", string(g.Key), "phase", g.Kind.String(), "err", err)
	switch g.Kind {
	case abi.GroupData:
		for _, j := range b.rowIdx[b.rowStart[i]:b.rowStart[i+1]] {
			b.deadLetter(g.Key, b.in[j], ReasonHandlerError, err)
		}
	case abi.GroupTimers:
		ts := make([]string, len(g.Timers))
		for k, t := range g.Timers {
			ts[k] = strconv.FormatInt(t, 10)
		}
		what := "timer " + ts[0]
		if len(ts) > 1 {
			what = "timers " + strings.Join(ts, ", ")
		}
		b.append(state.OutboxEntry{Kind: state.OutboxDeadLetter, Key: g.Key, Reason: ReasonHandlerError, Error: what + ": " + err.Error(), TimeoutCall: true})
		b.rep.DeadLetters++
	default:
		b.append(state.OutboxEntry{Kind: state.OutboxDeadLetter, Key: g.Key, Reason: ReasonHandlerError, Error: "initial state: " + err.Error()})
		b.rep.DeadLetters++
	}
	return nil
}

// v2session implements handler.ForkingSession over the batch's state.Batch: one KeyTxn per
// group call, opened at group_begin and committed when the next group begins or the guest call
// ends; at the end of each guest call the successful groups' remaining ops are applied (each in
// a transaction of its own, after the call: they are writes only) and the failed groups'
// transactions are reverted at once (state.Batch.RevertKeys). The groups of one phase have
// distinct keys, which RevertKeys relies on, and which lets the chunks of a phase run at once,
// each with a session over a fork of the state batch (Fork, Join; state.Batch.Fork).
type v2session struct {
	b *batch
	// sb is the state batch the session's transactions write: the batch's (nil: b.sb), or a
	// fork of it.
	sb       *state.Batch
	vars     *state.Vars
	noTimers bool // timeout: none refuses timer ops
	groups   []handler.GroupV2
	txns     [][]*state.KeyTxn // per group of the phase: its committed transactions of the current guest call
	cur      *state.KeyTxn     // the open transaction, if any
	// fatal is a failure of the store (not of the guest): the batch fails with it.
	fatal  error
	rd     abi.OpReader
	op     abi.DecodedOp
	elems  [][]byte
	ents   []abi.MapEntry
	revert []*state.KeyTxn
}

// start begins a phase of groups.
func (s *v2session) start(groups []handler.GroupV2) {
	s.groups = groups
	s.txns = resize(s.txns, len(groups))
	clear(s.txns)
	s.cur = nil
}

// batch returns the state batch the session's transactions write.
func (s *v2session) batch() *state.Batch {
	if s.sb != nil {
		return s.sb
	}
	return s.b.sb
}

// Fork implements handler.ForkingSession: n sessions, each over a fork of the state batch
// (state.Batch.Fork), serving the groups of the phase the host gives it.
func (s *v2session) Fork(n int) ([]handler.StateSession, error) {
	if s.fatal != nil {
		return nil, s.fatal
	}
	s.closeCur()
	sbs, err := s.batch().Fork(n)
	if err != nil {
		return nil, s.store(err)
	}
	forks := make([]handler.StateSession, n)
	for i, sb := range sbs {
		f := &v2session{b: s.b, sb: sb, vars: s.vars, noTimers: s.noTimers}
		f.start(s.groups)
		forks[i] = f
	}
	return forks, nil
}

// Join implements handler.ForkingSession: the forks' writes join the state batch's in their
// order (state.Batch.Join), and a fork's store failure is the session's.
func (s *v2session) Join(forks []handler.StateSession) error {
	sbs := make([]*state.Batch, len(forks))
	for i, f := range forks {
		fs := f.(*v2session)
		fs.closeCur()
		sbs[i] = fs.sb
		if fs.fatal != nil {
			s.store(fs.fatal)
		}
	}
	if err := s.batch().Join(sbs...); err != nil {
		return s.store(err)
	}
	return s.fatal
}

// errGuest marks errors that are the guest's doing (the group fails), not the store's.
type errGuest struct{ msg string }

func (e *errGuest) Error() string { return e.msg }

func guestErr(format string, args ...any) error { return &errGuest{fmt.Sprintf(format, args...)} }

// store records a failure of the store (fatal for the batch) and returns it.
func (s *v2session) store(err error) error {
	if s.fatal == nil {
		s.fatal = err
	}
	return err
}

// closeCur commits the open transaction, if any.
func (s *v2session) closeCur() {
	if s.cur != nil {
		if err := s.cur.Commit(); err != nil {
			s.store(err)
		}
		s.cur = nil
	}
}

// open opens a transaction for group i. With consume, a TIMERS group's timers are deleted
// first, so they are consumed (and a handler that registers one of them again keeps it): in
// the group's first transaction of a guest call, and after a failed call.
func (s *v2session) open(i int, consume bool) (*state.KeyTxn, error) {
	g := &s.groups[i]
	t := s.batch().Key(s.vars, g.Key, s.b.T)
	if consume && g.Kind == abi.GroupTimers {
		for _, ts := range g.Timers {
			if err := t.TimerDelete(ts); err != nil {
				_ = t.Discard()
				return nil, s.store(err)
			}
		}
	}
	return t, nil
}

// resume opens the transaction of group i's result ops: a continuation of the group's last
// transaction of the guest call (state.KeyTxn.Continue), which knows what the group read and
// wrote during the call, so that the writes need not read it again; or, when the group had
// none, a new one that consumes a TIMERS group's timers first, as open does.
func (s *v2session) resume(i int) (*state.KeyTxn, error) {
	txns := s.txns[i]
	if len(txns) == 0 {
		return s.open(i, true)
	}
	return txns[len(txns)-1].Continue(), nil
}

// Begin implements handler.StateSession.
func (s *v2session) Begin(i int) error {
	if s.fatal != nil {
		return s.fatal
	}
	s.closeCur()
	if s.fatal != nil {
		return s.fatal
	}
	t, err := s.open(i, true)
	if err != nil {
		return err
	}
	s.txns[i] = append(s.txns[i], t)
	s.cur = t
	return nil
}

// Apply implements handler.StateSession.
func (s *v2session) Apply(req, dst []byte) ([]byte, error) {
	if s.fatal != nil {
		return dst, s.fatal
	}
	if s.cur == nil {
		return dst, errors.New("no current group")
	}
	s.rd.Reset(req)
	for {
		ok, err := s.rd.Next(&s.op)
		if err != nil {
			return dst, err
		}
		if !ok {
			return dst, nil
		}
		if dst, err = s.apply(s.cur, &s.op, dst); err != nil {
			return dst, err
		}
	}
}

// apply applies one op to t, appending a read op's answer to dst.
func (s *v2session) apply(t *state.KeyTxn, o *abi.DecodedOp, dst []byte) ([]byte, error) {
	if k := o.Op.VarKind(); k != 0 {
		if int(o.Var) >= s.vars.Len() {
			return dst, guestErr("%s names state variable %d; the module declared %d", o.Op, o.Var, s.vars.Len())
		}
		if d := s.vars.Decl(int(o.Var)); d.Kind != state.VarKind(k) {
			return dst, guestErr("%s on state variable %s, which is a %s", o.Op, d.Name, d.Kind)
		}
	} else if s.noTimers {
		return dst, guestErr("%s: timer ops are refused under timeout: none", o.Op)
	}
	v := int(o.Var)
	var err error
	switch o.Op {
	case abi.OpValueGet:
		var val []byte
		var ok bool
		if val, ok, err = t.ValueGet(v); err == nil {
			dst = abi.AppendValueAnswer(dst, ok, val)
		}
	case abi.OpValueSet:
		err = t.ValueSet(v, o.Value)
	case abi.OpValueClear:
		err = t.ValueClear(v)
	case abi.OpListRead:
		var elems [][]byte
		var next uint64
		if elems, next, err = t.ListRead(v, o.Cursor, int(o.MaxBytes)); err == nil {
			if len(elems) == 0 {
				next = 0
			}
			dst = abi.AppendListReadAnswer(dst, elems, next)
		}
	case abi.OpListAppend, abi.OpListPut:
		s.elems = s.elems[:0]
		c := o.ElementCursor()
		for e, ok := c.Next(); ok; e, ok = c.Next() {
			s.elems = append(s.elems, e)
		}
		if o.Op == abi.OpListAppend {
			err = t.ListAppend(v, s.elems...)
		} else {
			err = t.ListPut(v, s.elems...)
		}
		clear(s.elems)
	case abi.OpListClear:
		err = t.ListClear(v)
	case abi.OpListDropFirst:
		err = t.ListDropFirst(v, int(o.N))
	case abi.OpListExists:
		var ok bool
		if ok, err = t.ListExists(v); err == nil {
			dst = abi.AppendBoolAnswer(dst, ok)
		}
	case abi.OpMapGet:
		var val []byte
		var ok bool
		if val, ok, err = t.MapGet(v, o.MapKey); err == nil {
			dst = abi.AppendValueAnswer(dst, ok, val)
		}
	case abi.OpMapContains:
		var ok bool
		if ok, err = t.MapContains(v, o.MapKey); err == nil {
			dst = abi.AppendBoolAnswer(dst, ok)
		}
	case abi.OpMapSet:
		err = t.MapSet(v, o.MapKey, o.Value)
	case abi.OpMapRemove:
		err = t.MapRemove(v, o.MapKey)
	case abi.OpMapRead:
		var ents []state.MapEntry
		var next []byte
		var more bool
		if ents, next, more, err = t.MapRead(v, o.MapCursor, int(o.MaxBytes)); err == nil {
			s.ents = s.ents[:0]
			for _, en := range ents {
				s.ents = append(s.ents, abi.MapEntry{Key: en.Key, Value: en.Value})
			}
			if !more || len(ents) == 0 {
				more, next = false, nil
			}
			dst = abi.AppendMapReadAnswer(dst, s.ents, more, next)
			clear(s.ents)
		}
	case abi.OpMapClear:
		err = t.MapClear(v)
	case abi.OpMapExists:
		var ok bool
		if ok, err = t.MapExists(v); err == nil {
			dst = abi.AppendBoolAnswer(dst, ok)
		}
	case abi.OpTimerRegister:
		err = t.TimerRegister(o.Ts)
	case abi.OpTimerDelete:
		err = t.TimerDelete(o.Ts)
	case abi.OpTimerList:
		var ts []int64
		if ts, err = t.Timers(); err == nil {
			dst = abi.AppendTimerListAnswer(dst, ts)
		}
	default:
		return dst, guestErr("unknown op %#x", uint8(o.Op))
	}
	if err != nil {
		if errors.Is(err, state.ErrVarOp) {
			return dst, guestErr("%s: %v", o.Op, err)
		}
		return dst, s.store(err)
	}
	return dst, nil
}

// End implements handler.StateSession.
func (s *v2session) End(lo int, results []handler.ResultV2) {
	s.closeCur()
	s.revert = s.revert[:0]
	for k := range results {
		i, r := lo+k, &results[k]
		g := &s.groups[i]
		if r.Err == nil {
			r.Err = checkEmits(r.Emits)
		}
		if r.Err == nil && s.fatal == nil && (len(r.Ops) > 0 || (g.Kind == abi.GroupTimers && len(s.txns[i]) == 0)) {
			t, err := s.resume(i)
			if err == nil {
				err = s.applyWrites(t, r.Ops)
				if err != nil {
					_ = t.Discard()
				} else if cerr := t.Commit(); cerr != nil {
					s.store(cerr)
				}
			}
			if err != nil {
				r.Err = &handler.GroupError{Message: "the module's result holds refused state writes: " + err.Error()}
			}
		}
		if r.Err != nil {
			s.revert = append(s.revert, s.txns[i]...)
		}
	}
	if len(s.revert) > 0 && s.fatal == nil {
		if err := s.batch().RevertKeys(s.revert...); err != nil {
			s.store(err)
		}
	}
	clear(s.revert)
	for k := range results {
		i := lo + k
		s.txns[i] = s.txns[i][:0]
		if g := &s.groups[i]; results[k].Err != nil && g.Kind == abi.GroupTimers && s.fatal == nil {
			// A failed timer call consumes its timers all the same.
			t, err := s.open(i, true)
			if err == nil {
				if err := t.Commit(); err != nil {
					s.store(err)
				}
			}
		}
	}
}

// applyWrites applies a result's op list (write ops only, checked by the result's reader).
func (s *v2session) applyWrites(t *state.KeyTxn, ops []byte) error {
	s.rd.Reset(ops)
	for {
		ok, err := s.rd.Next(&s.op)
		if err != nil || !ok {
			return err
		}
		if _, err := s.apply(t, &s.op, nil); err != nil {
			return err
		}
	}
}

// checkEmits fails a group that emitted a row that is not JSON, as apply does for v1.
func checkEmits(emits [][]byte) error {
	for j, row := range emits {
		if !json.Valid(row) {
			return fmt.Errorf("emitted row %d is not valid JSON", j)
		}
	}
	return nil
}
