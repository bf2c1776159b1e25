package groupstate

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"

	"github.com/groupstate/groupstate/abi"
)

// testHost is a small in-memory stand-in for the ABI v2 host (abi/README.md section 9), which
// does not exist yet: a map-backed store with the op semantics of 9.4 (TTL invisibility at the
// batch's T, cursor paging), the state function of 9.5 (writes applied in order to the
// group's pending state, answers back to back, the size when they do not fit, -1 when
// refused) and the commit of 9.6 (a failed group's writes are discarded). It is a
// [StateHost] for [Module.SetStateHost].
type testHost struct {
	t      testing.TB
	mode   abi.TimeoutMode
	decls  []abi.VarDecl
	inputs uint32               // the init's input count (abi.InitHasInputs), 0 without
	keys   map[string]*keyState // committed state

	// The batch in progress.
	T      int64
	groups []string    // the keys of the process buffer's groups
	firing [][]int64   // the timers of each TIMERS group
	work   []*keyState // each group's state with its writes so far
	cur    int         // the current group (group_begin), -1 before the first

	// Instrumentation.
	requests [][]byte             // every request, copied
	sent     int                  // list elements and map entries answered
	refuse   func(op abi.Op) bool // refuse requests holding such an op
}

type entry struct {
	b   []byte
	exp int64 // expiry (T >= exp: invisible); 0: none
}

type varState struct {
	val    *entry
	list   []entry
	m      map[string]entry
	sorted []string // m's keys in order, nil when m changed
}

type keyState struct {
	vars   []varState
	timers map[int64]bool
}

func (k *keyState) clone() *keyState {
	c := &keyState{vars: make([]varState, len(k.vars)), timers: map[int64]bool{}}
	for i, v := range k.vars {
		c.vars[i] = varState{val: v.val, list: slices.Clone(v.list), m: map[string]entry{}}
		for mk, e := range v.m {
			c.vars[i].m[mk] = e
		}
	}
	for ts := range k.timers {
		c.timers[ts] = true
	}
	return c
}

// newTestHost initializes m (ABI v2, mode, watermark) and returns a host for it.
func newTestHost(t testing.TB, m *Module, mode abi.TimeoutMode) *testHost {
	t.Helper()
	return newTestHostInit(t, m, mode, initBufV2(mode, "{}"))
}

// newTestHostInit initializes m with the init buffer init (ABI v2, mode) and returns a host
// for it, which writes DATA rows with input indexes when init has abi.InitHasInputs.
func newTestHostInit(t testing.TB, m *Module, mode abi.TimeoutMode, init []byte) *testHost {
	t.Helper()
	st, msg, decls, err := abi.ParseInitResultV2(m.Init(init))
	if err != nil || st != abi.StatusOK {
		t.Fatalf("init: status %d, %q, %v", st, msg, err)
	}
	in, err := abi.ParseInit(init)
	if err != nil {
		t.Fatal(err)
	}
	h := &testHost{t: t, mode: mode, decls: decls, inputs: uint32(len(in.Inputs)), keys: map[string]*keyState{}, cur: -1}
	m.SetStateHost(h)
	return h
}

func initBufV2(mode abi.TimeoutMode, config string) []byte {
	return abi.AppendInit(nil, abi.Init{ABIVersion: abi.Version2, Mode: mode, Flags: abi.InitHasWatermark,
		Name: []byte("test"), Config: []byte(config)})
}

// initBufInputs is initBufV2 with abi.InitHasInputs and the input names.
func initBufInputs(mode abi.TimeoutMode, config string, inputs ...string) []byte {
	in := abi.Init{ABIVersion: abi.Version2, Mode: mode, Flags: abi.InitHasWatermark | abi.InitHasInputs,
		Name: []byte("test"), Config: []byte(config)}
	for _, n := range inputs {
		in.Inputs = append(in.Inputs, []byte(n))
	}
	return abi.AppendInit(nil, in)
}

func (h *testHost) live(e entry) bool { return e.exp == 0 || h.T < e.exp }

func (h *testHost) expiry(v uint32) int64 {
	if ttl := h.decls[v].TTLMs; ttl > 0 {
		return h.T + ttl
	}
	return 0
}

// GroupBegin starts group i's pending state from the committed one.
func (h *testHost) GroupBegin(i uint32) {
	h.cur = int(i)
	if int(i) >= len(h.groups) {
		h.t.Errorf("host: group_begin(%d) out of range", i)
		h.cur = -1
		return
	}
	ks := h.keys[h.groups[i]]
	if ks == nil {
		ks = &keyState{vars: make([]varState, len(h.decls))}
	}
	h.work[i] = ks.clone()
	// Assumption (the draft does not say when a timer is deleted "when it fires"): the
	// group's timers are deleted as the group starts, so a call that registers one again
	// makes a new timer, which fires in a later batch.
	for _, ts := range h.firing[i] {
		delete(h.work[i].timers, ts)
	}
}

// State is groupstate.state.
func (h *testHost) State(req, resp []byte) int32 {
	h.requests = append(h.requests, slices.Clone(req))
	if h.cur < 0 {
		return abi.StateRefused
	}
	ans, ok := h.apply(h.work[h.cur], req, true)
	if !ok {
		return abi.StateRefused
	}
	if len(ans) <= len(resp) {
		copy(resp, ans)
	}
	return int32(len(ans))
}

// apply applies the ops to ks and returns the answers of the reads; false when refused.
func (h *testHost) apply(ks *keyState, ops []byte, readsOK bool) ([]byte, bool) {
	var ans []byte
	var o abi.DecodedOp
	r := abi.NewOpReader(ops)
	for {
		ok, err := r.Next(&o)
		if err != nil {
			h.t.Errorf("host: malformed request: %v", err)
			return nil, false
		}
		if !ok {
			return ans, true
		}
		if h.refuse != nil && h.refuse(o.Op) {
			return nil, false
		}
		if o.Op.IsRead() && !readsOK {
			h.t.Errorf("host: read op %v in a result", o.Op)
			return nil, false
		}
		if k := o.Op.VarKind(); k == 0 {
			if h.mode == abi.TimeoutNone {
				return nil, false
			}
		} else if int(o.Var) >= len(h.decls) || h.decls[o.Var].Kind != k {
			return nil, false
		}
		var v *varState
		var exp int64
		if o.Op.VarKind() != 0 {
			v, exp = &ks.vars[o.Var], h.expiry(o.Var)
		}
		switch o.Op {
		case abi.OpValueGet:
			live := v.val != nil && h.live(*v.val)
			var b []byte
			if live {
				b = v.val.b
			}
			ans = abi.AppendValueAnswer(ans, live, b)
		case abi.OpValueSet:
			v.val = &entry{b: slices.Clone(o.Value), exp: exp}
		case abi.OpValueClear:
			v.val = nil
		case abi.OpListRead:
			var page [][]byte
			size, next := 0, uint64(0)
			for i := int(o.Cursor); i < len(v.list); i++ {
				if !h.live(v.list[i]) {
					continue
				}
				b := v.list[i].b
				if len(page) > 0 && size+4+len(b) > int(o.MaxBytes) {
					next = uint64(i)
					break
				}
				page, size = append(page, b), size+4+len(b)
			}
			h.sent += len(page)
			ans = abi.AppendListReadAnswer(ans, page, next)
		case abi.OpListAppend, abi.OpListPut:
			if o.Op == abi.OpListPut {
				v.list = nil
			}
			for el := range o.Elements() {
				v.list = append(v.list, entry{b: slices.Clone(el), exp: exp})
			}
		case abi.OpListClear:
			v.list = nil
		case abi.OpListDropFirst:
			i, seen := 0, 0
			for ; i < len(v.list) && seen < int(o.N); i++ {
				if h.live(v.list[i]) {
					seen++
				}
			}
			if seen < int(o.N) {
				return nil, false // more than the list has
			}
			v.list = v.list[i:]
		case abi.OpListExists:
			ans = abi.AppendBoolAnswer(ans, slices.ContainsFunc(v.list, h.live))
		case abi.OpMapGet:
			e, ok := v.m[string(o.MapKey)]
			ok = ok && h.live(e)
			ans = abi.AppendValueAnswer(ans, ok, e.b)
		case abi.OpMapContains:
			e, ok := v.m[string(o.MapKey)]
			ans = abi.AppendBoolAnswer(ans, ok && h.live(e))
		case abi.OpMapSet:
			v.m[string(o.MapKey)] = entry{b: slices.Clone(o.Value), exp: exp}
			v.sorted = nil
		case abi.OpMapRemove:
			delete(v.m, string(o.MapKey))
			v.sorted = nil
		case abi.OpMapRead:
			if v.sorted == nil {
				v.sorted = slices.Sorted(maps.Keys(v.m))
			}
			keys := v.sorted
			i := sort.SearchStrings(keys, string(o.MapCursor))
			var page []abi.MapEntry
			size, more := 0, false
			var next []byte
			for ; i < len(keys); i++ {
				if !h.live(v.m[keys[i]]) {
					continue
				}
				k, b := keys[i], v.m[keys[i]].b
				if len(page) > 0 && size+8+len(k)+len(b) > int(o.MaxBytes) {
					more, next = true, []byte(k)
					break
				}
				page, size = append(page, abi.MapEntry{Key: []byte(k), Value: b}), size+8+len(k)+len(b)
			}
			h.sent += len(page)
			ans = abi.AppendMapReadAnswer(ans, page, more, next)
		case abi.OpMapClear:
			v.m, v.sorted = map[string]entry{}, nil
		case abi.OpMapExists:
			ans = abi.AppendBoolAnswer(ans, len(h.liveKeys(v)) > 0)
		case abi.OpTimerRegister:
			ks.timers[o.Ts] = true
		case abi.OpTimerDelete:
			delete(ks.timers, o.Ts)
		case abi.OpTimerList:
			ts := make([]int64, 0, len(ks.timers))
			for t := range ks.timers {
				ts = append(ts, t)
			}
			slices.Sort(ts)
			ans = abi.AppendTimerListAnswer(ans, ts)
		}
	}
}

func (h *testHost) liveKeys(v *varState) []string {
	var keys []string
	for k, e := range v.m {
		if h.live(e) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// resultV2 is one decoded v2 group result.
type resultV2 struct {
	status abi.Status
	err    string
	emits  []string
	ops    []byte
}

// process runs the process buffer in on m, like the host would: it learns the groups' keys,
// calls gs_process, checks the result and commits the writes of the groups that succeeded (in
// order: those sent with reads, then the result's).
func (h *testHost) process(m *Module, in []byte) []resultV2 {
	h.t.Helper()
	return h.processWith(m.Process, in)
}

// processWith is process with gs_process as a function.
func (h *testHost) processWith(gsProcess func([]byte) []byte, in []byte) []resultV2 {
	h.t.Helper()
	var ir abi.InputReaderV2
	ir.SetInputCount(h.inputs)
	if err := ir.Reset(in); err != nil {
		h.t.Fatalf("input: %v", err)
	}
	h.T = ir.Header().ProcessingTimeMs
	h.groups, h.firing, h.cur = h.groups[:0], h.firing[:0], -1
	var g abi.GroupV2
	for {
		ok, err := ir.Next(&g)
		if err != nil {
			h.t.Fatalf("input: %v", err)
		}
		if !ok {
			break
		}
		h.groups = append(h.groups, string(g.Key))
		h.firing = append(h.firing, slices.Collect(g.Timers()))
	}
	h.work = make([]*keyState, len(h.groups))
	out := gsProcess(in)
	rr, err := abi.NewResultReaderV2(out)
	if err != nil {
		h.t.Fatalf("result: %v", err)
	}
	if int(rr.Count()) != len(h.groups) {
		h.t.Fatalf("result has %d groups, want %d", rr.Count(), len(h.groups))
	}
	var res []resultV2
	var gr abi.GroupResultV2
	for i := 0; ; i++ {
		ok, err := rr.Next(&gr)
		if err != nil {
			h.t.Fatalf("result: %v", err)
		}
		if !ok {
			break
		}
		r := resultV2{status: gr.Status, err: string(gr.Error), ops: slices.Clone(gr.Ops)}
		for e := range gr.Emits() {
			r.emits = append(r.emits, string(e))
		}
		res = append(res, r)
		if gr.Status != abi.StatusOK {
			continue
		}
		if h.work[i] == nil {
			h.t.Fatalf("group %d: no group_begin", i)
		}
		if _, ok := h.apply(h.work[i], gr.Ops, false); !ok {
			h.t.Fatalf("group %d: result ops refused", i)
		}
		h.keys[h.groups[i]] = h.work[i]
	}
	return res
}

// dump returns a key's committed state (live entries at T) as text, for comparisons.
func (h *testHost) dump(key string) string {
	ks := h.keys[key]
	if ks == nil {
		return ""
	}
	s := ""
	for i, v := range ks.vars {
		d := h.decls[i]
		switch d.Kind {
		case abi.VarValue:
			if v.val != nil && h.live(*v.val) {
				s += fmt.Sprintf("%s=%s ", d.Name, v.val.b)
			}
		case abi.VarList:
			var els []string
			for _, e := range v.list {
				if h.live(e) {
					els = append(els, string(e.b))
				}
			}
			if len(els) > 0 {
				s += fmt.Sprintf("%s=%v ", d.Name, els)
			}
		case abi.VarMap:
			keys := h.liveKeys(&v)
			if len(keys) > 0 {
				s += d.Name + "={"
				for _, k := range keys {
					s += fmt.Sprintf("%s:%s,", k, v.m[k].b)
				}
				s += "} "
			}
		}
	}
	if len(ks.timers) > 0 {
		ts := slices.Sorted(func(yield func(int64) bool) {
			for t := range ks.timers {
				if !yield(t) {
					return
				}
			}
		})
		s += fmt.Sprintf("timers=%v", ts)
	}
	return s
}

// v2Buf builds a v2 process buffer at processing time T and watermark W.
type v2Buf struct{ b []byte }

func newV2Buf(T, W int64, groups int) *v2Buf {
	return &v2Buf{b: abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: uint32(groups), ProcessingTimeMs: T, WatermarkMs: W})}
}

func (b *v2Buf) data(key string, rows ...string) *v2Buf {
	rs := make([][]byte, len(rows))
	for i, r := range rows {
		rs[i] = []byte(r)
	}
	b.b = abi.AppendDataGroup(b.b, []byte(key), rs)
	return b
}

// dataInputs appends a DATA group with input indexes (an init with abi.InitHasInputs): rows
// alternate an input index and a row.
func (b *v2Buf) dataInputs(key string, rows ...any) *v2Buf {
	var rs [][]byte
	var ins []uint32
	for i := 0; i+1 < len(rows); i += 2 {
		ins = append(ins, uint32(rows[i].(int)))
		rs = append(rs, []byte(rows[i+1].(string)))
	}
	b.b = abi.AppendDataGroupInputs(b.b, []byte(key), rs, ins)
	return b
}

func (b *v2Buf) timers(key string, ts ...int64) *v2Buf {
	b.b = abi.AppendTimersGroup(b.b, []byte(key), ts)
	return b
}

func (b *v2Buf) initial(key, state string) *v2Buf {
	b.b = abi.AppendInitialGroup(b.b, []byte(key), []byte(state))
	return b
}
