package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go/jetstream"
)

// MembersBucket is the KV bucket of the live runtimes, keyed by runtime id. Its TTL is the
// member TTL: a key not renewed within it expires, and the bucket's limit markers tell every
// watcher so.
const MembersBucket = "groupstate-members"

// DefaultMemberTTL is the member TTL of the contract's --member-ttl: how long a runtime that
// stops renewing (a crash, a partition from the cluster) stays a member.
const DefaultMemberTTL = 5 * time.Second

// MinMemberTTL is the shortest member TTL: the server keeps limit markers for at least a
// second, and renewing more often than every 200ms buys nothing.
const MinMemberTTL = time.Second

// staleAfter is how many TTLs a member stays in the view without a renewal seen, when no
// removal was seen either: the fallback for an expiry whose marker the watch missed. The
// server removes a marker by the bucket's MaxAge, about one TTL after writing it, whatever
// the marker's own TTL (nats-server v2.15.2), so a watch that is cut off for longer than
// that never sees the marker.
const staleAfter = 2

// maxMemberID is the longest runtime id.
const maxMemberID = 64

// Membership errors.
var (
	// ErrMemberID is returned by [JoinMembers] for an id that is empty, longer than 64
	// bytes, or has a byte other than A-Z, a-z, 0-9, '-' and '_'.
	ErrMemberID = errors.New("natsio: invalid runtime id")
	// ErrMemberTTL is returned by [JoinMembers] for a TTL below [MinMemberTTL], or when
	// [MembersBucket] exists with another TTL than the runtime's (every runtime of a
	// cluster must be started with the same --member-ttl).
	ErrMemberTTL = errors.New("natsio: member TTL")
	// ErrMembersBucket is returned by [JoinMembers] when [MembersBucket] exists without
	// limit markers, so that watchers would never see a member expire.
	ErrMembersBucket = errors.New("natsio: members bucket has no limit markers")
)

// Member is one live runtime, as stored (JSON) under its id in [MembersBucket].
type Member struct {
	// ID names the runtime; it is also the KV key.
	ID string `json:"id"`
	// StartedAt is when the runtime started; a member that rejoins after a restart has a
	// later one.
	StartedAt time.Time `json:"started_at"`
	// Standbys are the partitions of which the runtime keeps a warm standby copy (the
	// names of their state keyspaces: a deployment's name, or "<name>.<partition>"),
	// sorted; see [Membership.SetStandbys].
	Standbys []string `json:"standbys,omitempty"`
	// Leaving is set by a runtime that is stopping (see [Membership.SetLeaving]): it is still
	// live, holding its leases until it hands them over, but no longer to be given partitions.
	Leaving bool `json:"leaving,omitempty"`
	// Ceilings are the runtime's ceilings (engine.Ceilings, as JSON), which deploy checks a
	// spec against before storing it.
	Ceilings json.RawMessage `json:"ceilings,omitempty"`
	// RenewedAt is when the server stored the member's last renewal seen (the KV entry's
	// time), not stored in the value.
	RenewedAt time.Time `json:"-"`
}

// MemberOptions configure [JoinMembers].
type MemberOptions struct {
	// ID names this runtime: 1 to 64 bytes of A-Z, a-z, 0-9, '-' and '_', so that it can be
	// a KV key and a subject token. Required.
	ID string
	// TTL is the member TTL, the bucket's; DefaultMemberTTL when 0. The key is renewed
	// every TTL/5.
	TTL time.Duration
	// StartedAt is stored in the member's value; the time of the call when zero.
	StartedAt time.Time
	// Replicas is the bucket's replicas when this call creates it; 0: [natsio.DefaultReplicas]. A bucket that
	// exists keeps its own.
	Replicas int
	// Ceilings is stored in the member's value (Member.Ceilings).
	Ceilings json.RawMessage
}

// Membership is this runtime's membership of [MembersBucket] and a view of every live
// member, kept up to date by a watch. Its methods are safe for concurrent use.
type Membership struct {
	kv      jetstream.KeyValue
	self    Member
	ttl     time.Duration
	value   []byte
	changes chan struct{}

	putMu sync.Mutex // held by each put of the key and by Leave's delete

	mu      sync.Mutex
	live    map[string]Member
	seen    map[string]time.Time // when a renewal of each live member was last received
	renewed time.Time            // of the last acknowledged renewal
	left    bool

	stop    context.CancelFunc
	watcher jetstream.KeyWatcher // the first watch, then the watch goroutine's
	wg      sync.WaitGroup
}

// JoinMembers opens [MembersBucket], creating it when missing with a TTL of opts.TTL (so
// several runtimes may join at once), and puts this runtime's key. It returns once the watch
// of the bucket has delivered every live member, this one included. Until
// [Membership.Leave], a goroutine renews the key every TTL/5 and another keeps the view up
// to date. Errors: [ErrMemberID], [ErrMemberTTL], [ErrMembersBucket], or the server's.
func JoinMembers(ctx context.Context, js jetstream.JetStream, opts MemberOptions) (*Membership, error) {
	if err := checkMemberID(opts.ID); err != nil {
		return nil, err
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultMemberTTL
	}
	if opts.TTL < MinMemberTTL {
		return nil, fmt.Errorf("%w: %s is below the minimum of %s", ErrMemberTTL, opts.TTL, MinMemberTTL)
	}
	if opts.StartedAt.IsZero() {
		opts.StartedAt = time.Now()
	}
	opts.Replicas = natsio.ReplicasFor(js, opts.Replicas)
	kv, err := openMembersBucket(ctx, js, opts.TTL, opts.Replicas)
	if err != nil {
		return nil, err
	}
	m := &Membership{
		kv:      kv,
		self:    Member{ID: opts.ID, StartedAt: opts.StartedAt.UTC(), Ceilings: opts.Ceilings},
		ttl:     opts.TTL,
		changes: make(chan struct{}, 1),
		live:    map[string]Member{},
		seen:    map[string]time.Time{},
	}
	if m.value, err = json.Marshal(m.self); err != nil {
		return nil, fmt.Errorf("natsio: encoding member %s: %w", opts.ID, err)
	}
	if err := m.renew(ctx); err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	if m.watcher, err = kv.WatchAll(wctx); err != nil {
		stop()
		return nil, fmt.Errorf("natsio: watching %s: %w", MembersBucket, err)
	}
	if err := m.initial(ctx); err != nil {
		stop()
		_ = m.watcher.Stop()
		return nil, err
	}
	m.wg.Add(2)
	go m.watch(wctx)
	go m.renewEvery(wctx, opts.TTL/5)
	return m, nil
}

// ReadMembers returns the members [MembersBucket] holds (none when it does not exist): for
// clients, which do not join. A value that does not decode is skipped.
func ReadMembers(ctx context.Context, js jetstream.JetStream) ([]Member, error) {
	kv, err := js.KeyValue(ctx, MembersBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue // expired since
		}
		var m Member
		if json.Unmarshal(e.Value(), &m) == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

func checkMemberID(id string) error {
	if id == "" || len(id) > maxMemberID {
		return fmt.Errorf("%w: %q must have 1 to %d bytes", ErrMemberID, id, maxMemberID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return fmt.Errorf("%w: %q has %q (allowed: A-Z, a-z, 0-9, '-', '_')", ErrMemberID, id, c)
		}
	}
	return nil
}

// openMembersBucket creates [MembersBucket] or opens the one that exists, which must have
// the same TTL and limit markers.
func openMembersBucket(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         MembersBucket,
		Description:    "groupstate: live runtimes, renewed every TTL/5",
		History:        1,
		TTL:            ttl,
		LimitMarkerTTL: ttl, // a longer one is cut to about the TTL anyway (see staleAfter)
		Storage:        jetstream.FileStorage,
		Replicas:       replicas,
	})
	if err == nil {
		return kv, nil // created, or it exists with this very configuration
	}
	if !errors.Is(err, jetstream.ErrBucketExists) && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil, fmt.Errorf("natsio: opening KV bucket %s: %w", MembersBucket, err)
	}
	if kv, err = js.KeyValue(ctx, MembersBucket); err != nil {
		return nil, fmt.Errorf("natsio: opening KV bucket %s: %w", MembersBucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("natsio: reading the configuration of %s: %w", MembersBucket, err)
	}
	if st.TTL() != ttl {
		return nil, fmt.Errorf("%w: bucket %s has a TTL of %s, this runtime's is %s: start every runtime with the same --member-ttl, or delete the bucket while none runs", ErrMemberTTL, MembersBucket, st.TTL(), ttl)
	}
	if st.LimitMarkerTTL() == 0 {
		return nil, fmt.Errorf("%w: %s; delete it while no runtime runs", ErrMembersBucket, MembersBucket)
	}
	return kv, nil
}

// SetStandbys records the partitions of which this runtime keeps a warm standby copy
// (keyspace names, in any order) in its member value, and renews its key at once so that
// the others see them: the placement of every runtime gives a partition whose owner is gone
// to its standby. A failed renewal is retried with the next one (every TTL/5), and
// returned.
func (m *Membership) SetStandbys(ctx context.Context, keyspaces []string) error {
	sorted := slices.Clone(keyspaces)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	return m.update(ctx, func(self *Member) bool {
		if slices.Equal(sorted, self.Standbys) {
			return false
		}
		self.Standbys = sorted
		return true
	})
}

// SetLeaving records in this runtime's member value that it is stopping, and renews its
// key at once so that the others see it: their placement leaves it out, and they take its
// partitions as it releases their leases (a runtime that leaves at once, with Leave, makes
// them wait for its leases' release without knowing where the partitions go). Later calls,
// and calls after Leave, do nothing. A failed renewal is returned (the next one, every
// TTL/5, carries the flag).
func (m *Membership) SetLeaving(ctx context.Context) error {
	return m.update(ctx, func(self *Member) bool {
		if self.Leaving {
			return false
		}
		self.Leaving = true
		return true
	})
}

// update applies change to this runtime's member value and, when change reports a change,
// renews the key at once with the new value; after Leave, nothing.
func (m *Membership) update(ctx context.Context, change func(self *Member) bool) error {
	m.mu.Lock()
	if m.left || !change(&m.self) {
		m.mu.Unlock()
		return nil
	}
	value, err := json.Marshal(m.self)
	if err != nil {
		m.mu.Unlock()
		return fmt.Errorf("natsio: encoding member %s: %w", m.self.ID, err)
	}
	m.value = value
	m.mu.Unlock()
	return m.renew(ctx)
}

// renew puts this runtime's key, which resets its TTL; after Leave, nothing.
func (m *Membership) renew(ctx context.Context) error {
	m.putMu.Lock()
	defer m.putMu.Unlock()
	m.mu.Lock()
	value, left := m.value, m.left
	m.mu.Unlock()
	if left {
		return nil
	}
	if _, err := m.kv.Put(ctx, m.self.ID, value); err != nil {
		return fmt.Errorf("natsio: renewing member %s: %w", m.self.ID, err)
	}
	now := time.Now()
	m.mu.Lock()
	m.renewed = now
	m.mu.Unlock()
	return nil
}

// renewEvery renews every interval until ctx is done. A failed renewal is retried at the
// next tick; [Membership.Renewed] tells how long ago one last succeeded.
func (m *Membership) renewEvery(ctx context.Context, interval time.Duration) {
	defer m.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, interval)
			_ = m.renew(rctx)
			cancel()
		}
	}
}

// initial applies the watch's first entries, the members live when it started.
func (m *Membership) initial(ctx context.Context) error {
	for {
		select {
		case e, ok := <-m.watcher.Updates():
			if !ok {
				return fmt.Errorf("natsio: watching %s: the watch ended", MembersBucket)
			}
			if e == nil {
				return nil
			}
			m.apply(e)
		case <-ctx.Done():
			return fmt.Errorf("natsio: reading the members of %s: %w", MembersBucket, ctx.Err())
		}
	}
}

// watch applies the watch's entries until ctx is done. Every TTL/5 it checks the watch:
// each of this runtime's renewals comes back through a working watch within milliseconds,
// so when one acknowledged TTL/2 ago has not, the watch is dead (its consumer was on a
// server that stopped; nats.go's ordered consumer takes about 18 s to notice a server
// restart) and it watches anew, swapping in the new watch's view at once. Then it drops the
// members of which no renewal was received for staleAfter TTLs.
func (m *Membership) watch(ctx context.Context) {
	defer m.wg.Done()
	w := m.watcher
	defer func() {
		if w != nil {
			_ = w.Stop()
		}
	}()
	received := time.Now() // when w last delivered anything
	t := time.NewTicker(m.ttl / 5)
	defer t.Stop()
	for {
		var updates <-chan jetstream.KeyValueEntry
		if w != nil {
			updates = w.Updates()
		}
		select {
		case e, ok := <-updates:
			if !ok { // unsubscribed or its connection closed: watched anew below, once renewals work
				w = nil
				continue
			}
			received = time.Now()
			if e != nil {
				m.apply(e)
			}
		case <-t.C:
			if m.Renewed().Sub(received) > m.ttl/2 {
				if w != nil {
					_ = w.Stop()
					w = nil
				}
				if nw, err := m.rewatch(ctx); err == nil {
					w, received = nw, time.Now()
				}
			}
			m.dropStale(time.Now())
		case <-ctx.Done():
			return
		}
	}
}

// rewatch starts a new watch and replaces the view with the live members it delivers
// first, signalling when they differ from the view's.
func (m *Membership) rewatch(ctx context.Context) (jetstream.KeyWatcher, error) {
	w, err := m.kv.WatchAll(ctx)
	if err != nil {
		return nil, err
	}
	v := &view{live: map[string]Member{}, seen: map[string]time.Time{}}
	timeout := time.NewTimer(m.ttl)
	defer timeout.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("natsio: watching %s: the watch ended", MembersBucket)
			}
			if e != nil {
				v.apply(e)
				continue
			}
			m.mu.Lock()
			changed := !sameMembers(m.live, v.live)
			m.live, m.seen = v.live, v.seen
			m.mu.Unlock()
			if changed {
				m.signal()
			}
			return w, nil
		case <-timeout.C:
			_ = w.Stop()
			return nil, fmt.Errorf("natsio: watching %s: no initial members after %s", MembersBucket, m.ttl)
		case <-ctx.Done():
			_ = w.Stop()
			return nil, ctx.Err()
		}
	}
}

// sameMembers reports whether a and b hold the same members with the same StartedAt and
// standbys.
func sameMembers(a, b map[string]Member) bool {
	if len(a) != len(b) {
		return false
	}
	for id, ma := range a {
		if mb, ok := b[id]; !ok || !ma.StartedAt.Equal(mb.StartedAt) || !slices.Equal(ma.Standbys, mb.Standbys) {
			return false
		}
	}
	return true
}

// dropStale removes the members of which no renewal was received for staleAfter TTLs.
// While the watch works, renewals arrive every TTL/5 and an expiry's marker about a quarter
// of a second after the TTL, so this only acts on a watch that missed a marker, or that
// receives nothing (then the view empties, this runtime included, until it receives again).
func (m *Membership) dropStale(now time.Time) {
	m.mu.Lock()
	changed := false
	for id, at := range m.seen {
		if now.Sub(at) > staleAfter*m.ttl {
			delete(m.live, id)
			delete(m.seen, id)
			changed = true
		}
	}
	m.mu.Unlock()
	if changed {
		m.signal()
	}
}

func (m *Membership) signal() {
	select {
	case m.changes <- struct{}{}:
	default:
	}
}

// view is the members seen and when a renewal of each was last received.
type view struct {
	live map[string]Member
	seen map[string]time.Time
}

// apply updates v with one entry: a put adds or renews a member; a delete (a leave) or a
// purge (an expiry: the server's limit marker) removes it. It reports whether the set of
// members, or a member's StartedAt, changed.
func (v *view) apply(e jetstream.KeyValueEntry) bool {
	id := e.Key()
	old, had := v.live[id]
	if e.Operation() != jetstream.KeyValuePut {
		delete(v.live, id)
		delete(v.seen, id)
		return had
	}
	mem := Member{ID: id}
	_ = json.Unmarshal(e.Value(), &mem) // a value that does not decode is still a member
	mem.ID = id
	mem.RenewedAt = e.Created()
	v.live[id] = mem
	v.seen[id] = time.Now()
	return !had || !old.StartedAt.Equal(mem.StartedAt) || !slices.Equal(old.Standbys, mem.Standbys) || old.Leaving != mem.Leaving
}

// apply applies one entry of the watch to the view, signalling a change.
func (m *Membership) apply(e jetstream.KeyValueEntry) {
	m.mu.Lock()
	changed := (&view{live: m.live, seen: m.seen}).apply(e)
	m.mu.Unlock()
	if changed {
		m.signal()
	}
}

// Self returns this runtime as it is stored.
func (m *Membership) Self() Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	self := m.self
	self.Standbys = slices.Clone(self.Standbys)
	return self
}

// TTL returns the member TTL.
func (m *Membership) TTL() time.Duration { return m.ttl }

// Live returns the live members sorted by id: a snapshot the caller owns. It includes this
// runtime, until it leaves or its own key expires (renewals failing). A member leaves the
// view when its key is deleted or expires (the server's marker, seen about 0.25 s after the
// TTL), or when no renewal of it was received for two TTLs (a watch that missed the marker,
// or that receives nothing: cut off from the server, the view empties).
func (m *Membership) Live() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.live))
	for _, mem := range m.live {
		out = append(out, mem)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Changes returns a channel that receives a value after the set of live members changes
// (a join, a leave, an expiry, or a member rejoining with a new StartedAt), or a member's
// standby copies do ([Member.Standbys]), or a member starts leaving ([Member.Leaving]); then read
// [Membership.Live]. Changes close together are coalesced into one value; renewals signal
// nothing. The channel is never closed.
func (m *Membership) Changes() <-chan struct{} { return m.changes }

// Renewed returns when this runtime's key was last renewed with success. A runtime whose
// last renewal is older than the TTL must assume that the others see it gone.
func (m *Membership) Renewed() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewed
}

// Leave stops renewing and watching and deletes this runtime's key, so that the other
// members see it leave at once rather than after the TTL. Later calls do nothing. The view
// ([Membership.Live]) stays as it was.
func (m *Membership) Leave(ctx context.Context) error {
	m.mu.Lock()
	left := m.left
	m.left = true
	m.mu.Unlock()
	if left {
		return nil
	}
	m.stop()
	m.wg.Wait()
	m.putMu.Lock() // after a renewal under way (SetStandbys), which then sees left
	defer m.putMu.Unlock()
	if err := m.kv.Delete(ctx, m.self.ID); err != nil {
		return fmt.Errorf("natsio: leaving %s as %s: %w", MembersBucket, m.self.ID, err)
	}
	return nil
}

// ListMembers returns the runtimes in [MembersBucket] now, sorted by id, without joining
// (for clients): an empty slice when the bucket does not exist (no runtime ever ran).
func ListMembers(ctx context.Context, js jetstream.JetStream) ([]Member, error) {
	kv, err := js.KeyValue(ctx, MembersBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return []Member{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("natsio: opening %s: %w", MembersBucket, err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("natsio: listing %s: %w", MembersBucket, err)
	}
	defer w.Stop()
	out := []Member{}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
				return out, nil
			}
			var m Member
			if json.Unmarshal(e.Value(), &m) != nil {
				continue
			}
			m.ID, m.RenewedAt = e.Key(), e.Created()
			out = append(out, m)
		}
	}
}
