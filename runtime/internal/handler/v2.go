package handler

import (
	"context"
	"fmt"

	"github.com/groupstate/groupstate/abi"
)

// GroupV2 is one group of an ABI v2 (transformWithState) call: a key's rows (abi.GroupData),
// its expired timers (abi.GroupTimers) or its initial state (abi.GroupInitial). Every group
// of one CallV2 has the same kind (abi/README.md 9.3: one phase per buffer).
type GroupV2 struct {
	Kind abi.GroupKind
	// Key is the canonical JSON scalar of the key.
	Key []byte
	// Rows are the key's rows in arrival order (abi.GroupData).
	Rows [][]byte
	// Inputs holds, for a deployment with several inputs (abi.InitHasInputs), the index of
	// each row's input among the init's input names (Inputs[i] is Rows[i]'s); nil for a
	// deployment with one input. The host writes it only for a module whose init had
	// abi.InitHasInputs (abi/README.md 9.3a).
	Inputs []uint32
	// Timers are the key's expired timers, strictly ascending (abi.GroupTimers).
	Timers []int64
	// Initial is the key's line of the initial state, a JSON object (abi.GroupInitial).
	Initial []byte
}

// CallV2 is one phase of a batch for an ABI v2 module.
type CallV2 struct {
	ProcessingTimeMs int64
	WatermarkMs      int64
	Groups           []GroupV2
}

// ResultV2 is one v2 group's outcome, copied out of the handler's memory.
type ResultV2 struct {
	// Err is set when the group failed: the handler's error, a refused state request, a
	// whole-call failure, or (set by the StateSession) writes it refused. The writes of a
	// failed group are reverted by the session.
	Err error
	// Emits are the emitted rows in emission order.
	Emits [][]byte
	// Ops are the group's remaining write ops (abi/README.md 9.6), well-formed; the session
	// applies them at End.
	Ops []byte
}

// StateSession is the state side of a v2 call, provided by the engine: the host hands it
// what the guest does, in order, on the goroutine of the guest call. It is driven by one
// guest call at a time, so it needs no locking; a ForkingSession lets the host run several
// guest calls at once, each with a fork of its own.
type StateSession interface {
	// Begin makes group i (an index into the CallV2's Groups) the current group: it ends the
	// previous group's transaction and opens group i's. An error fails group i (its state
	// requests are refused).
	Begin(i int) error
	// Apply applies the op list req to the current group, in order, and appends the answers
	// of its read ops to dst. An error refuses the request: the group fails with it.
	Apply(req, dst []byte) ([]byte, error)
	// End ends a guest call of the groups lo, lo+1, ... (results[k] is group lo+k's; the
	// groups of a whole-call failure all have Err set): it applies each successful group's
	// remaining ops (setting Err when it refuses them), then reverts the writes of every
	// failed group.
	End(lo int, results []ResultV2)
}

// ForkingSession is a StateSession whose calls' chunks may run at once: Fork returns n
// sessions, one per run of consecutive groups (in group order), each driven by a goroutine of
// its own beside the others as a StateSession is (Begin, Apply and End with the call's group
// indexes, of its run only); the session itself is not used until Join, which ends them and
// keeps their state as if their groups had run one after the other on the session itself. An
// error of Fork or Join fails the call as a whole (the handler returns it).
type ForkingSession interface {
	StateSession
	Fork(n int) ([]StateSession, error)
	Join(forks []StateSession) error
}

// V2 is implemented by handlers that can run ABI v2 modules.
type V2 interface {
	// ABIVersion is the module's ABI version (abi.Version or abi.Version2).
	ABIVersion() uint32
	// VarDecls are a v2 module's state variable declarations, in declaration order (an op's
	// variable index is its position here).
	VarDecls() []abi.VarDecl
	// ProcessV2 runs call, one guest call at a time per session (the chunks of a call on
	// several instances at once when sess is a ForkingSession), with sess for its state, and fills
	// results (len(results) == len(call.Groups)). Like Process, it returns an error only when
	// the handler as a whole is unusable or ctx ended.
	ProcessV2(ctx context.Context, call *CallV2, sess StateSession, results []ResultV2) error
}

// EncodedSizeV2 returns the size of the process buffer of call; inputs tells whether the
// module's init had abi.InitHasInputs (see EncodeV2).
func EncodedSizeV2(call *CallV2, inputs bool) int {
	n := abi.ProcessHeaderSize
	for i := range call.Groups {
		n += GroupSizeV2(&call.Groups[i], inputs)
	}
	return n
}

// GroupSizeV2 returns the encoded size of g; inputs tells whether the module's init had
// abi.InitHasInputs (see EncodeV2).
func GroupSizeV2(g *GroupV2, inputs bool) int {
	switch g.Kind {
	case abi.GroupTimers:
		return abi.TimersGroupSize(g.Key, len(g.Timers))
	case abi.GroupInitial:
		return abi.InitialGroupSize(g.Key, g.Initial)
	}
	if inputs {
		return abi.DataGroupInputsSize(g.Key, g.Rows)
	}
	return abi.DataGroupSize(g.Key, g.Rows)
}

// EncodeV2 appends the process buffer of call to dst. With inputs (the module's init had
// abi.InitHasInputs) each row of a DATA group is preceded by its input index from the group's
// Inputs (abi/README.md 9.3a; a nil Inputs writes 0 for every row); without it Inputs is
// ignored.
func EncodeV2(dst []byte, call *CallV2, inputs bool) []byte {
	dst = abi.AppendProcessHeader(dst, abi.ProcessHeader{
		GroupCount:       uint32(len(call.Groups)),
		ProcessingTimeMs: call.ProcessingTimeMs,
		WatermarkMs:      call.WatermarkMs,
	})
	for i := range call.Groups {
		g := &call.Groups[i]
		switch g.Kind {
		case abi.GroupTimers:
			dst = abi.AppendTimersGroup(dst, g.Key, g.Timers)
		case abi.GroupInitial:
			dst = abi.AppendInitialGroup(dst, g.Key, g.Initial)
		default:
			if inputs {
				dst = abi.AppendDataGroupInputs(dst, g.Key, g.Rows, g.Inputs)
			} else {
				dst = abi.AppendDataGroup(dst, g.Key, g.Rows)
			}
		}
	}
	return dst
}

// DecodeV2 reads a v2 result buffer into results, which alias one copy of the buffer per call
// (as Decode does). A *abi.CallError is returned as it is; any other error applies to every
// group of the call (a malformed result).
func DecodeV2(buf []byte, results []ResultV2) error {
	rr, err := abi.NewResultReaderV2(append([]byte(nil), buf...))
	if err != nil {
		return err
	}
	if int(rr.Count()) != len(results) {
		return fmt.Errorf("%w: %d results for %d groups", abi.ErrMalformed, rr.Count(), len(results))
	}
	var d decoder
	var g abi.GroupResultV2
	for i := range results {
		ok, err := rr.Next(&g)
		if err != nil {
			return err
		}
		if !ok {
			return abi.ErrMalformed
		}
		if g.Status != abi.StatusOK {
			msg := string(g.Error)
			if msg == "" {
				msg = "handler reported an error without a message"
			}
			results[i] = ResultV2{Err: &GroupError{Message: msg}}
			continue
		}
		r := ResultV2{}
		if len(g.Ops) > 0 {
			r.Ops = g.Ops
		}
		if g.EmitCount > 0 {
			if d.emits == nil {
				d.emits = make([][]byte, 0, int(g.EmitCount)+len(results)-i-1)
			}
			start := len(d.emits)
			c := g.EmitCursor()
			for e, ok := c.Next(); ok; e, ok = c.Next() {
				d.emits = append(d.emits, e)
			}
			r.Emits = d.emits[start:len(d.emits):len(d.emits)]
		}
		results[i] = r
	}
	if ok, err := rr.Next(&g); ok || err != nil {
		if err == nil {
			err = abi.ErrMalformed
		}
		return err
	}
	return nil
}

// FailAllV2 sets err on every result.
func FailAllV2(results []ResultV2, err error) {
	for i := range results {
		results[i] = ResultV2{Err: err}
	}
}
