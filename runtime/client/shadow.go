package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// Errors of shadow deployments.
var (
	// ErrShadow is returned by [Client.Deploy] with [AsShadowOf], and by [Client.Promote], when
	// the deployments are not in a state that allows it; the message says why.
	ErrShadow = errors.New("client: shadow")
	// ErrShadowHistory is returned by [Client.Deploy] with [AsShadowOf] when the primary's
	// oldest recorded batch ran on state made by batches no longer recorded: a shadow starts
	// from empty state and runs the primary's batches from its first one.
	ErrShadowHistory = errors.New("client: the primary's history no longer starts from empty state")
)

// AsShadowOf makes the deploy a shadow of deployment primary (deploy --shadow): the new
// deployment runs primary's recorded batches again, live and row for row (same rows, same
// processing time and watermark), from primary's first recorded batch, with its own module,
// state and consumer, and publishes on its spec's subjects, those that are primary's made
// shadow ones (spec.Spec.AsShadowOf: "<subject>.shadow"). Nothing of primary is touched.
// Compare their outputs with groupstate diff (replay.Diff) and make the shadow the primary
// with [Client.Promote]. The spec must be allowed to shadow primary's
// (spec.Spec.CheckShadowOf); [ResetState] and [WithInitialState] are refused with it (the
// shadow starts from primary's initial state, if primary has one).
func AsShadowOf(primary string) DeployOption {
	return func(o *deployOptions) { o.shadowOf = primary }
}

// shadowRecord makes rec, the record of a deploy of sp with [AsShadowOf], a shadow's, after
// checking that sp can shadow the primary (prev, getErr: what the registry holds of sp's
// name).
func (c *Client) shadowRecord(ctx context.Context, rec *registry.Record, sp *spec.Spec, o deployOptions, prev registry.Record, getErr error) error {
	if o.resetState || o.initial != nil {
		return fmt.Errorf("%w: a shadow's state is made by its primary's history: --reset-state and --initial-state do not apply", ErrShadow)
	}
	prec, err := c.reg.Get(ctx, o.shadowOf)
	if errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("%w: %q (the primary of the shadow)", ErrNotDeployed, o.shadowOf)
	}
	if err != nil {
		return err
	}
	if prec.ShadowOf != "" {
		return fmt.Errorf("%w: %s is itself a shadow (of %s); shadow a primary", ErrShadow, o.shadowOf, prec.ShadowOf)
	}
	psp, err := api.SpecOf(prec)
	if err != nil {
		return err
	}
	if err := sp.CheckShadowOf(psp); err != nil {
		return err
	}
	switch {
	case getErr == nil && prev.ShadowOf != o.shadowOf:
		return fmt.Errorf("%w: %s is deployed and is not a shadow of %s: a shadow starts from its primary's history; deploy it under a new name", ErrShadow, sp.Name, o.shadowOf)
	case getErr == nil && prev.Promoting:
		return fmt.Errorf("%w: %s is being promoted", ErrShadow, sp.Name)
	case getErr != nil && !errors.Is(getErr, registry.ErrNotFound):
		return fmt.Errorf("client: reading the deployment: %w", getErr)
	}
	if err := c.checkShadowHistory(ctx, o.shadowOf, max(psp.Partitions, 1)); err != nil {
		return err
	}
	run := sp.AsShadowOf(psp)
	if err := run.ValidateForService(); err != nil {
		return err
	}
	if rec.ShadowSpec, err = json.Marshal(run); err != nil {
		return err
	}
	rec.ShadowOf = o.shadowOf
	rec.InputOf = cmp.Or(prec.InputOf, prec.Name)
	rec.PrimaryHandovers = prec.Handovers
	// The primary's history starts from its initial state: the shadow's does too.
	rec.InitialState, rec.InitialStateSize = prec.InitialState, prec.InitialStateSize
	return nil
}

// checkInputOfFree refuses a new deployment named name while another deployment reads, or
// once promoted will read, that name's input-side streams (registry.Record.InputOf): the two
// would share them, and the partitioned stream's router with them. A shadow of name itself
// (its primary undeployed) does not count: deploying the primary again is how it goes on.
func (c *Client) checkInputOfFree(ctx context.Context, name string) error {
	recs, err := c.reg.List(ctx)
	if err != nil {
		return fmt.Errorf("client: listing the deployments: %w", err)
	}
	for _, r := range recs {
		if r.InputOf == name && r.Name != name && r.ShadowOf != name {
			return fmt.Errorf("%w: %s reads the input streams named after %s (a promoted shadow, or a shadow of one), which a new %s would share; deploy under another name", ErrShadow, r.Name, name, name)
		}
	}
	return nil
}

// checkShadowHistory checks that the recorded history of each of primary's parts
// partitions starts from empty state.
func (c *Client) checkShadowHistory(ctx context.Context, primary string, parts int) error {
	name := topology.ManifestsStream(primary)
	st, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w: %s records no batch manifests (no stream %s): it has not started yet, or runs on a runtime older than shadows (restart that runtime with this version); deploy the shadow once %s runs", ErrShadow, primary, name, primary)
	}
	if err != nil {
		return err
	}
	first := st.CachedInfo().State.FirstSeq
	if st.CachedInfo().State.Msgs == 0 {
		return nil // no batch yet: the shadow follows from the first
	}
	for p := range parts {
		raw, err := st.GetMsg(ctx, first, jetstream.WithGetMsgSubject(topology.ManifestSubject(primary, p)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // no batch of the partition yet
		}
		if err != nil {
			return fmt.Errorf("client: reading %s's oldest batch manifest of partition %d: %w", primary, p, err)
		}
		var m engine.Manifest
		if err := json.Unmarshal(raw.Data, &m); err != nil {
			return fmt.Errorf("client: %s's oldest batch manifest (sequence %d): %w", primary, raw.Sequence, err)
		}
		if m.HadState {
			return fmt.Errorf("%w: %s's oldest recorded batch of partition %d (%d, at %s) ran on state made by batches its manifests stream %s no longer keeps",
				ErrShadowHistory, primary, p, m.Batch, time.UnixMilli(m.ProcessingTimeMs).UTC().Format(time.RFC3339), name)
		}
	}
	return nil
}

// Promote makes the shadow deployment name its primary's successor: it undeploys the
// primary, waits until the primary's runtime stopped it, asks the shadow's runtime to run
// every batch the primary recorded and then to read the input itself from the primary's
// position on, with the shadow's state kept, and publish on its spec's own subjects (the
// primary's, unless the spec named others); and waits until it does. Outputs of the
// primary's batch in flight at the undeploy, which the primary never committed, come from
// the promoted deployment. It returns when the shadow runs as a primary, or when ctx ends
// (the promotion then goes on without the caller). The promoted deployment keeps its name, and
// reads the primary's input-side streams ([Deployment].InputOf). With partitions, every
// partition of the shadow takes over its primary partition's position before the record
// changes (see [Status].Promoted).
func (c *Client) Promote(ctx context.Context, name string) error {
	if err := c.mayChange(ctx, "promote "+name, name); err != nil {
		return err
	}
	rec, err := c.reg.Get(ctx, name)
	if errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotDeployed, name)
	}
	if err != nil {
		return err
	}
	if rec.ShadowOf == "" {
		return fmt.Errorf("%w: %s is not a shadow", ErrShadow, name)
	}
	primary := rec.ShadowOf
	sp, err := api.SpecOf(rec)
	if err != nil {
		return err
	}
	parts := max(sp.Partitions, 1) // the primary's too (spec.Spec.CheckShadowOf)
	if !rec.Promoting {
		if err := c.stopPrimary(ctx, primary, parts); err != nil {
			return err
		}
		rec.Promoting = true
		if _, err := c.reg.Update(ctx, rec); err != nil {
			return fmt.Errorf("client: asking %s's runtime to promote it: %w", name, err)
		}
	}
	for {
		rec, err := c.reg.Get(ctx, name)
		if err != nil {
			return fmt.Errorf("client: waiting for %s's promotion: %w", name, err)
		}
		if rec.ShadowOf == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("client: waiting for %s's runtime to promote it (it goes on): %w", name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stopPrimary undeploys primary, of parts partitions (when it still is), and waits until its
// runtimes stopped it: the status of each partition no longer says running, or its owner
// does not answer.
func (c *Client) stopPrimary(ctx context.Context, primary string, parts int) error {
	owner, err := c.reg.Owner(ctx, primary) // of a deployment that is not replicated
	if err != nil {
		return err
	}
	if err := c.Undeploy(ctx, primary); err != nil && !errors.Is(err, ErrNotDeployed) {
		return fmt.Errorf("client: undeploying the primary %s: %w", primary, err)
	}
	for {
		stopped := true
		for p := range parts {
			unit := primary
			if parts > 1 {
				unit = state.PartitionName(primary, p)
			}
			st, err := c.unitStatus(ctx, unit)
			if err != nil || !Runs(st.State) {
				continue // no status (it never ran), or stopped
			}
			if o := cmp.Or(st.Owner, owner); o != "" {
				if up, perr := api.Ping(ctx, c.nc, o); perr == nil && !up {
					continue
				}
			}
			stopped = false
		}
		if stopped {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("client: waiting for the primary %s to stop: %w", primary, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
