package service

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
)

// ensureStreams ensures the deployment's input stream (the streams of input, named after
// deployment inputOf: see runner.inputOf; none when inputOf is empty, for a shadow, which
// reads its primary's) and its output streams (output, dead-letter, late: output.SinkStreams)
// and its manifests stream, and returns the input stream's name. It changes no stream that
// is not the deployment's (natsio.ErrForeignStream).
func (s *Service) ensureStreams(ctx context.Context, sp *spec.Spec, inputOf string) (string, error) {
	var inStream string
	var err error
	switch {
	case inputOf == "":
	case sp.HasInputs():
		inStream, err = s.ensureInputs(ctx, sp, inputOf)
	default:
		inStream, err = natsio.EnsureStream(ctx, s.js, input.StreamOptions(sp, inputOf, s.cfg.Replicas))
	}
	if err != nil {
		return "", fmt.Errorf("input stream: %w", err)
	}
	// Outputs are never stored in the input stream (the spec refuses subjects that the input
	// subjects match, but a named or adopted input stream may capture more than they do).
	for _, o := range output.SinkStreams(sp, s.cfg.Replicas) {
		o.Options.Avoid = inStream
		if _, err := natsio.EnsureStream(ctx, s.js, o.Options); err != nil {
			return "", fmt.Errorf("%s stream: %w", o.What, err)
		}
	}
	if _, err := changelog.EnsureManifestsStream(ctx, s.js, sp.Name, s.cfg.Replicas, inputsMaxAge(sp)); err != nil {
		return "", fmt.Errorf("manifests stream: %w", err)
	}
	return inStream, nil
}

// inputsMaxAge is how long the longest-kept of sp's input streams that groupstate sets keeps
// rows: what the streams that only make sense beside them (the inputs stream, the manifests)
// keep.
func inputsMaxAge(sp *spec.Spec) time.Duration {
	var maxAge time.Duration
	for _, in := range sp.InputList() {
		maxAge = max(maxAge, cmp.Or(in.MaxAge.Std(), spec.DefaultStreamMaxAge))
	}
	return maxAge
}

// ensureInputs ensures the streams of a deployment with several inputs, named after
// deployment inputOf (see runner.inputOf): each input's (its named stream, the stream that
// already captures its subjects, or GS_<INPUT>_IN_<NAME>), and the inputs stream that
// sources them all, whose name it returns (input.EnsureInputsStream). The inputs stream
// keeps rows as long as the longest-kept input stream groupstate sets.
func (s *Service) ensureInputs(ctx context.Context, sp *spec.Spec, inputOf string) (string, error) {
	named := make([]input.NamedInput, len(sp.Inputs))
	for i, in := range sp.Inputs {
		st, err := natsio.EnsureStream(ctx, s.js, input.NamedStreamOptions(in, inputOf, s.cfg.Replicas))
		if err != nil {
			return "", fmt.Errorf("input %s: %w", in.Name, err)
		}
		named[i] = input.NamedInput{Name: in.Name, Stream: st, Subjects: in.Subjects}
	}
	maxAge := inputsMaxAge(sp)
	if err := input.EnsureInputsStream(ctx, s.js, inputOf, named, s.cfg.Replicas, maxAge); err != nil {
		return "", err
	}
	return topology.InputsStream(inputOf), nil
}

// streamsEnsured returns the input stream of the revision named key (see registry.Record.RevisionKey), and
// whether a runner here ensured its streams already.
func (s *Service) streamsEnsured(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inStream, ok := s.ensured[key]
	return inStream, ok
}

// ensuredStreams notes that the streams of the revision named key are ensured, its input
// stream inStream.
func (s *Service) ensuredStreams(key, inStream string) {
	s.mu.Lock()
	s.ensured[key] = inStream
	s.mu.Unlock()
}

// forgetStreams makes the next open of rec's revision ensure its streams again.
func (s *Service) forgetStreams(rec registry.Record) {
	s.mu.Lock()
	delete(s.ensured, rec.RevisionKey())
	s.mu.Unlock()
}

// newRouter opens the router of a deployment split into partitions: it reads the input
// stream and republishes each row to its partition's subject (see input.Router) in the
// partitioned stream of deployment inputOf (runner.inputOf).
func (s *Service) newRouter(ctx context.Context, sp *spec.Spec, inputOf string) (*input.Router, error) {
	inStream, err := s.ensureStreams(ctx, sp, inputOf)
	if err != nil {
		return nil, err
	}
	key, err := rowjson.ParsePath(sp.Key.Field)
	if err != nil {
		return nil, err
	}
	return input.NewRouter(ctx, s.js, input.RouterOptions{Deployment: inputOf, InputStream: inStream, InputSubjects: sp.Input.Subjects,
		Key: key, Partitions: sp.Partitions, MaxRows: sp.Trigger.MaxRows, MaxBytes: int(sp.Trigger.MaxBytes), Wait: sp.Trigger.Interval.Std(),
		Logger: s.logger.With("deployment", sp.Name, "component", "router")})
}
