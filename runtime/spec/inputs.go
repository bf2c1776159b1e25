package spec

import (
	"fmt"
	"regexp"

	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/internal/subject"
)

// NamedInput is one input of a deployment with several ([Spec.Inputs]): its subjects and
// stream, the key field of its rows and, optionally, their event time. Rows of every input
// are grouped by key into one micro-batch, and an ABI v2 handler sees each row's input name
// (docs/semantics.md, "Several inputs").
type NamedInput struct {
	// Name names the input: 1 to 32 characters of [a-z0-9_-], starting with a letter,
	// unique in the spec. Handlers, status and metrics know the input by it.
	Name string `yaml:"name" json:"name"`
	// InputSpec holds the input's subjects, stream and max_age, as input: does for a
	// deployment with one input. Inputs may share a stream; their subjects must not overlap.
	InputSpec `yaml:",inline"`
	// Key names the input's key field (key.subject_token is not supported with inputs).
	Key KeySpec `yaml:"key" json:"key"`
	// EventTime names the input's event-time field and its watermark delay: set on every
	// input or on none (max_ahead applies per input; idle does not apply).
	EventTime *EventTimeSpec `yaml:"event_time,omitempty" json:"event_time,omitempty"`
}

// WatermarkPolicy is how a deployment with several inputs makes its watermark of theirs
// (Spark's spark.sql.streaming.multipleWatermarkPolicy).
type WatermarkPolicy string

// The values of [Spec.WatermarkPolicy].
const (
	// WatermarkMin (the default) takes the smallest input watermark: a row is late only
	// when it is late for the slowest input, so no input loses rows to a faster one; an
	// input without rows yet holds the watermark at 0.
	WatermarkMin WatermarkPolicy = "min"
	// WatermarkMax takes the largest: state is let go as soon as the fastest input allows,
	// and rows of slower inputs behind it are late.
	WatermarkMax WatermarkPolicy = "max"
)

// MaxInputs is the most inputs a deployment may have.
const MaxInputs = 16

var inputNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// InputList returns the deployment's inputs: Inputs, or, for a spec with one input: (input,
// key and event_time), that input with an empty name. The result shares nothing the caller
// may not read; it must not be modified.
func (s *Spec) InputList() []NamedInput {
	if len(s.Inputs) > 0 {
		return s.Inputs
	}
	return []NamedInput{{InputSpec: s.Input, Key: s.Key, EventTime: s.EventTime}}
}

// HasInputs reports whether the spec names several inputs (inputs:), even just one.
func (s *Spec) HasInputs() bool { return len(s.Inputs) > 0 }

// HasEventTime reports whether the deployment has event time, so a watermark: event_time
// is set (on every input, for a spec with inputs).
func (s *Spec) HasEventTime() bool {
	if len(s.Inputs) > 0 {
		return s.Inputs[0].EventTime != nil
	}
	return s.EventTime != nil
}

// validatePolicy adds the problem of watermark_policy (which may be left unset).
func (s *Spec) validatePolicy(add func(format string, args ...any)) {
	switch s.WatermarkPolicy {
	case "", WatermarkMin, WatermarkMax:
	default:
		add("watermark_policy %q must be %q or %q", s.WatermarkPolicy, WatermarkMin, WatermarkMax)
	}
}

// validateInputs adds the problems of a spec with inputs.
func (s *Spec) validateInputs(add func(format string, args ...any)) {
	if len(s.Input.Subjects) > 0 || s.Input.Stream != "" || s.Input.MaxAge != 0 || s.Key != (KeySpec{}) || s.EventTime != nil {
		add("inputs replaces input, key and event_time: give each input its subjects, key and event_time")
	}
	if len(s.Inputs) > MaxInputs {
		add("inputs: %d inputs, at most %d", len(s.Inputs), MaxInputs)
	}
	if s.Partitions > 1 {
		add("inputs with partitions above 1 are not supported yet: deploy a join with one partition")
	}
	seen := map[string]bool{}
	withTime := 0
	for i, in := range s.Inputs {
		field := fmt.Sprintf("inputs[%d]", i)
		switch {
		case !inputNameRE.MatchString(in.Name):
			add("%s.name %q must be 1 to 32 characters of [a-z0-9_-], starting with a letter", field, in.Name)
		case seen[in.Name]:
			add("%s.name %q is the name of an earlier input", field, in.Name)
		default:
			field = fmt.Sprintf("inputs[%s]", in.Name)
		}
		seen[in.Name] = true
		validateKey(field+".key", in.Key, add)
		if in.Key.SubjectToken != 0 {
			add("%s.key.subject_token is not supported with inputs", field)
		}
		validateEventTime(field+".event_time", in.EventTime, add)
		if in.EventTime != nil {
			withTime++
			if in.EventTime.Idle != 0 {
				add("%s.event_time.idle applies to partitions, which inputs do not support", field)
			}
		}
		for _, sub := range in.Subjects {
			if err := subject.CheckPattern(sub); err != nil {
				add("%s.subjects: %q is not a valid subject: it %v", field, sub, err)
				continue
			}
			refuseReserved(field+".subjects", sub, add)
			for _, o := range s.Inputs[:i] {
				for _, osub := range o.Subjects {
					if subject.CheckPattern(osub) == nil && subject.Overlap(sub, osub) {
						add("%s.subjects: %q overlaps %q of input %q: a row must belong to one input", field, sub, osub, o.Name)
					}
				}
			}
		}
		if a := in.MaxAge; a < 0 || (a > 0 && a.Std() < DuplicateWindow) {
			add("%s.max_age must be at least %s (or unset)", field, DuplicateWindow)
		}
	}
	if withTime != 0 && withTime != len(s.Inputs) {
		add("inputs: event_time is set on %d of %d inputs: set it on every input (each has a watermark) or on none", withTime, len(s.Inputs))
	}
}

// validateKey adds the problems of a key spec at field.
func validateKey(field string, k KeySpec, add func(format string, args ...any)) {
	if k.Field == "" {
		add("%s.field is required", field)
	} else if _, err := rowjson.ParsePath(k.Field); err != nil {
		add("%s.field %q is not a valid field path", field, k.Field)
	}
}

// validateEventTime adds the problems of an event-time spec (nil: none) at field.
func validateEventTime(field string, et *EventTimeSpec, add func(format string, args ...any)) {
	if et == nil {
		return
	}
	if et.Field == "" {
		add("%s.field is required when %s is set", field, field)
	} else if _, err := rowjson.ParsePath(et.Field); err != nil {
		add("%s.field %q is not a valid field path", field, et.Field)
	}
	if et.WatermarkDelay < 0 {
		add("%s.watermark_delay must not be negative", field)
	}
	if et.MaxAhead < 0 {
		add("%s.max_ahead must not be negative", field)
	}
}
