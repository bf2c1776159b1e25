package engine

import (
	"fmt"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// InputReport is one input's part of a batch, for a deployment with several inputs
// (BatchReport.Inputs).
type InputReport struct {
	// Name is the input's name in the spec.
	Name string
	// RowsIn counts the batch's rows of the input; LateRows those dropped as late (judged
	// against the deployment's watermark).
	RowsIn, LateRows int
	// WatermarkMs is the input's own watermark after the batch (its largest event time seen
	// minus its watermark delay, never decreasing; 0 until it has rows): what the
	// deployment's watermark is made of (spec watermark_policy).
	WatermarkMs int64
}

// inputRule is how the engine reads the rows of one of the deployment's inputs.
type inputRule struct {
	name      string
	keyField  string
	keyPath   rowjson.Path
	timeField string
	timePath  rowjson.Path // nil: the deployment has no event time
	delayMs   int64
	aheadMs   int64 // event_time.max_ahead; 0: none
	maxAhead  time.Duration
}

// newInputRules returns the rules of sp's inputs, in the spec's order (one, unnamed, for a
// spec without inputs).
func newInputRules(sp *spec.Spec) []inputRule {
	list := sp.InputList()
	rules := make([]inputRule, len(list))
	for i, in := range list {
		r := inputRule{name: in.Name, keyField: in.Key.Field, keyPath: mustPath(in.Key.Field)}
		if et := in.EventTime; et != nil {
			r.timeField, r.timePath = et.Field, mustPath(et.Field)
			r.delayMs = et.WatermarkDelay.Std().Milliseconds()
			r.aheadMs, r.maxAhead = et.MaxAhead.Std().Milliseconds(), et.MaxAhead.Std()
		}
		rules[i] = r
	}
	return rules
}

// multiInput is the engine's state of a deployment with several inputs (nil for one): each
// input's watermark as last committed, by the index of its rule.
type multiInput struct {
	policy spec.WatermarkPolicy
	w      []int64
}

// loadMultiInput reads the committed input watermarks of a deployment with inputs (nil
// without): an input the record does not name (new in this revision) starts at 0.
func loadMultiInput(ks *state.Deployment, sp *spec.Spec, rules []inputRule) (*multiInput, error) {
	if !sp.HasInputs() {
		return nil, nil
	}
	byName, err := ks.InputWatermarks()
	if err != nil {
		return nil, fmt.Errorf("engine: reading the input watermarks: %w", err)
	}
	m := &multiInput{policy: sp.WatermarkPolicy, w: make([]int64, len(rules))}
	for i, r := range rules {
		m.w[i] = max(byName[r.name], 0)
	}
	return m, nil
}

// next returns each input's watermark after a batch whose rows of input i had the largest
// event time maxEvt[i] (timeouts.NoEventTime: none) into next, and the deployment's
// watermark after a batch that ran at w: the policy's (min or max) of the inputs'
// watermarks, never below w (docs/semantics.md, "Several inputs").
func (m *multiInput) next(w int64, rules []inputRule, maxEvt, next []int64) int64 {
	agg := int64(0)
	for i := range m.w {
		next[i] = timeouts.NextWatermark(m.w[i], maxEvt[i], rules[i].delayMs)
		switch {
		case i == 0:
			agg = next[i]
		case m.policy == spec.WatermarkMax:
			agg = max(agg, next[i])
		default:
			agg = min(agg, next[i])
		}
	}
	return max(w, agg, 0)
}

// record writes next, the inputs' watermarks after the batch, into sb when one moved.
func (m *multiInput) record(sb *state.Batch, rules []inputRule, next []int64) {
	changed := false
	for i := range next {
		changed = changed || next[i] != m.w[i]
	}
	if !changed {
		return
	}
	byName := make(map[string]int64, len(rules))
	for i, r := range rules {
		byName[r.name] = next[i]
	}
	sb.SetInputWatermarks(byName)
}

// reportInputs sets the inputs' watermarks of the batch's report, as committed.
func (b *batch) reportInputs() {
	if b.rep.Inputs == nil {
		return
	}
	for i := range b.rep.Inputs {
		b.rep.Inputs[i].WatermarkMs = b.e.multi.w[i]
	}
}
