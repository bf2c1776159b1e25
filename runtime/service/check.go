package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/runner"
)

// check validates rec before anything of a running revision is touched: its spec, and its
// module (loaded and verified by SHA-256, compiled and initialized with the spec's config).
// It has no side effects, so a refused redeploy leaves the running revision alone.
//
// Compiling a module takes seconds (and a hostile one up to the compile timeout), so the
// loop never waits for it: a revision not checked yet is checked on a goroutine of its own
// and check returns errChecking; the goroutine hands the result to the loop (checkDone),
// which keeps it and applies the record again, and check then answers from what it kept.
// A record accepted once is not checked again (the same revision of the record holds the
// same spec and module digest), so that a runtime taking a deployment's partitions one after
// another loads and compiles its module once, not before each. Only the loop calls it.
func (s *Service) check(ctx context.Context, rec registry.Record) (*runner.Revision, error) {
	same := func(r registry.Record) bool {
		return r.Revision == rec.Revision && r.ModuleDigest == rec.ModuleDigest && r.ResetState == rec.ResetState
	}
	if rv := s.checked[rec.Name]; rv != nil && same(rv.Rec) {
		return &runner.Revision{Rec: rec, Spec: rv.Spec, Wasm: rv.Wasm, Initial: rv.Initial}, nil
	}
	if c, ok := s.checks[rec.Name]; ok && same(c.rec) {
		if c.running {
			return nil, errChecking
		}
		if !permanent(c.err) {
			delete(s.checks, rec.Name) // answered once: a retry checks again
		}
		return nil, c.err
	}
	s.checks[rec.Name] = checkResult{rec: rec, running: true}
	go func() {
		rv, err := s.checkRecord(ctx, rec)
		select {
		case s.checkDone <- checkResult{rec: rec, rv: rv, err: err}:
		case <-ctx.Done():
		}
	}()
	return nil, errChecking
}

// errChecking says that a revision's check runs off the loop (see check).
var errChecking = errors.New("service: the revision is being checked")

// checkResult is the outcome of a check run off the loop, or (running) one in progress.
type checkResult struct {
	rec     registry.Record
	rv      *runner.Revision
	err     error
	running bool
}

// checkedOff keeps the result of a check run off the loop, unless a later revision or an
// undeploy superseded it.
func (s *Service) checkedOff(c checkResult) {
	if cur, ok := s.checks[c.rec.Name]; !ok || cur.rec.Revision != c.rec.Revision {
		return // superseded by a later revision, or the deployment is gone
	}
	if c.err == nil {
		delete(s.checks, c.rec.Name)
		for _, rv := range s.checked {
			if rv.Rec.ModuleDigest == c.rv.Rec.ModuleDigest {
				// The same bytes (both verified by their SHA-256): the deployments of one
				// module hold one copy of it, not one each (issue 30).
				c.rv.Wasm = rv.Wasm
				break
			}
		}
		s.checked[c.rec.Name] = c.rv
		return
	}
	s.checks[c.rec.Name] = c
}

// checkRecord is check without the reuse.
func (s *Service) checkRecord(ctx context.Context, rec registry.Record) (*runner.Revision, error) {
	sp, err := api.RunSpecOf(rec)
	if err != nil {
		return nil, err
	}
	if err := sp.ValidateForService(); err != nil {
		return nil, err // a record written by an older client, or by hand
	}
	wasm, err := s.reg.GetModule(ctx, rec.ModuleDigest) // verifies the bytes' SHA-256
	if err != nil {
		return nil, fmt.Errorf("loading module %s: %w", rec.ModuleDigest, err)
	}
	if err := s.rt.ValidateModule(ctx, sp, wasm); err != nil {
		return nil, err
	}
	if sp.HasInputs() {
		named := make([]input.NamedInput, len(sp.Inputs))
		for i, in := range sp.Inputs {
			named[i] = input.NamedInput{Name: in.Name, Subjects: in.Subjects}
		}
		if err := input.CheckInputsStream(ctx, s.js, rec.InputDeployment(), named); err != nil {
			return nil, err
		}
	}
	return runner.NewRevision(rec, sp, wasm), nil
}
