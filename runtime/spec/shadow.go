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
// primary's batches again, row for row, so it must read the same input; its module, config,
// key, timeout mode and outputs may differ, and its name must. This version shadows
// deployments of one partition with one input and no replication; others are refused with
// [ErrShadow] and the reason.
func (s *Spec) CheckShadowOf(primary *Spec) error {
	switch {
	case s.Name == primary.Name:
		return fmt.Errorf("%w: the shadow needs a name of its own (it is %s, like its primary); name it in its spec, for example %s-v2", ErrShadow, s.Name, s.Name)
	case primary.Partitions > 1 || s.Partitions > 1:
		return fmt.Errorf("%w: %s has partitions %d and %s %d; shadows of deployments with partitions are not supported yet", ErrShadow, primary.Name, primary.Partitions, s.Name, s.Partitions)
	case primary.Replication == ReplicationChangelog || s.Replication == ReplicationChangelog:
		return fmt.Errorf("%w: shadows of replicated deployments (replication: %q, %q) are not supported yet", ErrShadow, primary.Replication, s.Replication)
	case primary.HasInputs() || s.HasInputs():
		return fmt.Errorf("%w: shadows of deployments with several inputs are not supported yet", ErrShadow)
	case !slices.Equal(slices.Sorted(slices.Values(s.Input.Subjects)), slices.Sorted(slices.Values(primary.Input.Subjects))) ||
		(s.Input.Stream != "" && primary.Input.Stream != "" && s.Input.Stream != primary.Input.Stream):
		return fmt.Errorf("%w: %s reads %q (stream %q), its primary %s %q (stream %q): a shadow runs its primary's batches again, so it reads the same input", ErrShadow,
			s.Name, s.Input.Subjects, s.Input.Stream, primary.Name, primary.Input.Subjects, primary.Input.Stream)
	}
	return nil
}
