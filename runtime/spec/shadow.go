package spec

import (
	"errors"
	"fmt"
	"slices"
)

// ShadowSuffix is what a shadow deployment's output, late and dead-letter subjects get
// appended when they are its primary's (see [Spec.AsShadowOf]).
const ShadowSuffix = ".shadow"

// ErrShadow is returned by [Spec.CheckShadowOf] for a spec that cannot shadow its primary.
var ErrShadow = errors.New("spec: cannot shadow")

// AsShadowOf returns the spec that s runs with while it shadows primary (deploy --shadow):
// a copy of s whose output, dead-letter and late subjects that are primary's have
// [ShadowSuffix] appended, and whose streams that are primary's are left for the runtime to
// choose (the stream that captures the new subject, or GS_<NAME>_OUT and the like), so that
// nothing the shadow publishes reaches what the primary's consumers read. Subjects s names
// for itself are kept. s is not changed.
func (s *Spec) AsShadowOf(primary *Spec) *Spec {
	c := *s
	c.Output.Subject, c.Output.Stream = shadowSink(s.Output.Subject, s.Output.Stream, primary.Output.Subject, primary.Output.Stream)
	c.DeadLetter.Subject, c.DeadLetter.Stream = shadowSink(s.DeadLetter.Subject, s.DeadLetter.Stream, primary.DeadLetter.Subject, primary.DeadLetter.Stream)
	c.Late.Subject, c.Late.Stream = shadowSink(s.Late.Subject, s.Late.Stream, primary.Late.Subject, primary.Late.Stream)
	return &c
}

// shadowSink is the subject and stream of a shadow's sink (subject, stream), next to its
// primary's sink (pSubject, pStream).
func shadowSink(subject, stream, pSubject, pStream string) (string, string) {
	if subject == "" {
		return "", ""
	}
	if subject == pSubject {
		subject += ShadowSuffix
	}
	if stream != "" && stream == pStream {
		stream = ""
	}
	return subject, stream
}

// CheckShadowOf tells whether s can shadow primary (deploy --shadow). A shadow runs
// primary's batches again, row for row and partition by partition, so it must read the same
// input as primary (see [Spec.CheckReplayOf]); its module, config, key with one partition,
// timeout mode, replication and outputs may differ, and its name must. Otherwise it returns
// [ErrShadow] and the reason.
func (s *Spec) CheckShadowOf(primary *Spec) error {
	if s.Name == primary.Name {
		return fmt.Errorf("%w: the shadow needs a name of its own (it is %s, like its primary); name it in its spec, for example %s-v2", ErrShadow, s.Name, s.Name)
	}
	if why := s.sameInput(primary); why != "" {
		return fmt.Errorf("%w: %s", ErrShadow, why)
	}
	return nil
}

// ErrReplaySpec is returned by [Spec.CheckReplayOf] for a spec that cannot run a
// deployment's recorded batches.
var ErrReplaySpec = errors.New("spec: cannot replay with this spec")

// CheckReplayOf tells whether s can run the batches deployment's recorded (groupstate
// replay --spec): s reads the same input (the same subjects; with several inputs, the same
// inputs by name and subjects) and has as many partitions, split by the same key (field and
// subject token). Its name, module, config, timeouts, event time and outputs may differ.
// Otherwise it returns [ErrReplaySpec] and the reason.
func (s *Spec) CheckReplayOf(deployment *Spec) error {
	if why := s.sameInput(deployment); why != "" {
		return fmt.Errorf("%w: %s", ErrReplaySpec, why)
	}
	return nil
}

// sameInput is why s cannot run of's batches again (see CheckReplayOf), empty when it can.
// A stream s names must be of's named stream: s reads, and a promoted shadow goes on
// reading, the streams of has.
func (s *Spec) sameInput(of *Spec) string {
	sorted := func(subjects []string) []string { return slices.Sorted(slices.Values(subjects)) }
	switch {
	case max(s.Partitions, 1) != max(of.Partitions, 1):
		return fmt.Sprintf("%s has partitions %d and %s %d: running %s's batches again, partition by partition, needs as many", s.Name, max(s.Partitions, 1), of.Name, max(of.Partitions, 1), of.Name)
	case s.Partitions > 1 && s.Key != of.Key:
		return fmt.Sprintf("%s's key is %+v and %s's %+v: with partitions, running %s's batches again needs its keys split like %s's, by the same key", s.Name, s.Key, of.Name, of.Key, of.Name, of.Name)
	case s.HasInputs() != of.HasInputs():
		return fmt.Sprintf("one of %s and %s has several inputs and the other one input: running %s's batches again needs the same inputs", s.Name, of.Name, of.Name)
	case s.HasInputs():
		if len(s.Inputs) != len(of.Inputs) {
			return fmt.Sprintf("%s has %d inputs and %s %d: running %s's batches again needs the same inputs", s.Name, len(s.Inputs), of.Name, len(of.Inputs), of.Name)
		}
		for _, in := range s.Inputs {
			i := slices.IndexFunc(of.Inputs, func(o NamedInput) bool { return o.Name == in.Name })
			if i < 0 || !slices.Equal(sorted(in.Subjects), sorted(of.Inputs[i].Subjects)) ||
				(in.Stream != "" && in.Stream != of.Inputs[i].Stream) {
				return fmt.Sprintf("%s's input %s (%q, stream %q) is not an input of %s with the same subjects and stream: running %s's batches again needs the same inputs", s.Name, in.Name, in.Subjects, in.Stream, of.Name, of.Name)
			}
		}
	case !slices.Equal(sorted(s.Input.Subjects), sorted(of.Input.Subjects)) ||
		(s.Input.Stream != "" && s.Input.Stream != of.Input.Stream):
		return fmt.Sprintf("%s reads %q (stream %q), %s %q (stream %q): running %s's batches again needs the same input",
			s.Name, s.Input.Subjects, s.Input.Stream, of.Name, of.Input.Subjects, of.Input.Stream, of.Name)
	}
	return ""
}
