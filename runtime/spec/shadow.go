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
// input (the same subjects; with several inputs, the same inputs by name) and have as many
// partitions, split by the same key (field and subject token); its module, config, key
// with one partition, timeout mode, replication and outputs may differ, and its name must.
// Otherwise it returns [ErrShadow] and the reason.
func (s *Spec) CheckShadowOf(primary *Spec) error {
	sorted := func(subjects []string) []string { return slices.Sorted(slices.Values(subjects)) }
	switch {
	case s.Name == primary.Name:
		return fmt.Errorf("%w: the shadow needs a name of its own (it is %s, like its primary); name it in its spec, for example %s-v2", ErrShadow, s.Name, s.Name)
	case max(s.Partitions, 1) != max(primary.Partitions, 1):
		return fmt.Errorf("%w: %s has partitions %d and its primary %s %d: a shadow runs each of its primary's partitions' batches, so it has as many", ErrShadow, s.Name, max(s.Partitions, 1), primary.Name, max(primary.Partitions, 1))
	case s.Partitions > 1 && s.Key != primary.Key:
		return fmt.Errorf("%w: %s's key is %+v and its primary %s's %+v: with partitions, a shadow's keys are split like its primary's, so its key is the same", ErrShadow, s.Name, s.Key, primary.Name, primary.Key)
	case s.HasInputs() != primary.HasInputs():
		return fmt.Errorf("%w: one of %s and its primary %s has several inputs and the other one input: a shadow runs its primary's batches again, so it reads the same inputs", ErrShadow, s.Name, primary.Name)
	case s.HasInputs():
		if len(s.Inputs) != len(primary.Inputs) {
			return fmt.Errorf("%w: %s has %d inputs and its primary %s %d: a shadow reads the same inputs", ErrShadow, s.Name, len(s.Inputs), primary.Name, len(primary.Inputs))
		}
		for _, in := range s.Inputs {
			i := slices.IndexFunc(primary.Inputs, func(p NamedInput) bool { return p.Name == in.Name })
			if i < 0 || !slices.Equal(sorted(in.Subjects), sorted(primary.Inputs[i].Subjects)) {
				return fmt.Errorf("%w: %s's input %s (%q) is not an input of its primary %s with the same subjects: a shadow reads the same inputs", ErrShadow, s.Name, in.Name, in.Subjects, primary.Name)
			}
		}
	case !slices.Equal(sorted(s.Input.Subjects), sorted(primary.Input.Subjects)) ||
		(s.Input.Stream != "" && primary.Input.Stream != "" && s.Input.Stream != primary.Input.Stream):
		return fmt.Errorf("%w: %s reads %q (stream %q), its primary %s %q (stream %q): a shadow runs its primary's batches again, so it reads the same input", ErrShadow,
			s.Name, s.Input.Subjects, s.Input.Stream, primary.Name, primary.Input.Subjects, primary.Input.Stream)
	}
	return nil
}
