package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/cluster"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// Kinds of [PurgeItem].
const (
	// PurgeStream is a JetStream stream; Name is the stream's.
	PurgeStream = "stream"
	// PurgeConsumer is a durable consumer on a stream the purge kept; Name is
	// "<stream>/<consumer>".
	PurgeConsumer = "consumer"
	// PurgeKV is a key of one of groupstate's KV buckets (the deployment record and its
	// history, status, owner, leases, watermarks); Name is "<bucket>/<key>".
	PurgeKV = "kv"
	// PurgeSnapshots are the changelog snapshots of a partition of a replicated deployment;
	// Name is the partition's keyspace.
	PurgeSnapshots = "snapshots"
	// PurgeState is a runtime's local copy of the state (its state store on disk); Name is
	// "<runtime>/<keyspace>", or the runtime's ID for a copy kept.
	PurgeState = "state"
)

// PurgeItem is one thing [Client.Purge] deleted, or kept and why.
type PurgeItem struct {
	// Kind is what it is: [PurgeStream], [PurgeConsumer], [PurgeKV], [PurgeSnapshots] or
	// [PurgeState].
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Why says why a kept item was kept; empty on a deleted one.
	Why string `json:"why,omitempty"`
}

// PurgeReport is what [Client.Purge] did, in the order it did it.
type PurgeReport struct {
	// Name is the deployment's.
	Name string `json:"name"`
	// Undeployed tells that the purge undeployed the deployment (false: it was undeployed
	// before, and the purge removed what was left of it).
	Undeployed bool `json:"undeployed"`
	// Deleted is what it deleted; Kept what it found of the deployment and kept.
	Deleted []PurgeItem `json:"deleted"`
	Kept    []PurgeItem `json:"kept"`
}

// ErrPurgeIncomplete is returned by [Client.Purge] when a runtime did not stop the
// deployment, or refused to delete its state, before the context ended: the deployment is
// undeployed, and purging it again goes on where this purge stopped.
var ErrPurgeIncomplete = errors.New("client: purge incomplete")

// purgePoll is how often Purge looks whether the runtimes stopped the deployment.
const purgePoll = 100 * time.Millisecond

// Purge undeploys the deployment name (when it is deployed), waits until the runtimes
// stopped it, and deletes what it created (docs/operations.md, "Removing a deployment"):
//
//   - the local state each live runtime holds of it (the owner's, standby copies);
//   - its streams: input streams, the partitioned stream, the inputs stream, output,
//     dead-letter and late streams, changelog and manifests streams, and its changelog
//     snapshots;
//   - its durable consumers on the streams it keeps;
//   - its KV entries: the deployment record with its history, status, owner, partition
//     leases and watermarks.
//
// Only streams this deployment owns are deleted: those groupstate created for it (marked
// with natsio.OwnerKey, or of its default names), and no other deployment uses. A stream
// someone else made (input.stream, or one that captured the spec's subjects first), one
// created for another deployment, or one another deployment reads or writes (a shadow's
// primary's input, a stream shared through input_of) is kept, and [PurgeReport].Kept says
// why. Modules and initial-state files are stored by content and may be shared: they stay.
//
// A name undeployed before (by a plain undeploy) can be purged too: the registry keeps the
// record's last revisions, and the streams carry their owner. A runtime that is not running
// at the purge keeps its copy of the state: Kept lists its ID when it was the owner.
//
// ctx bounds the wait for the runtimes to stop the deployment; when it ends first, the error
// wraps [ErrPurgeIncomplete], and purging again finishes the job.
func (c *Client) Purge(ctx context.Context, name string) (*PurgeReport, error) {
	if err := state.ValidateName(name); err != nil || strings.Contains(name, ".") {
		return nil, fmt.Errorf("client: %q is not a deployment name", name)
	}
	if err := c.mayChange(ctx, "purge "+name, name); err != nil {
		return nil, err
	}
	rep := &PurgeReport{Name: name, Deleted: []PurgeItem{}, Kept: []PurgeItem{}}
	rec, err := c.reg.Get(ctx, name)
	deployed := err == nil || errors.Is(err, registry.ErrBadRecord)
	if err != nil {
		if rec, err = c.reg.Last(ctx, name); err != nil && !errors.Is(err, registry.ErrNotFound) && !errors.Is(err, registry.ErrBadRecord) {
			return nil, fmt.Errorf("client: reading the deployment: %w", err)
		}
	}
	var sp *spec.Spec // nil when the record is gone or does not decode
	if err == nil {
		sp, _ = api.RunSpecOf(rec)
	}
	parts := 1
	if sp != nil {
		parts = max(sp.Partitions, 1)
	} else {
		rec = registry.Record{Name: name}
	}
	owner, err := c.reg.Owner(ctx, name)
	if err != nil {
		return nil, err
	}
	if deployed {
		if err := c.Undeploy(ctx, name); err != nil {
			return nil, err
		}
		rep.Undeployed = true
	}
	if err := c.waitStopped(ctx, name, parts); err != nil {
		return rep, err
	}
	if err := c.purgeState(ctx, name, owner, rep); err != nil {
		return rep, err
	}
	if err := c.purgeStreams(ctx, rec, sp, parts, rep); err != nil {
		return rep, err
	}
	if sp != nil && sp.Replication == spec.ReplicationChangelog {
		if err := c.purgeSnapshots(ctx, name, parts, rep); err != nil {
			return rep, err
		}
	}
	for _, kv := range []struct{ bucket, filter string }{
		{registry.StatusBucket, name}, {registry.StatusBucket, name + ".*"},
		{cluster.LeasesBucket, name + ".*"}, {cluster.WatermarksBucket, name + ".*"},
		{registry.OwnersBucket, name},
	} {
		keys, err := natsio.PurgeKeys(ctx, c.js, kv.bucket, kv.filter)
		if err != nil {
			return rep, fmt.Errorf("client: %w", err)
		}
		for _, k := range keys {
			rep.Deleted = append(rep.Deleted, PurgeItem{Kind: PurgeKV, Name: kv.bucket + "/" + k})
		}
	}
	// Last: a purge that stopped before finds the record's history.
	if err := c.purgeRecord(ctx, name, rep); err != nil {
		return rep, err
	}
	if !deployed && len(rep.Deleted) == 0 && len(rep.Kept) == 0 {
		return nil, fmt.Errorf("%w: %q (and nothing is left of one by that name)", ErrNotDeployed, name)
	}
	return rep, nil
}

// waitStopped waits until no runtime runs deployment name (of parts partitions): until the
// status of each of its units says it is not running, or was written by a runtime that is
// gone.
func (c *Client) waitStopped(ctx context.Context, name string, parts int) error {
	gone := map[string]bool{} // runtimes that did not answer a ping
	for {
		running := ""
		for p := range parts {
			unit := topology.Keyspace(name, p, parts)
			doc, err := c.reg.GetStatus(ctx, unit)
			if errors.Is(err, registry.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("client: %w", err)
			}
			var st Status
			if json.Unmarshal(doc, &st) != nil || (!Runs(st.State) && st.State != StatusDrained) || gone[st.Owner] {
				continue
			}
			if st.Owner != "" {
				if up, err := api.Ping(ctx, c.nc, st.Owner); err == nil && !up {
					gone[st.Owner] = true
					continue
				}
			}
			running = cmp.Or(st.Owner, "a runtime") + " runs " + unit
			break
		}
		if running == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s is undeployed, but %s still (nothing was deleted; purge again to finish)", ErrPurgeIncomplete, name, running)
		case <-time.After(purgePoll):
		}
	}
}

// purgeState asks every live runtime to delete its copy of name's state, and notes the
// owner's copy as kept when the owner is not live.
func (c *Client) purgeState(ctx context.Context, name, owner string, rep *PurgeReport) error {
	members, err := cluster.ReadMembers(ctx, c.js)
	if err != nil {
		return fmt.Errorf("client: listing the runtimes: %w", err)
	}
	if err := c.mayAsk(ctx, "purge "+name, api.VerbPurge, "*"); err != nil {
		return err
	}
	live := map[string]bool{}
	for _, m := range members {
		live[m.ID] = true
		var reply api.PurgeReply
		for {
			err = c.request(ctx, api.Subject(api.VerbPurge, m.ID), api.PurgeRequest{Deployment: name}, &reply)
			if err == nil || !strings.Contains(err.Error(), "still runs") {
				break
			}
			select { // it stops the deployment still: its status was written before the end
			case <-ctx.Done():
				return fmt.Errorf("%w: %s; purge again to finish", ErrPurgeIncomplete, err)
			case <-time.After(purgePoll):
			}
		}
		switch {
		case errors.Is(err, ErrNoRuntime):
			rep.Kept = append(rep.Kept, PurgeItem{Kind: PurgeState, Name: m.ID, Why: "the runtime did not answer: its copy, if any, stays on its disk"})
		case err != nil:
			return fmt.Errorf("client: runtime %s: %w", m.ID, err)
		}
		for _, ks := range reply.Dropped {
			rep.Deleted = append(rep.Deleted, PurgeItem{Kind: PurgeState, Name: m.ID + "/" + ks})
		}
	}
	if owner != "" && !live[owner] {
		rep.Kept = append(rep.Kept, PurgeItem{Kind: PurgeState, Name: owner, Why: "the runtime that ran it is not running: its state stays on its data directory (delete it there, or start it and purge again)"})
	}
	return nil
}

// usedStreams returns, by stream, the deployments other than name that read or write it:
// their input streams (resolved as their runtimes do), partitioned and inputs streams, sinks,
// changelog and manifests streams (a shadow's primary's too).
func (c *Client) usedStreams(ctx context.Context, name string) (map[string][]string, error) {
	recs, err := c.reg.List(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string][]string{}
	for _, o := range recs {
		if o.Name == name {
			continue
		}
		osp, err := api.RunSpecOf(o)
		if err != nil {
			continue
		}
		in, own := c.streamsOf(ctx, o, osp)
		for _, s := range append(in, own...) {
			if !slices.Contains(used[s], o.Name) {
				used[s] = append(used[s], o.Name)
			}
		}
	}
	return used, nil
}

// streamsOf returns the names of the streams the deployment of rec (running sp) reads or
// writes, as far as they resolve now: in, those of its input side (named after
// rec.InputDeployment(), see package topology), and own, the others.
func (c *Client) streamsOf(ctx context.Context, rec registry.Record, sp *spec.Spec) (in, own []string) {
	inputOf := rec.InputDeployment()
	resolve := func(o natsio.StreamOptions) []string {
		if s, err := natsio.ResolveStream(ctx, c.js, o); err == nil {
			return []string{s}
		}
		return nil
	}
	if sp.HasInputs() {
		for _, n := range sp.Inputs {
			in = append(in, resolve(input.NamedStreamOptions(n, inputOf, 0))...)
		}
		in = append(in, topology.InputsStream(inputOf))
	} else if len(sp.Input.Subjects) > 0 {
		in = append(in, resolve(input.StreamOptions(sp, inputOf, 0))...)
	}
	if sp.Partitions > 1 {
		in = append(in, topology.PartitionedStream(inputOf))
	}
	for _, s := range output.SinkStreams(sp, 0) {
		own = append(own, resolve(s.Options)...)
	}
	own = append(own, topology.ChangelogStream(rec.Name), topology.ManifestsStream(rec.Name))
	if rec.ShadowOf != "" {
		in = append(in, topology.ManifestsStream(rec.ShadowOf))
	}
	return in, own
}

// defaultStreams are the names groupstate gives the streams of deployment name (its input
// side, and a shadow's primary's manifests, read as inputOf's): a stream of one of these names that carries no owner mark
// was made by groupstate for it (by a version before the marks, or one of its own streams:
// changelog, manifests, partitioned, inputs).
func defaultStreams(name, inputOf string, sp *spec.Spec) []string {
	out := []string{topology.OutputStream(name), topology.DeadLetterStream(name), topology.LateStream(name),
		topology.ChangelogStream(name)}
	for _, d := range slices.Compact([]string{name, inputOf}) {
		// A shadow reads its primary's manifests: once the primary is gone, they are its.
		out = append(out, topology.InputStream(d), topology.PartitionedStream(d), topology.InputsStream(d), topology.ManifestsStream(d))
		if sp != nil {
			for _, in := range sp.Inputs {
				out = append(out, topology.NamedInputStream(d, in.Name))
			}
		}
	}
	return out
}

// purgeStreams deletes the streams of the deployment of rec (sp: nil when its record is
// gone) that it owns and nobody else uses, and its durable consumers on those it keeps.
func (c *Client) purgeStreams(ctx context.Context, rec registry.Record, sp *spec.Spec, parts int, rep *PurgeReport) error {
	name, inputOf := rec.Name, rec.InputDeployment()
	used, err := c.usedStreams(ctx, name)
	if err != nil {
		return err
	}
	defaults := defaultStreams(name, inputOf, sp)
	candidates := slices.Clone(defaults)
	var inputSide []string // marked as inputOf's, they are this deployment's (a promoted shadow's)
	if sp != nil {
		in, own := c.streamsOf(ctx, rec, sp)
		inputSide = in
		candidates = append(append(candidates, in...), own...)
	}
	// Streams marked as the deployment's that the spec no longer names (an input moved).
	lister := c.js.ListStreams(ctx)
	for info := range lister.Info() {
		if info.Config.Metadata[natsio.OwnerKey] == name {
			candidates = append(candidates, info.Config.Name)
		}
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("client: listing the streams: %w", err)
	}
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)
	consumers := []string{topology.RouterConsumer(name)}
	for p := range parts {
		consumers = append(consumers, topology.PartitionConsumer(name, p, parts))
	}
	consumers = slices.Compact(append(consumers, topology.Consumer(name)))
	for _, s := range candidates {
		st, err := c.js.Stream(ctx, s)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("client: looking up stream %s: %w", s, err)
		}
		mark := st.CachedInfo().Config.Metadata[natsio.OwnerKey]
		why := ""
		switch {
		case mark != "" && mark != name && (mark != inputOf || !slices.Contains(inputSide, s)):
			why = "created by groupstate for deployment " + mark
		case len(used[s]) > 0:
			why = "used by deployment " + strings.Join(used[s], ", ")
		case mark == "" && !slices.Contains(defaults, s):
			why = "not created by groupstate for " + name + " (a stream made outside groupstate, or before the deployment)"
		}
		if why == "" {
			if err := c.js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("client: deleting stream %s: %w", s, err)
			}
			rep.Deleted = append(rep.Deleted, PurgeItem{Kind: PurgeStream, Name: s})
			continue
		}
		rep.Kept = append(rep.Kept, PurgeItem{Kind: PurgeStream, Name: s, Why: why})
		for _, cons := range consumers {
			err := c.js.DeleteConsumer(ctx, s, cons)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("client: deleting consumer %s of stream %s: %w", cons, s, err)
			}
			rep.Deleted = append(rep.Deleted, PurgeItem{Kind: PurgeConsumer, Name: s + "/" + cons})
		}
	}
	return nil
}

// purgeSnapshots deletes the changelog snapshots of each partition of name.
func (c *Client) purgeSnapshots(ctx context.Context, name string, parts int, rep *PurgeReport) error {
	if _, err := c.js.ObjectStore(ctx, changelog.SnapshotsBucket); errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	snaps, err := changelog.OpenSnapshots(ctx, c.js, 0)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for p := range parts {
		had, err := snaps.List(ctx, name, p)
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		if err := snaps.Prune(ctx, name, p, 0); err != nil {
			return fmt.Errorf("client: deleting the snapshots of %s: %w", topology.Keyspace(name, p, parts), err)
		}
		if len(had) > 0 {
			rep.Deleted = append(rep.Deleted, PurgeItem{Kind: PurgeSnapshots, Name: topology.Keyspace(name, p, parts)})
		}
	}
	return nil
}

// purgeRecord removes the deployment record of name with its history (undeploy leaves the
// revisions before its deletion).
func (c *Client) purgeRecord(ctx context.Context, name string, rep *PurgeReport) error {
	kv, err := c.js.KeyValue(ctx, registry.DeploymentsBucket)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	hist, err := kv.History(ctx, name)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("client: reading the history of %s: %w", name, err)
	}
	if !slices.ContainsFunc(hist, func(e jetstream.KeyValueEntry) bool { return e.Operation() == jetstream.KeyValuePut }) {
		return nil // no record, or purged already
	}
	if err := kv.Purge(ctx, name); err != nil {
		return fmt.Errorf("client: removing the record of %s: %w", name, err)
	}
	rep.Deleted = append(rep.Deleted, PurgeItem{Kind: PurgeKV, Name: registry.DeploymentsBucket + "/" + name})
	return nil
}
