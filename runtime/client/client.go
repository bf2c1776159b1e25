// Package client manages groupstate deployments over NATS and asks the runtimes that run
// them about their state: deploy, undeploy, list, status, and a key's state. It is what the
// CLI's client commands use; it needs only a NATS connection (the runtimes run package
// service).
package client

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// Errors of the client.
var (
	// ErrNotDeployed: no deployment has that name.
	ErrNotDeployed = errors.New("client: no such deployment")
	// ErrFixedAtFirstDeploy: a redeploy changes partitions or replication, which are fixed
	// at the first deploy (unless the deploy resets the state).
	ErrFixedAtFirstDeploy = errors.New("client: fixed at the first deploy")
	// ErrInitialStateRedeploy is returned by [Client.Deploy] for [WithInitialState] of a
	// deployment that exists: an initial state starts a new deployment only.
	ErrInitialStateRedeploy = errors.New("client: an initial state is for a new deployment")
	// ErrResetPartitioned is returned by [Client.Deploy] for [ResetState] of a deployment
	// with partitions, which this version cannot reset.
	ErrResetPartitioned = errors.New("client: reset of a partitioned deployment")
	// ErrNoRuntime: no runtime answered (is groupstate serve running?).
	ErrNoRuntime = errors.New("client: no runtime answered; is groupstate serve running?")
)

// Client manages deployments in NATS and asks running runtimes about them. It is safe for
// concurrent use.
type Client struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	reg *registry.Registry

	leasesOnce sync.Once
	leaseKV    *cluster.Leases
	leaseErr   error

	rt *engine.Runtime // compiles modules to validate them before a deploy

	perms permissions // the connection's user's, asked once (see may)
}

// ceilings are the ceilings a deployment is checked against: the lowest of the live runtimes'
// (each publishes its own in its membership), the defaults when none is live.
func (c *Client) ceilings(ctx context.Context) (engine.Ceilings, error) {
	members, err := cluster.ReadMembers(ctx, c.js)
	if err != nil {
		return engine.Ceilings{}, fmt.Errorf("client: reading the runtimes' ceilings: %w", err)
	}
	var ceil engine.Ceilings
	found := false
	for _, m := range members {
		var mc engine.Ceilings
		if len(m.Ceilings) == 0 || json.Unmarshal(m.Ceilings, &mc) != nil {
			continue
		}
		if !found {
			ceil, found = mc, true
			continue
		}
		ceil = ceil.Min(mc)
	}
	return ceil, nil
}

// Option is an option of New.
type Option func(*options)

// options are New's options.
type options struct {
	cacheDir string
}

// WithCacheDir keeps the modules the client compiles to validate a deploy in dir (as
// engine.Options.CacheDir): a later client, in this process or another, deploying the same
// module loads its compiled code instead of compiling it again. Default: "", compiled code
// is kept in memory, for this client only.
func WithCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// New opens the deployment registry over nc (creating its buckets if missing).
func New(ctx context.Context, nc *nats.Conn, opts ...Option) (*Client, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	c := &Client{nc: nc, js: js}
	if err := c.mayRead(ctx, "read the deployments"); err != nil {
		return nil, err
	}
	reg, err := registry.OpenRegistry(ctx, js, 0)
	if err != nil {
		return nil, fmt.Errorf("client: opening the deployment registry: %w", err)
	}
	rt, err := engine.New(engine.Options{CacheDir: o.cacheDir})
	if err != nil && o.cacheDir != "" {
		rt, err = engine.New(engine.Options{}) // an unusable cache costs only time
	}
	if err != nil {
		return nil, err
	}
	c.reg, c.rt = reg, rt
	return c, nil
}

// JetStream returns the client's JetStream context on its connection (to read the streams a
// deployment keeps, as replay and diff do). It is the client's: do not change its options.
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// Close releases the client's resources (not the connection).
func (c *Client) Close(ctx context.Context) error { return c.rt.Close(ctx) }

// Deployment is a deployed spec and module.
type Deployment struct {
	Name         string     `json:"name"`
	Spec         *spec.Spec `json:"spec"`
	ModuleDigest string     `json:"module_digest"`
	ModuleSize   int64      `json:"module_size"`
	DeployedAt   time.Time  `json:"deployed_at"`
	Revision     uint64     `json:"revision"`
	// ResetState tells that the deployment was deployed with [ResetState] and its runtime has
	// not done the reset yet.
	ResetState bool `json:"reset_state,omitempty"`
	// ShadowOf, for a shadow deployment ([AsShadowOf]), names its primary; Spec is then the
	// spec as deployed, and [Deployment.RunSpec] the one it runs with. Promoting tells that
	// [Client.Promote] asked to make it the primary and its runtime has not yet.
	ShadowOf  string `json:"shadow_of,omitempty"`
	Promoting bool   `json:"promoting,omitempty"`
	// InputOf names the deployment whose input-side streams (the partitioned stream, the
	// inputs stream) this one reads, when not its own: a shadow's primary's, kept once the
	// shadow is promoted (replay.Options.InputOf takes it). Empty: its own.
	InputOf string `json:"input_of,omitempty"`
	// InitialState is the hex SHA-256 of the initial-state file the deployment started from
	// (deploy --initial-state; a shadow's is its primary's), empty when none; read it with
	// [Client.InitialState].
	InitialState string `json:"initial_state,omitempty"`
	// Invalid, when not empty, says why no runtime runs this record: it does not decode, its
	// key, name and spec name disagree, or its spec is not valid. Only Name (the record's
	// key), Revision and Invalid are then set. Deploy the deployment again, or undeploy it.
	Invalid string `json:"invalid,omitempty"`
	// runSpec is what RunSpec returns (nil: Spec).
	runSpec *spec.Spec
}

// RunSpec is the spec the deployment runs with: Spec, or for a shadow, Spec with its
// primary's subjects made shadow ones (spec.Spec.AsShadowOf), as stored at its deploy.
func (d *Deployment) RunSpec() *spec.Spec {
	if d.runSpec != nil {
		return d.runSpec
	}
	return d.Spec
}

// DeployOption changes what [Client.Deploy] does.
type DeployOption func(*deployOptions)

type deployOptions struct {
	resetState bool
	initial    []byte // WithInitialState's file; nil: none
	shadowOf   string // AsShadowOf's primary; empty: not a shadow
}

// WithInitialState gives a new deployment its initial state: data is an initial-state file
// (JSON Lines of {"key": K, "state": V}, see [engine.ParseInitialState]), validated here and
// stored with the deployment; each partition applies its keys in its first batch
// (docs/semantics.md, "transformWithState handlers", rule 8). A deployment that exists is
// refused with [ErrInitialStateRedeploy]: its state is what it committed, and a redeploy
// keeps it. data is not kept after Deploy returns.
func WithInitialState(data []byte) DeployOption {
	return func(o *deployOptions) { o.initial = data }
}

// ResetState makes the deploy empty the deployment's state: the runtime that runs it (or,
// when its owner is gone, a runtime that is up) drops every key, timeout and output not yet
// delivered, and goes on from empty state at the input consumer's position (the rows after
// the last acknowledged one). Batch ids go on, so new outputs never reuse old message ids.
// The reset happens once, when the runtime takes the deploy; it cannot be undone.
//
// It is the way out of [StatusOrphaned]: a deployment whose owner lost its data directory.
func ResetState() DeployOption { return func(o *deployOptions) { o.resetState = true } }

// Deploy validates the spec and the module (it compiles the module and runs its
// initialization with the spec's config, so a module that would fail at start is refused
// here), stores the module by its SHA-256 and the spec, and so starts or replaces the
// deployment on the runtimes watching this NATS. A redeploy keeps the deployment's state
// (unless [ResetState] is given).
func (c *Client) Deploy(ctx context.Context, sp *spec.Spec, wasm []byte, opts ...DeployOption) (*Deployment, error) {
	var o deployOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := sp.ValidateForService(); err != nil {
		return nil, err
	}
	if err := c.mayChange(ctx, "deploy "+sp.Name, sp.Name); err != nil {
		return nil, err
	}
	ceil, err := c.ceilings(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.rt.ValidateModuleUnder(ctx, sp, wasm, ceil); err != nil {
		return nil, err
	}
	digest, err := c.reg.PutModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("client: storing the module: %w", err)
	}
	specJSON, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	rec := registry.Record{Name: sp.Name, Spec: specJSON, ModuleDigest: digest, ModuleSize: int64(len(wasm)), DeployedAt: time.Now().UTC()}
	prev, err := c.reg.Get(ctx, sp.Name)
	if o.shadowOf != "" {
		if serr := c.shadowRecord(ctx, &rec, sp, o, prev, err); serr != nil {
			return nil, serr
		}
	} else if err == nil && prev.ShadowOf != "" {
		return nil, fmt.Errorf("%w: %s is a shadow of %s: deploy it again as one (--shadow %s), or promote it first", ErrShadow, sp.Name, prev.ShadowOf, prev.ShadowOf)
	}
	if errors.Is(err, registry.ErrNotFound) {
		if ierr := c.checkInputOfFree(ctx, sp.Name); ierr != nil {
			return nil, ierr
		}
	}
	if o.initial != nil {
		switch {
		case err == nil:
			return nil, fmt.Errorf("%w: %s is deployed, and a redeploy keeps its state; undeploy it first, or deploy under a new name", ErrInitialStateRedeploy, sp.Name)
		case !errors.Is(err, registry.ErrNotFound):
			return nil, fmt.Errorf("client: reading the deployment: %w", err)
		}
		digest, serr := c.storeInitialState(ctx, o.initial)
		if serr != nil {
			return nil, serr
		}
		rec.InitialState, rec.InitialStateSize = digest, int64(len(o.initial))
	}
	if err == nil && prev.InitialState != "" {
		// Kept, so the record says where the deployment started from; never applied again
		// (its partitions committed batches, or will start from this file still).
		rec.InitialState, rec.InitialStateSize = prev.InitialState, prev.InitialStateSize
	}
	if o.resetState {
		if err := resetSupported(prev, err, sp); err != nil {
			return nil, err
		}
	}
	if err == nil && !o.resetState {
		if err := fixedAtFirstDeploy(prev, sp); err != nil {
			return nil, err
		}
	}
	if err == nil && prev.InputOf != "" && rec.InputOf == "" {
		// A promoted shadow reads its old primary's input streams, and its shadows need to
		// know where it took them over.
		rec.InputOf, rec.Handovers = prev.InputOf, prev.Handovers
	}
	switch {
	case err == nil && prev.Lineage != "":
		rec.Lineage = prev.Lineage
	case err == nil || errors.Is(err, registry.ErrNotFound):
		if rec.Lineage, err = newToken(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("client: reading the deployment: %w", err)
	}
	if err := c.checkStreams(ctx, rec); err != nil {
		return nil, err
	}
	if o.resetState {
		if rec.ResetState, err = c.prepareReset(ctx, sp.Name); err != nil {
			return nil, err
		}
	}
	rev, err := c.reg.Put(ctx, rec)
	if err != nil {
		return nil, fmt.Errorf("client: storing the deployment: %w", err)
	}
	rec.Revision = rev
	return deploymentOf(rec)
}

// fixedAtFirstDeploy refuses a redeploy that changes what the deployment's state is laid
// out by: its partitions (a key's partition depends on their number), its replication (a
// changelog holds the state from the first write on) and, with partitions, how its input
// is split: by the router or by the server (key.subject_token), and for the server the
// input subjects and the token its partitioned stream sources the input by (changed
// transforms would make the server copy the whole input again).
func fixedAtFirstDeploy(prev registry.Record, sp *spec.Spec) error {
	old, err := api.SpecOf(prev)
	if err != nil {
		return nil // a record that does not decode holds no layout to keep
	}
	split := func(s *spec.Spec) string {
		if s.Key.SubjectToken > 0 {
			return fmt.Sprintf("key.subject_token %d (the server splits the input)", s.Key.SubjectToken)
		}
		return "no key.subject_token (the router splits the input)"
	}
	switch {
	case old.Partitions != sp.Partitions:
		return fmt.Errorf("%w: %s has partitions %d, this spec %d; deploy it under a new name, or with --reset-state --confirm to drop its state", ErrFixedAtFirstDeploy, sp.Name, old.Partitions, sp.Partitions)
	case old.Replication != sp.Replication:
		return fmt.Errorf("%w: %s has replication %s, this spec %s; deploy it under a new name, or with --reset-state --confirm to drop its state", ErrFixedAtFirstDeploy, sp.Name, old.Replication, sp.Replication)
	case sp.Partitions > 1 && old.Key.SubjectToken != sp.Key.SubjectToken:
		return fmt.Errorf("%w: %s has partitions %d with %s, this spec %s; switching is not supported: deploy it under a new name", ErrFixedAtFirstDeploy, sp.Name, sp.Partitions, split(old), split(sp))
	case sp.Partitions > 1 && sp.Key.SubjectToken > 0 && !sameSubjects(old.Input.Subjects, sp.Input.Subjects):
		return fmt.Errorf("%w: %s has partitions %d split by the server from input subjects %q, this spec %q (its partitioned stream sources the input through them; changed, the server would copy the input again); deploy it under a new name", ErrFixedAtFirstDeploy, sp.Name, sp.Partitions, old.Input.Subjects, sp.Input.Subjects)
	}
	return nil
}

// sameSubjects tells whether a and b hold the same subjects, in any order.
func sameSubjects(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// resetSupported refuses [ResetState] for a deployment split into partitions (before or
// after the deploy): each partition's state would have to be reset once, by whichever
// runtime runs it, and this version resets a deployment's state as one.
func resetSupported(prev registry.Record, getErr error, sp *spec.Spec) error {
	parts := sp.Partitions
	if getErr == nil {
		if old, err := api.SpecOf(prev); err == nil {
			parts = max(parts, old.Partitions)
		}
	}
	if parts > 1 {
		return fmt.Errorf("%w: --reset-state of a deployment with partitions (%s: %d) is not supported yet; deploy it under a new name instead", ErrResetPartitioned, sp.Name, parts)
	}
	return nil
}

// prepareReset returns a reset token for a deploy of name. An owner that is up resets its
// own copy; an owner that is gone is removed first, so that a runtime that is up claims
// the deployment when it sees the deploy.
func (c *Client) prepareReset(ctx context.Context, name string) (string, error) {
	owner, err := c.reg.Owner(ctx, name)
	if err != nil {
		return "", err
	}
	if owner != "" {
		up, err := api.Ping(ctx, c.nc, owner)
		if err != nil {
			return "", fmt.Errorf("client: %w", err)
		}
		if !up {
			if err := c.reg.Disown(ctx, name); err != nil {
				return "", err
			}
		}
	}
	return newToken()
}

// newToken returns 24 random hex digits: a reset token, a lineage.
func newToken() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Undeploy removes the deployment: its runtime stops it after the batch in flight. Its state
// stays on that runtime's disk, so deploying the same name again resumes it there (unless
// another runtime claims it first).
//
// Undeploy also removes the deployment's owner, and it is the only place that does: the
// runtime that owned it may not be running now, or ever again (its disk lost), and no other
// runtime may give up an ownership that is not its own. The runtime running the deployment
// stops it when it sees the deletion, after its batch in flight; a deploy of the same name
// made before then may be claimed by another runtime.
func (c *Client) Undeploy(ctx context.Context, name string) error {
	if err := c.mayChange(ctx, "undeploy "+name, name); err != nil {
		return err
	}
	err := c.reg.Delete(ctx, name)
	if errors.Is(err, registry.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotDeployed, name)
	}
	if err != nil {
		return err
	}
	return c.reg.Disown(ctx, name)
}

// Get returns one deployment.
func (c *Client) Get(ctx context.Context, name string) (*Deployment, error) {
	rec, err := c.reg.Get(ctx, name)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNotDeployed, name)
	}
	if err != nil {
		return nil, err
	}
	return deploymentOf(rec)
}

// List returns every deployment, sorted by name. A record no runtime runs is listed with
// [Deployment.Invalid] saying why: one malformed record never breaks the list.
func (c *Client) List(ctx context.Context) ([]*Deployment, error) {
	recs, invalid, err := c.reg.ListAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Deployment, 0, len(recs)+len(invalid))
	for _, rec := range recs {
		d, err := deploymentOf(rec)
		if err != nil {
			d = &Deployment{Name: rec.Name, Revision: rec.Revision, Invalid: err.Error()}
		}
		out = append(out, d)
	}
	for _, inv := range invalid {
		out = append(out, &Deployment{Name: inv.Key, Revision: inv.Revision, Invalid: inv.Reason})
	}
	slices.SortFunc(out, func(a, b *Deployment) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Runtime is one live runtime (a `groupstate serve` process) on this NATS.
type Runtime struct {
	// ID names the runtime (serve --id, by default its state store's ID).
	ID string `json:"id"`
	// Partitions is the number of partitions of deployments it owns (a deployment without
	// partitions counts as one).
	Partitions int `json:"partitions"`
	// Standbys is the number of partitions it keeps a standby copy of.
	Standbys  int       `json:"standbys"`
	StartedAt time.Time `json:"started_at"`
}

// Runtimes returns the live runtimes, sorted by ID: those whose membership has not expired
// (a runtime that died stays listed for up to its member TTL).
func (c *Client) Runtimes(ctx context.Context) ([]Runtime, error) {
	members, err := cluster.ListMembers(ctx, c.js)
	if err != nil {
		return nil, err
	}
	owners, err := c.reg.Owners(ctx)
	if err != nil {
		return nil, err
	}
	owned := map[string]int{}
	for _, o := range owners {
		owned[o]++
	}
	// Replicated deployments are owned through their partition leases instead.
	recs, err := c.reg.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, rec := range recs {
		if sp, err := api.SpecOf(rec); err != nil || sp.Replication != spec.ReplicationChangelog {
			continue
		}
		if owners[rec.Name] != "" {
			owned[owners[rec.Name]]-- // claimed before it was replicated: counted by its lease
		}
		leases, err := c.leases(ctx)
		if err != nil {
			return nil, err
		}
		held, err := leases.List(ctx, rec.Name)
		if err != nil {
			return nil, err
		}
		for _, l := range held {
			if l.Owner != "" {
				owned[l.Owner]++
			}
		}
	}
	out := make([]Runtime, len(members))
	for i, m := range members {
		out[i] = Runtime{ID: m.ID, Partitions: owned[m.ID], Standbys: len(m.Standbys), StartedAt: m.StartedAt}
	}
	return out, nil
}

// leases opens the partition leases (once).
func (c *Client) leases(ctx context.Context) (*cluster.Leases, error) {
	c.leasesOnce.Do(func() { c.leaseKV, c.leaseErr = cluster.OpenLeases(ctx, c.js, 0) })
	return c.leaseKV, c.leaseErr
}

func deploymentOf(rec registry.Record) (*Deployment, error) {
	sp, err := api.SpecOf(rec)
	if err != nil {
		return nil, err
	}
	d := &Deployment{Name: rec.Name, Spec: sp, ModuleDigest: rec.ModuleDigest, ModuleSize: rec.ModuleSize, DeployedAt: rec.DeployedAt, Revision: rec.Revision, ResetState: rec.ResetState != "",
		ShadowOf: rec.ShadowOf, Promoting: rec.Promoting, InputOf: rec.InputOf, InitialState: rec.InitialState}
	if rec.ShadowOf != "" {
		if d.runSpec, err = api.RunSpecOf(rec); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Status returns the deployment's last published status. For a deployment with
// replication: changelog, each partition's Standbys are the live runtimes that record a warm
// standby copy of it.
func (c *Client) Status(ctx context.Context, name string) (*Status, error) {
	sp, err := c.specOf(ctx, name)
	if err != nil {
		return nil, err
	}
	parts := 1
	if sp != nil && sp.Partitions > 1 {
		parts = sp.Partitions
	}
	var st *Status
	if parts > 1 {
		st, err = c.partitionedStatus(ctx, name, parts)
	} else {
		st, err = c.unitStatus(ctx, name)
	}
	if err != nil {
		return nil, err
	}
	if sp != nil && sp.Replication == spec.ReplicationChangelog {
		c.addStandbys(ctx, st, name, parts, sp.Standbys)
	}
	st.MarkStale(time.Now())
	return st, nil
}

// specOf is the spec of deployment name (nil for one not deployed, or whose record does not
// decode: the caller's next request reports why).
func (c *Client) specOf(ctx context.Context, name string) (*spec.Spec, error) {
	rec, err := c.reg.Get(ctx, name)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sp, err := api.SpecOf(rec)
	if err != nil {
		return nil, nil
	}
	return sp, nil
}

// addStandbys fills in each partition's standbys (of want per partition) from the live
// runtimes' member values. When the members cannot be read, the status stays as it is.
func (c *Client) addStandbys(ctx context.Context, st *Status, name string, parts, want int) {
	members, err := cluster.ListMembers(ctx, c.js)
	if err != nil {
		return
	}
	for i := range st.Partitions {
		ps := &st.Partitions[i]
		key := name
		if parts > 1 {
			key = state.PartitionName(name, ps.Partition)
		}
		ps.Standbys = []string{}
		for _, m := range members {
			if m.ID != ps.Owner && slices.Contains(m.Standbys, key) {
				ps.Standbys = append(ps.Standbys, m.ID)
			}
		}
		ps.MissingStandbys = max(0, want-len(ps.Standbys))
	}
}

// partitionedStatus sums the statuses of a deployment's partitions (each written by the
// runtime that runs it under the partition's name, see state.PartitionName) into one: the
// counters add up, the state is running only when every partition runs (failed when one
// failed), and Partitions lists each one.
func (c *Client) partitionedStatus(ctx context.Context, name string, parts int) (*Status, error) {
	sum := &Status{Name: name, State: StatusRunning, Partitions: make([]PartitionStatus, 0, parts)}
	owners := map[string]bool{}
	for p := range parts {
		st, err := c.unitStatus(ctx, state.PartitionName(name, p))
		if err != nil {
			return nil, err
		}
		switch {
		case st.State == StatusFailed || sum.State == StatusFailed:
			sum.State = StatusFailed
		case st.State != StatusRunning:
			sum.State = st.State
		}
		if st.Error != "" && sum.Error == "" {
			sum.Error = fmt.Sprintf("partition %d: %s", p, st.Error)
		}
		if st.LastErrorAt.After(sum.LastErrorAt) {
			sum.LastError, sum.LastErrorAt = fmt.Sprintf("partition %d: %s", p, st.LastError), st.LastErrorAt
		}
		sum.ModuleDigest = cmp.Or(sum.ModuleDigest, st.ModuleDigest)
		if st.Owner != "" && !owners[st.Owner] {
			owners[st.Owner] = true
			sum.Owner = strings.TrimPrefix(sum.Owner+","+st.Owner, ",")
		}
		sum.DeployedAt = maxTime(sum.DeployedAt, st.DeployedAt)
		sum.StartedAt = maxTime(sum.StartedAt, st.StartedAt)
		sum.UpdatedAt = maxTime(sum.UpdatedAt, st.UpdatedAt)
		if st.live() && !st.UpdatedAt.IsZero() && (sum.oldestLive.IsZero() || st.UpdatedAt.Before(sum.oldestLive)) {
			sum.oldestLive = st.UpdatedAt
		}
		if st.LastBatchAt.After(sum.LastBatchAt) {
			sum.LastBatchAt, sum.LastBatchID, sum.LastBatchMs = st.LastBatchAt, st.LastBatchID, st.LastBatchMs
		}
		sum.Batches += st.Batches
		sum.RowsIn += st.RowsIn
		sum.LateRows += st.LateRows
		sum.DeadLetters += st.DeadLetters
		sum.TimeoutsFired += st.TimeoutsFired
		sum.TTLExpired += st.TTLExpired
		sum.Emitted += st.Emitted
		sum.StateKeys += st.StateKeys
		sum.TimerKeys += st.TimerKeys
		sum.StateBytes += st.StateBytes
		sum.InputLag += st.InputLag
		if st.Isolating != "" && sum.Isolating == "" {
			sum.Isolating = fmt.Sprintf("partition %d: %s", p, st.Isolating)
		}
		sum.QuarantinedKeys += st.QuarantinedKeys
		sum.Quarantined = append(sum.Quarantined, st.Quarantined...)
		ps := PartitionStatus{Partition: p, Owner: st.Owner, Standbys: []string{}, Position: st.Position, Lag: st.InputLag, WatermarkMs: st.WatermarkMs}
		if len(st.Partitions) == 1 {
			ps = st.Partitions[0]
			ps.Partition = p
		}
		sum.Partitions = append(sum.Partitions, ps)
	}
	// What concerns the deployment as a whole (a revision refused before any partition
	// started) is written under its own name.
	if whole, err := c.unitStatus(ctx, name); err == nil && whole.State == StatusFailed && whole.UpdatedAt.After(sum.UpdatedAt) {
		sum.State, sum.Error, sum.UpdatedAt = StatusFailed, whole.Error, whole.UpdatedAt
		sum.LastError, sum.LastErrorAt = cmp.Or(whole.LastError, whole.Error), whole.UpdatedAt
	}
	return sum, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// unitStatus reads the status written under name: a deployment's, or one partition's.
func (c *Client) unitStatus(ctx context.Context, name string) (*Status, error) {
	doc, err := c.reg.GetStatus(ctx, name)
	if errors.Is(err, registry.ErrNotFound) {
		base, _, _ := strings.Cut(name, ".") // a partition's status is its deployment's
		if _, gerr := c.reg.Get(ctx, base); errors.Is(gerr, registry.ErrNotFound) {
			return nil, fmt.Errorf("%w: %q", ErrNotDeployed, base)
		}
		return &Status{Name: name, State: "pending"}, nil
	}
	if err != nil {
		return nil, err
	}
	var st Status
	if err := json.Unmarshal(doc, &st); err != nil {
		return nil, fmt.Errorf("client: status of %q: %w", name, err)
	}
	return &st, nil
}

// KeyState is one key's state as a runtime holds it.
type KeyState struct {
	// Key is the canonical JSON scalar of the key.
	Key json.RawMessage `json:"key"`
	// Value is the state value (JSON for the SDKs' typed layers), absent when the key only
	// has a timeout. For an ABI v2 (transformWithState) handler it is the object of the
	// key's variables that hold something (a value variable's value, a list's array, a
	// map's object), the shape of a line's state in an initial-state file.
	Value json.RawMessage `json:"value,omitempty"`
	// HasValue tells whether Value is set.
	HasValue bool `json:"has_value"`
	// TimeoutMs is the key's timeout, 0 when none.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
	// UpdatedMs is when the value last changed: the processing time of the batch that set it.
	UpdatedMs int64 `json:"updated_ms,omitempty"`
	// Timers are an ABI v2 handler's timers of the key, ascending.
	Timers []int64 `json:"timers,omitempty"`
}

// KeyFromArg turns a key typed on a command line into its canonical form: a JSON scalar
// (42, "x") is taken as JSON, anything else as a string, so `alice` and `"alice"` are the
// same key and `42` is the number.
func KeyFromArg(arg string) []byte {
	if rowjson.Validate([]byte(`{"k":`+arg+`}`)) == nil {
		if k, err := rowjson.AppendCanonicalKey(nil, []byte(arg)); err == nil {
			return k
		}
	}
	b, _ := json.Marshal(arg)
	k, _ := rowjson.AppendCanonicalKey(nil, b)
	return k
}

// State asks the runtime running the deployment for one key's state. found is false when
// the key has neither a value nor a timeout.
func (c *Client) State(ctx context.Context, name string, key []byte) (ks *KeyState, found bool, err error) {
	d, err := c.Get(ctx, name)
	if err != nil {
		return nil, false, err
	}
	unit := name
	if parts := d.Spec.Partitions; parts > 1 {
		// Asked of the runtime that runs the key's partition.
		unit = state.PartitionName(name, partition.Of(key, parts))
	}
	var reply api.StateReply
	if err := c.request(ctx, api.Subject(api.VerbState, unit), api.StateRequest{Key: key}, &reply); err != nil {
		return nil, false, err
	}
	if !reply.Found {
		return nil, false, nil
	}
	ks = (*KeyState)(&reply.KeyState)
	return ks, true, nil
}

// Keys lists up to limit keys of the deployment after the key after (nil: from the start), in
// key order. next is the last key returned, to pass as after for the next page; nil at the
// end.
func (c *Client) Keys(ctx context.Context, name string, after []byte, limit int) (keys []KeyState, next []byte, err error) {
	d, err := c.Get(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	parts := max(d.Spec.Partitions, 1)
	if limit <= 0 || limit > api.MaxKeysLimit {
		limit = api.DefaultKeysLimit
	}
	// A deployment split into partitions: each partition's runtime lists its keys after
	// after, and the pages merge in key order.
	more := false
	for p := range parts {
		unit := name
		if parts > 1 {
			unit = state.PartitionName(name, p)
		}
		var reply api.KeysReply
		if err := c.request(ctx, api.Subject(api.VerbKeys, unit), api.KeysRequest{After: after, Limit: limit}, &reply); err != nil {
			return nil, nil, err
		}
		for _, k := range reply.Keys {
			keys = append(keys, KeyState(k))
		}
		more = more || reply.Next != nil
	}
	slices.SortFunc(keys, func(a, b KeyState) int { return bytes.Compare(a.Key, b.Key) })
	if len(keys) > limit {
		keys, more = keys[:limit], true
	}
	if more && len(keys) > 0 {
		next = keys[len(keys)-1].Key
	}
	if keys == nil {
		keys = []KeyState{}
	}
	return keys, next, nil
}

func (c *Client) request(ctx context.Context, subject string, req, reply any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	msg, err := c.nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) {
		return ErrNoRuntime
	}
	if err != nil {
		return err
	}
	var e api.Error
	if json.Unmarshal(msg.Data, &e) == nil && e.Error != "" {
		return errors.New(e.Error)
	}
	return json.Unmarshal(msg.Data, reply)
}

// InitialState returns the initial-state file deployment d started from
// ([Deployment].InitialState), verified by its SHA-256; nil when it started from none.
func (c *Client) InitialState(ctx context.Context, d *Deployment) ([]byte, error) {
	if d.InitialState == "" {
		return nil, nil
	}
	data, err := c.reg.GetInitialState(ctx, d.InitialState)
	if err != nil {
		return nil, fmt.Errorf("client: %s's initial state %s: %w", d.Name, d.InitialState, err)
	}
	return data, nil
}

// storeInitialState validates an initial-state file and stores it, returning its digest.
func (c *Client) storeInitialState(ctx context.Context, data []byte) (string, error) {
	if _, err := engine.ParseInitialState(bytes.NewReader(data)); err != nil {
		return "", err
	}
	digest, err := c.reg.PutInitialState(ctx, data)
	if err != nil {
		return "", fmt.Errorf("client: storing the initial state: %w", err)
	}
	return digest, nil
}

// checkStreams refuses the deployment of rec when a runtime could not ensure its streams
// because one of them is not the deployment's to change (natsio.ErrForeignStream: a stream
// someone else made, whose subjects, retention or duplicate window the spec would change),
// naming the stream and what would have to change. A shadow reads its primary's input, so
// only its sinks are checked.
func (c *Client) checkStreams(ctx context.Context, rec registry.Record) error {
	sp, err := api.RunSpecOf(rec)
	if err != nil {
		return err
	}
	var inputs []natsio.StreamOptions
	switch inputOf := rec.InputDeployment(); {
	case rec.ShadowOf != "":
	case sp.HasInputs():
		for _, in := range sp.Inputs {
			inputs = append(inputs, input.NamedStreamOptions(in, inputOf, 0))
		}
	default:
		inputs = append(inputs, input.StreamOptions(sp, inputOf, 0))
	}
	var inStream string // what the sinks must not be stored in
	for _, o := range inputs {
		if err := natsio.CheckStream(ctx, c.js, o); err != nil {
			return fmt.Errorf("client: input stream: %w", err)
		}
		if inStream, err = natsio.ResolveStream(ctx, c.js, o); err != nil {
			return fmt.Errorf("client: input stream: %w", err)
		}
	}
	if sp.HasInputs() {
		inStream = topology.InputsStream(rec.InputDeployment())
	}
	for _, o := range output.SinkStreams(sp, 0) {
		o.Options.Avoid = inStream
		if err := natsio.CheckStream(ctx, c.js, o.Options); err != nil {
			return fmt.Errorf("client: %s stream: %w", o.What, err)
		}
	}
	return nil
}
