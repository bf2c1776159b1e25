package registry

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go/jetstream"
)

// Buckets of the deployment registry.
const (
	// DeploymentsBucket is the KV bucket of deployment records, keyed by name.
	DeploymentsBucket = "groupstate-deployments"
	// ModulesBucket is the object store of WASM modules, named by hex SHA-256.
	ModulesBucket = "groupstate-modules"
	// StatusBucket is the KV bucket of progress documents, keyed by deployment name.
	StatusBucket = "groupstate-status"
	// OwnersBucket is the KV bucket that says which runtime runs each deployment (the ID of
	// its state store), keyed by deployment name.
	OwnersBucket = "groupstate-owners"
)

// DeploymentsHistory is how many revisions of each deployment record the
// registry keeps.
const DeploymentsHistory = 5

// Registry errors.
var (
	// ErrNotFound is returned for a deployment, module or status that does not exist.
	ErrNotFound = errors.New("natsio: not found")
	// ErrDigestMismatch is returned by [Registry.GetModule] when the stored
	// bytes do not hash to the requested digest.
	ErrDigestMismatch = errors.New("natsio: module digest mismatch")
	// ErrBadDigest is returned for a digest that is not 64 lower-case hex digits.
	ErrBadDigest = errors.New("natsio: malformed module digest")
	// ErrBadRecord is returned by [Registry.Get] for a record that does not decode, or whose
	// key, record name and spec names do not agree (see [Invalid]).
	ErrBadRecord = errors.New("natsio: malformed deployment record")
	// ErrNoName is returned by [Registry.Put] for a record without a name.
	ErrNoName = errors.New("natsio: deployment record has no name")
	// ErrRecordChanged is returned by [Registry.Update] when the record is no longer at the
	// revision the caller read.
	ErrRecordChanged = errors.New("natsio: deployment record changed meanwhile")
)

// Record is a deployment as stored in [DeploymentsBucket].
type Record struct {
	// Name is the deployment name, also the KV key.
	Name string `json:"name"`
	// Spec is the deployment spec as JSON (the caller converts).
	Spec json.RawMessage `json:"spec"`
	// ModuleDigest is the hex SHA-256 of the module, its name in [ModulesBucket].
	ModuleDigest string `json:"module_digest"`
	// ModuleSize is the module's size in bytes.
	ModuleSize int64 `json:"module_size"`
	// DeployedAt is when the deployment was stored.
	DeployedAt time.Time `json:"deployed_at"`
	// Lineage names the deployment's history of outputs, made at its first deploy and kept
	// by every redeploy: the output message ids of a replicated deployment include it instead
	// of the runtime's store id, so they stay the same whichever runtime publishes them
	// (a republication after a takeover is dropped as a duplicate).
	Lineage string `json:"lineage,omitempty"`
	// ResetState, when not empty, asks the runtime that runs the deployment to empty its
	// state once and go on at the input consumer's position (deploy --reset-state). It is
	// a token unique to that deploy; the runtime clears it (see [Registry.Update]) once the
	// reset is done, so a restart does not reset again.
	ResetState string `json:"reset_state,omitempty"`
	// InitialState, when not empty, is the hex SHA-256 of the deployment's initial-state file
	// (deploy --initial-state), stored like a module (see [Registry.PutInitialState]): the
	// runtime applies it in the first batch of each partition that committed none. Set by
	// the first deploy only, and kept by redeploys (where it is never applied again).
	InitialState string `json:"initial_state,omitempty"`
	// InitialStateSize is the initial-state file's size in bytes.
	InitialStateSize int64 `json:"initial_state_size,omitempty"`
	// ShadowOf, when not empty, names the primary this deployment shadows (deploy --shadow):
	// it runs the primary's recorded batches again, row for row, from the primary's manifests,
	// with its own state, and publishes on its spec's subjects made shadow ones
	// (spec.Spec.AsShadowOf). Promote clears it.
	ShadowOf string `json:"shadow_of,omitempty"`
	// ShadowSpec is the spec a shadow runs with while it shadows (Spec made a shadow's, see
	// spec.Spec.AsShadowOf), stored at its deploy so that it does not depend on the primary's
	// record, which promote removes. Promote clears it: the deployment then runs with Spec.
	ShadowSpec json.RawMessage `json:"shadow_spec,omitempty"`
	// Promoting, on a shadow, asks its runtime to make it the primary: once the primary has
	// stopped and the shadow ran every batch it recorded, the runtime moves the shadow's
	// position to the primary's input position and stores the record without ShadowOf.
	Promoting bool `json:"promoting,omitempty"`
	// InputOf, when not empty, names the deployment whose input-side streams this one reads:
	// the partitioned stream (and its router's consumer), the inputs stream of several
	// inputs, the default input stream names. A shadow reads its primary's (or those its
	// primary reads), and keeps reading them once promoted, so that it goes on exactly where
	// the primary stopped; deploys keep it. Empty: the deployment's own (Name).
	InputOf string `json:"input_of,omitempty"`
	// Handovers, on a promoted shadow, say where each of its partitions took over its old
	// primary's input: the batch id of the promotion's commit and the input position it
	// committed. Until a partition records a batch after that one, its manifests hold
	// positions of the old primary's manifests stream, so a shadow of this deployment takes
	// the partition's position from here (PrimaryHandovers). Set by promote, kept by deploys.
	Handovers []Handover `json:"handovers,omitempty"`
	// PrimaryHandovers, on a shadow, are its primary's Handovers when it was deployed.
	PrimaryHandovers []Handover `json:"primary_handovers,omitempty"`
	// Revision is the KV revision, filled on read.
	Revision uint64 `json:"-"`
}

// InputDeployment names the deployment whose input-side streams the deployment of r reads
// (see [Record].InputOf): InputOf, else for a shadow recorded before InputOf existed its
// primary, else its own name. It is the one answer to "whose input do I read".
func (r Record) InputDeployment() string { return cmp.Or(r.InputOf, r.ShadowOf, r.Name) }

// RevisionKey names the revision of the deployment r is: "<name>@<revision>". The runners of
// one revision on a runtime share what it keys (the streams ensured, the module).
func (r Record) RevisionKey() string { return r.Name + "@" + strconv.FormatUint(r.Revision, 10) }

// Handover is where a partition of a promoted shadow took over its old primary's input
// (see [Record].Handovers).
type Handover struct {
	Partition int    `json:"partition"`
	Batch     uint64 `json:"batch"`
	Position  uint64 `json:"position"`
}

// Event is one change seen by [Registry.Watch].
type Event struct {
	// Record is the record put, or for a deletion just its Name and Revision.
	Record Record
	// Deleted reports that the deployment was deleted (or purged).
	Deleted bool
	// InitialDone marks the end of the initial records; Record is then empty.
	InitialDone bool
}

// Registry stores deployments, modules and status documents in NATS.
// It is safe for concurrent use.
type Registry struct {
	deployments jetstream.KeyValue
	modules     jetstream.ObjectStore
	status      jetstream.KeyValue
	owners      jetstream.KeyValue
}

// OpenRegistry opens the registry's buckets, creating the missing ones (file
// storage, replicas copies, 0 meaning [natsio.DefaultReplicas]; deployments keep
// [DeploymentsHistory] revisions, status one). Several processes may open it
// at the same time. Buckets that exist with a different configuration are used
// as they are.
func OpenRegistry(ctx context.Context, js jetstream.JetStream, replicas int) (*Registry, error) {
	replicas = natsio.ReplicasFor(js, replicas)
	dep, err := natsio.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      DeploymentsBucket,
		Replicas:    replicas,
		Description: "groupstate deployments",
		History:     DeploymentsHistory,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, err
	}
	st, err := natsio.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      StatusBucket,
		Replicas:    replicas,
		Description: "groupstate deployment status",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, err
	}
	own, err := natsio.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      OwnersBucket,
		Replicas:    replicas,
		Description: "groupstate: which runtime runs each deployment",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return nil, err
	}
	cfg := jetstream.ObjectStoreConfig{
		Bucket:      ModulesBucket,
		Replicas:    replicas,
		Description: "groupstate WASM modules by SHA-256",
		Storage:     jetstream.FileStorage,
	}
	mod, err := js.ObjectStore(ctx, cfg.Bucket) // first: a reader may not create streams
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		mod, err = js.CreateObjectStore(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			mod, err = js.ObjectStore(ctx, cfg.Bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: opening object store %s: %w", cfg.Bucket, natsio.ExplainReplicas(err, replicas))
	}
	return &Registry{deployments: dep, modules: mod, status: st, owners: own}, nil
}

// Digest returns the hex SHA-256 of b, the name of a module in [ModulesBucket].
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func checkDigest(d string) error {
	if len(d) != 64 {
		return fmt.Errorf("%w: %q", ErrBadDigest, d)
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: %q", ErrBadDigest, d)
		}
	}
	return nil
}

// PutModule stores wasm under its digest ([Digest]) and returns the digest.
// The upload is skipped when an object of that name and size already exists.
func (r *Registry) PutModule(ctx context.Context, wasm []byte) (string, error) {
	return r.putContent(ctx, "module", wasm)
}

// GetModule returns the module named digest after checking that its bytes
// hash to digest ([ErrDigestMismatch] otherwise). A missing module is
// [ErrNotFound].
func (r *Registry) GetModule(ctx context.Context, digest string) ([]byte, error) {
	return r.getContent(ctx, "module", digest)
}

// PutInitialState stores an initial-state file (deploy --initial-state) as PutModule stores
// a module, in the same bucket under its digest (content cannot collide), and returns the
// digest.
func (r *Registry) PutInitialState(ctx context.Context, data []byte) (string, error) {
	return r.putContent(ctx, "initial state", data)
}

// GetInitialState returns the initial-state file named digest, checked as GetModule checks
// a module.
func (r *Registry) GetInitialState(ctx context.Context, digest string) ([]byte, error) {
	return r.getContent(ctx, "initial state", digest)
}

// putContent stores data under its digest in the modules bucket, unless an object of that
// name and size is there; what names the kind of content in errors.
func (r *Registry) putContent(ctx context.Context, what string, data []byte) (string, error) {
	digest := Digest(data)
	info, err := r.modules.GetInfo(ctx, digest)
	switch {
	case err == nil && !info.Deleted && info.Size == uint64(len(data)):
		return digest, nil
	case err == nil, errors.Is(err, jetstream.ErrObjectNotFound):
	default:
		return "", fmt.Errorf("natsio: looking up %s %s: %w", what, digest, err)
	}
	if _, err := r.modules.PutBytes(ctx, digest, data); err != nil {
		return "", fmt.Errorf("natsio: storing %s %s (%d bytes): %w", what, digest, len(data), err)
	}
	return digest, nil
}

// getContent reads the object named digest from the modules bucket and checks its SHA-256.
func (r *Registry) getContent(ctx context.Context, what, digest string) ([]byte, error) {
	if err := checkDigest(digest); err != nil {
		return nil, err
	}
	b, err := r.modules.GetBytes(ctx, digest)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s %s", ErrNotFound, what, digest)
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: reading %s %s: %w", what, digest, err)
	}
	if got := Digest(b); got != digest {
		return nil, fmt.Errorf("%w: %s %s has SHA-256 %s", ErrDigestMismatch, what, digest, got)
	}
	return b, nil
}

// Put stores rec under rec.Name and returns the new revision. rec.Revision
// is ignored.
func (r *Registry) Put(ctx context.Context, rec Record) (uint64, error) {
	if rec.Name == "" {
		return 0, ErrNoName
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("natsio: encoding deployment %s: %w", rec.Name, err)
	}
	rev, err := r.deployments.Put(ctx, rec.Name, b)
	if err != nil {
		return 0, fmt.Errorf("natsio: storing deployment %s: %w", rec.Name, err)
	}
	return rev, nil
}

// Update replaces the record read at rec.Revision with rec and returns the new revision;
// [ErrRecordChanged] when the record was written or deleted since.
func (r *Registry) Update(ctx context.Context, rec Record) (uint64, error) {
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("natsio: encoding deployment %s: %w", rec.Name, err)
	}
	rev, err := r.deployments.Update(ctx, rec.Name, b, rec.Revision)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, fmt.Errorf("%w: %s is no longer at revision %d", ErrRecordChanged, rec.Name, rec.Revision)
	}
	if err != nil {
		return 0, fmt.Errorf("natsio: updating deployment %s: %w", rec.Name, err)
	}
	return rev, nil
}

// Invalid is a record of [DeploymentsBucket] that no runtime runs: it does not decode, or its
// key, its record name and its spec's name (and its shadow spec's) do not all agree. Any
// client that can write the bucket can store one, so every reader checks: a record stored
// under "evil" whose spec names "logincount" would otherwise re-point logincount's consumer.
type Invalid struct {
	// Key is the record's key in the bucket.
	Key string `json:"key"`
	// Revision is the record's KV revision.
	Revision uint64 `json:"revision"`
	// Reason says what is wrong with it.
	Reason string `json:"reason"`
}

func (i Invalid) Error() string {
	return fmt.Sprintf("%s: %s revision %d: %s", ErrBadRecord, i.Key, i.Revision, i.Reason)
}

func (i Invalid) Unwrap() error { return ErrBadRecord }

// decodeRecord decodes a record of the bucket, or returns an [Invalid] error for one that no
// runtime may run.
func decodeRecord(e jetstream.KeyValueEntry) (Record, error) {
	bad := func(format string, args ...any) (Record, error) {
		return Record{}, Invalid{Key: e.Key(), Revision: e.Revision(), Reason: fmt.Sprintf(format, args...)}
	}
	var rec Record
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return bad("does not decode: %v", err)
	}
	if rec.Name == "" {
		rec.Name = e.Key()
	}
	if rec.Name != e.Key() {
		return bad("its name %q is not its key %q", rec.Name, e.Key())
	}
	for _, sp := range []struct {
		field string
		json  json.RawMessage
	}{{"spec", rec.Spec}, {"shadow_spec", rec.ShadowSpec}} {
		if sp.field == "shadow_spec" && len(sp.json) == 0 {
			continue
		}
		var named struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(sp.json, &named); err != nil {
			return bad("its %s does not decode: %v", sp.field, err)
		}
		if named.Name != rec.Name {
			return bad("its %s names %q, not %q", sp.field, named.Name, rec.Name)
		}
	}
	rec.Revision = e.Revision()
	return rec, nil
}

// Get returns the deployment named name, [ErrNotFound] when there is none.
func (r *Registry) Get(ctx context.Context, name string) (Record, error) {
	e, err := r.deployments.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, fmt.Errorf("%w: deployment %s", ErrNotFound, name)
	}
	if err != nil {
		return Record{}, fmt.Errorf("natsio: reading deployment %s: %w", name, err)
	}
	return decodeRecord(e)
}

// Last returns the deployment named name as last stored, also when it has been deleted
// since (the bucket keeps [DeploymentsHistory] revisions), [ErrNotFound] when there is no
// such record left.
func (r *Registry) Last(ctx context.Context, name string) (Record, error) {
	hist, err := r.deployments.History(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, fmt.Errorf("%w: deployment %s", ErrNotFound, name)
	}
	if err != nil {
		return Record{}, fmt.Errorf("natsio: reading the history of deployment %s: %w", name, err)
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Operation() == jetstream.KeyValuePut {
			return decodeRecord(hist[i])
		}
	}
	return Record{}, fmt.Errorf("%w: deployment %s", ErrNotFound, name)
}

// Delete deletes the deployment named name, [ErrNotFound] when there is none.
// Its module and status are left alone.
func (r *Registry) Delete(ctx context.Context, name string) error {
	if _, err := r.Get(ctx, name); err != nil && !errors.Is(err, ErrBadRecord) {
		return err // an invalid record can be deleted: that is how it goes
	}
	if err := r.deployments.Delete(ctx, name); err != nil {
		return fmt.Errorf("natsio: deleting deployment %s: %w", name, err)
	}
	return nil
}

// List returns every deployment sorted by name (an empty slice when there
// are none). Invalid records (see [Invalid]) are left out; [Registry.ListAll] has them.
func (r *Registry) List(ctx context.Context) ([]Record, error) {
	recs, _, err := r.ListAll(ctx)
	return recs, err
}

// ListAll returns every deployment sorted by name, and the invalid records (see [Invalid])
// sorted by key: one malformed record never hides the others.
func (r *Registry) ListAll(ctx context.Context) ([]Record, []Invalid, error) {
	w, err := r.deployments.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, nil, fmt.Errorf("natsio: listing deployments: %w", err)
	}
	defer w.Stop()
	recs := []Record{}
	var invalid []Invalid
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, nil, fmt.Errorf("natsio: listing deployments: watcher closed")
			}
			if e == nil {
				sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
				sort.Slice(invalid, func(i, j int) bool { return invalid[i].Key < invalid[j].Key })
				return recs, invalid, nil
			}
			rec, err := decodeRecord(e)
			var inv Invalid
			switch {
			case err == nil:
				recs = append(recs, rec)
			case errors.As(err, &inv):
				invalid = append(invalid, inv)
			}
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("natsio: listing deployments: %w", ctx.Err())
		}
	}
}

// Watch delivers the current deployments, then an event with InitialDone,
// then every change (puts and deletions) until ctx is done, when the channel
// is closed. Invalid records (see [Invalid]) are skipped and given to skipped, when not nil
// (from the watch's goroutine), so that the caller can say so. The channel must be drained:
// the watcher blocks while it is full.
func (r *Registry) Watch(ctx context.Context, skipped func(Invalid)) (<-chan Event, error) {
	w, err := r.deployments.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("natsio: watching deployments: %w", err)
	}
	out := make(chan Event, 64)
	go func() {
		defer close(out)
		defer w.Stop()
		send := func(ev Event) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		initial := true
		for {
			var e jetstream.KeyValueEntry
			var ok bool
			select {
			case e, ok = <-w.Updates():
			case <-ctx.Done():
				return
			}
			if !ok {
				return
			}
			var ev Event
			switch {
			case e == nil:
				if !initial {
					continue
				}
				initial = false
				ev.InitialDone = true
			case e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge:
				ev.Deleted = true
				ev.Record = Record{Name: e.Key(), Revision: e.Revision()}
			default:
				rec, err := decodeRecord(e)
				var inv Invalid
				if errors.As(err, &inv) && skipped != nil {
					skipped(inv)
				}
				if err != nil {
					continue
				}
				ev.Record = rec
			}
			if !send(ev) {
				return
			}
		}
	}()
	return out, nil
}

// PutStatus stores the progress document of deployment name.
func (r *Registry) PutStatus(ctx context.Context, name string, doc []byte) error {
	if _, err := r.status.Put(ctx, name, doc); err != nil {
		return fmt.Errorf("natsio: storing status of %s: %w", name, err)
	}
	return nil
}

// GetStatus returns the progress document of deployment name, [ErrNotFound]
// when there is none.
func (r *Registry) GetStatus(ctx context.Context, name string) ([]byte, error) {
	e, err := r.status.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: status of %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: reading status of %s: %w", name, err)
	}
	return e.Value(), nil
}

// Claim makes runtime the owner of deployment name unless another runtime already is. It
// returns the owner after the call: runtime itself when the claim succeeded or it already
// owned name. A deployment's state lives on its owner's disk, so exactly one runtime runs it.
func (r *Registry) Claim(ctx context.Context, name, runtime string) (owner string, err error) {
	for range 3 {
		if _, err := r.owners.Create(ctx, name, []byte(runtime)); err == nil {
			return runtime, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", fmt.Errorf("natsio: claiming %s: %w", name, err)
		}
		e, err := r.owners.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // released in between: try again
		}
		if err != nil {
			return "", fmt.Errorf("natsio: reading the owner of %s: %w", name, err)
		}
		return string(e.Value()), nil
	}
	return "", fmt.Errorf("natsio: claiming %s: the owner keeps changing", name)
}

// Owner returns the ID of the runtime that owns deployment name, "" when none does.
func (r *Registry) Owner(ctx context.Context, name string) (string, error) {
	e, err := r.owners.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("natsio: reading the owner of %s: %w", name, err)
	}
	return string(e.Value()), nil
}

// Owners returns the owner of every deployment that has one, by deployment name.
func (r *Registry) Owners(ctx context.Context) (map[string]string, error) {
	w, err := r.owners.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("natsio: listing owners: %w", err)
	}
	defer w.Stop()
	out := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return out, nil
			}
			out[e.Key()] = string(e.Value())
		}
	}
}

// Disown removes the owner of deployment name, whoever it is and whether or not it runs: an
// undeploy, after which the next deploy of name may run on any runtime.
func (r *Registry) Disown(ctx context.Context, name string) error {
	if err := r.owners.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("natsio: disowning %s: %w", name, err)
	}
	return nil
}
