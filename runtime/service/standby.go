package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/state"
)

// A standby keeps a warm copy of a partition this runtime does not own: it restores the
// partition's keyspace from the snapshots and the changelog once, then tails the changelog,
// applying every record the owner appends. The runtime records its warm standbys in its
// member value (cluster.Membership.SetStandbys), and every runtime's placement gives a
// partition whose owner is gone to its standby: the takeover then applies only the records
// the copy lacks. A runtime that is to take a partition over from a live owner (it joined,
// say) keeps a standby of it first, and the owner hands it over once that copy is warm.

// standbyPoll is how long a standby that found no new record waits before it reads again.
// One read of nothing is one request to the stream leader.
const standbyPoll = 200 * time.Millisecond

// standbyRetryMax bounds the wait before a standby that failed (NATS unreachable, a gap in
// the log) restores again: from 500 ms, doubling.
const standbyRetryMax = 10 * time.Second

// handoverWarmMax is how long an owner keeps a partition the plan moved to a joining
// runtime while that runtime's standby copy is not warm yet; after it the owner hands it
// over anyway, and the newcomer restores from the snapshot and the log.
const handoverWarmMax = 30 * time.Second

// errStandbyGap: the changelog lost records between a standby's last one and the next (a
// purge below the snapshots went past it): it restores from the snapshot again.
var errStandbyGap = errors.New("service: records between the standby's copy and the changelog were purged")

// copyPos says how far a local copy of a partition's state goes in its changelog
// ([changelog.Position]).
type copyPos = changelog.Position

// standby is one partition's standby copy on this runtime. Its goroutine is the keyspace's
// only writer while it runs.
type standby struct {
	name      string
	partition int
	key       string // the keyspace
	ks        *state.Deployment
	logger    *slog.Logger
	cancel    context.CancelFunc
	done      chan struct{}

	mu   sync.Mutex
	pos  copyPos
	warm bool // restored once: it follows the log
}

// position returns what the copy holds, and whether it is warm.
func (sb *standby) position() (copyPos, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.pos, sb.warm
}

// setPosition records what the copy holds; with warm, that it is warm (restored once).
func (sb *standby) setPosition(pos copyPos, warm bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	sb.pos, sb.warm = pos, sb.warm || warm
}

// keepStandby makes sure this runtime keeps a standby copy of partition p of name (of
// parts), starting it from hint (what the local copy holds, when known: a partition this
// runtime just handed over). Only the service's loop calls it.
func (s *Service) keepStandby(name string, p, parts int, hint copyPos) {
	key := topology.Keyspace(name, p, parts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.standbys[key] != nil || s.store == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sb := &standby{name: name, partition: p, key: key, ks: s.store.Deployment(key),
		logger: s.logger.With("deployment", name, "partition", p, "standby", true),
		cancel: cancel, done: make(chan struct{}), pos: hint}
	s.standbys[key] = sb
	go s.runStandby(ctx, sb)
}

// endStandby stops the standby copy of keyspace key, if this runtime keeps one, and returns
// what the copy holds (the zero copyPos when there was none). With drop, the local copy is
// deleted as well (the plan gives the partition neither to this runtime nor to it as a
// standby). Only the service's loop calls it.
func (s *Service) endStandby(key string, drop bool) copyPos {
	s.mu.Lock()
	sb := s.standbys[key]
	delete(s.standbys, key)
	s.mu.Unlock()
	if sb == nil {
		return copyPos{}
	}
	sb.cancel()
	<-sb.done
	s.cfg.Metrics.standbyEnded(sb.name, sb.partition)
	go s.publishStandbys()
	pos, _ := sb.position()
	if drop {
		if err := sb.ks.Drop(); err != nil {
			s.logger.Warn("dropping a standby copy failed", "deployment", sb.name, "partition", sb.partition, "err", err)
		}
		return copyPos{}
	}
	return pos
}

// endStandbys stops every standby of deployment name (every one when name is ""), deleting
// the copies with drop (an undeploy) or keeping them (a stop, a failed store). Only the
// service's loop calls it.
func (s *Service) endStandbys(name string, drop bool) {
	s.mu.Lock()
	var keys []string
	for key, sb := range s.standbys {
		if name == "" || sb.name == name {
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	for _, key := range keys {
		s.endStandby(key, drop)
	}
}

// standbyWarm tells whether runtime id records a warm standby copy of keyspace key.
func (s *Service) standbyWarm(id, key string) bool {
	for _, m := range s.members.Live() {
		if m.ID == id {
			return slices.Contains(m.Standbys, key)
		}
	}
	return false
}

// currentStandbys returns, by partition of name (of parts), the live runtimes that record a
// warm standby copy of it, leaving ones aside.
func (s *Service) currentStandbys(name string, parts int) map[int][]string {
	out := map[int][]string{}
	for _, m := range s.members.Live() {
		if m.Leaving {
			continue
		}
		for _, key := range m.Standbys {
			if p, ok := partitionOfKey(key, name, parts); ok {
				out[p] = append(out[p], m.ID)
			}
		}
	}
	return out
}

// partitionOfKey is the partition of name (of parts) whose keyspace is key.
func partitionOfKey(key, name string, parts int) (int, bool) {
	if parts <= 1 {
		return 0, key == name
	}
	if len(key) <= len(name)+1 || key[:len(name)] != name || key[len(name)] != '.' {
		return 0, false
	}
	p, err := strconv.Atoi(key[len(name)+1:])
	return p, err == nil && p >= 0 && p < parts && topology.Keyspace(name, p, parts) == key
}

// publishStandbys records this runtime's warm standby copies in its member value.
func (s *Service) publishStandbys() {
	s.standbyPub.Lock()
	defer s.standbyPub.Unlock()
	s.mu.Lock()
	var keys []string
	for key, sb := range s.standbys {
		if _, warm := sb.position(); warm {
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.members.SetStandbys(ctx, keys); err != nil {
		s.logger.Warn("recording the standby copies failed; retried with the next renewal", "err", err)
	}
}

// runStandby restores sb's copy and follows the changelog until sb is ended, restoring again
// after a failure.
func (s *Service) runStandby(ctx context.Context, sb *standby) {
	defer close(sb.done)
	sb.ks.SetReplicator(nil) // a runner that stopped here may have left its own
	backoff := 500 * time.Millisecond
	for {
		err := s.follow(ctx, sb)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errStandbyGap) {
			sb.setPosition(copyPos{}, false) // find the copy's place (or a snapshot) again
		}
		sb.logger.Warn("standby copy failed; restoring it again", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, standbyRetryMax)
	}
}

// follow restores sb's copy from its position, marks it warm, then applies the changelog's
// new records as they come, until ctx ends or a read fails.
func (s *Service) follow(ctx context.Context, sb *standby) error {
	cl, err := changelog.OpenChangelog(ctx, s.js, sb.name, s.cfg.Replicas)
	if err != nil {
		return fmt.Errorf("changelog: %w", err)
	}
	snaps, err := changelog.OpenSnapshots(ctx, s.js, s.cfg.Replicas)
	if err != nil {
		return fmt.Errorf("snapshots: %w", err)
	}
	hint, _ := sb.position()
	started := time.Now()
	r, err := changelog.Restore(ctx, cl, snaps, sb.partition, sb.ks, hint)
	if err != nil {
		return fmt.Errorf("restoring from the changelog: %w", err)
	}
	sb.setPosition(r.Held, true)
	sb.logger.Info("standby copy warm", "records_applied", r.Applied, "last_seq", r.Last, "took", time.Since(started).Round(time.Millisecond))
	go s.publishStandbys()
	a := changelog.NewApplier(cl, sb.partition, sb.ks, r.Held.Held)
	next := r.Last + 1
	for {
		cursor, before, held := next-1, a.Applied, a.Held
		last, err := a.Apply(ctx, next, func(rec changelog.ChangelogRecord) (bool, error) {
			if rec.Prev != 0 && rec.Prev > cursor {
				return false, fmt.Errorf("%w: record %d follows %d, the copy's last read was %d", errStandbyGap, rec.Seq, rec.Prev, cursor)
			}
			cursor = rec.Seq
			return false, nil
		})
		if err != nil {
			return err
		}
		applied := a.Applied - before
		if applied > 0 || a.Held != held {
			p, err := sb.ks.Progress()
			if err != nil {
				return err
			}
			sb.setPosition(copyPos{Held: a.Held, Batch: p.BatchID}, false)
		}
		s.cfg.Metrics.standbyBehind(sb.name, sb.partition, applied)
		if last >= next {
			next = last + 1
		}
		if applied > 0 {
			continue // more may have come meanwhile
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(standbyPoll):
		}
	}
}
