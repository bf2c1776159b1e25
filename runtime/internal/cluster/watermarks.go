package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/nats-io/nats.go/jetstream"
)

// WatermarksBucket is the KV bucket of the partitions' max event times, for the watermark of
// a deployment split into partitions under event time (docs/semantics.md, "Event time across
// partitions"): key "<deployment>.<partition>", value a JSON [WatermarkRecord].
const WatermarksBucket = "groupstate-watermarks"

// WatermarkPutInterval is the shortest time between two puts of one partition's record: a
// partition publishes at most once a second, never per row or per batch.
const WatermarkPutInterval = time.Second

// Bounds of the watch and the puts of [Watermarks].
const (
	// watermarkPutTimeout bounds one put.
	watermarkPutTimeout = 5 * time.Second
	// watermarkWatchCheck is how often the watch is checked; one whose own acknowledged
	// puts have not come back through it for watermarkWatchStale is started anew (its
	// consumer was on a server that stopped).
	watermarkWatchCheck = 2 * time.Second
	watermarkWatchStale = 5 * time.Second
)

// WatermarkRecord is one partition's entry in [WatermarksBucket].
type WatermarkRecord struct {
	// MaxEventMs is the largest event time of any row the partition has seen (late rows
	// included), as committed with its progress.
	MaxEventMs int64 `json:"max_event_ms"`
	// LastRowAt is the wall time the partition's last row arrived, by its runtime's clock;
	// zero when none arrived since it was recorded. A partition whose LastRowAt is
	// event_time.idle old is idle: left out of the other partitions' watermarks.
	LastRowAt time.Time `json:"last_row_at"`
	// UpdatedAt is when the record was put, by its runtime's clock ([Watermarks.Publish] sets
	// it).
	UpdatedAt time.Time `json:"updated_at"`
}

// same tells whether r and o carry the same max event time and last row time (UpdatedAt
// aside).
func (r WatermarkRecord) same(o WatermarkRecord) bool {
	return r.MaxEventMs == o.MaxEventMs && r.LastRowAt.Equal(o.LastRowAt)
}

// WatermarkOptions configure [OpenWatermarks].
type WatermarkOptions struct {
	// Replicas is the bucket's replicas when this call creates it; 0: [natsio.DefaultReplicas]. A
	// bucket that exists keeps its own.
	Replicas int
	// Now is the clock of the put throttle and of idleness (and of UpdatedAt). Default
	// time.Now.
	Now func() time.Time
	// Logger receives failed puts and watch restarts. Default: slog.Default().
	Logger *slog.Logger
}

// Watermarks publishes this runtime's partitions' records to [WatermarksBucket] and keeps every
// partition's record in memory, from one watch of the bucket: reading a record never reads
// the KV. Its methods are safe for concurrent use; close it with [Watermarks.Close].
type Watermarks struct {
	kv     jetstream.KeyValue
	now    func() time.Time
	logger *slog.Logger
	ctx    context.Context // ends at Close
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	seen    map[string]WatermarkRecord // by key, from the watch
	seenRev uint64                     // the last revision the watch delivered
	pubs    map[string]*watermarkPub   // this runtime's partitions, by key
	ackRev  uint64                     // the revision of the last acknowledged put
	ackAt   time.Time                  // when it was acknowledged (wall clock)
	changed chan struct{}              // closed at the next change of seen
	closed  bool
}

// watermarkPub is the publication state of one of this runtime's partitions.
type watermarkPub struct {
	want     WatermarkRecord // the latest record asked for
	sent     WatermarkRecord // the last one acknowledged
	hasSent  bool
	lastPut  time.Time // when the last put started (by Now)
	inflight bool
}

// OpenWatermarks opens [WatermarksBucket], creating it when missing (file storage, one
// revision per key), and starts its watch; it returns once the watch has delivered every
// record. Errors: the server's.
func OpenWatermarks(ctx context.Context, js jetstream.JetStream, opts WatermarkOptions) (*Watermarks, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	kv, err := natsio.OpenKV(ctx, js, jetstream.KeyValueConfig{
		Bucket:      WatermarksBucket,
		Description: "groupstate: each partition's max event time, for the watermark across partitions",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    natsio.ReplicasFor(js, opts.Replicas),
	})
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(context.Background())
	w := &Watermarks{kv: kv, now: opts.Now, logger: opts.Logger, ctx: wctx, stop: stop,
		seen: map[string]WatermarkRecord{}, pubs: map[string]*watermarkPub{}, changed: make(chan struct{})}
	watcher, err := w.watchAll(ctx)
	if err != nil {
		stop()
		return nil, err
	}
	w.wg.Add(1)
	go w.watch(watcher)
	return w, nil
}

// watchAll starts a watch of the bucket and replaces the view with the records it delivers
// first.
func (w *Watermarks) watchAll(ctx context.Context) (jetstream.KeyWatcher, error) {
	watcher, err := w.kv.WatchAll(w.ctx)
	if err != nil {
		return nil, fmt.Errorf("natsio: watching %s: %w", WatermarksBucket, err)
	}
	view := map[string]WatermarkRecord{}
	var rev uint64
	for {
		select {
		case e, ok := <-watcher.Updates():
			if !ok {
				return nil, fmt.Errorf("natsio: watching %s: the watch ended", WatermarksBucket)
			}
			if e != nil {
				rev = max(rev, e.Revision())
				applyWatermark(view, e)
				continue
			}
			w.mu.Lock()
			w.seen, w.seenRev = view, max(w.seenRev, rev)
			w.signal()
			w.mu.Unlock()
			return watcher, nil
		case <-ctx.Done():
			_ = watcher.Stop()
			return nil, fmt.Errorf("natsio: reading %s: %w", WatermarksBucket, ctx.Err())
		}
	}
}

// applyWatermark applies one watched entry to view. A value that does not decode is left out
// (as if the partition never published).
func applyWatermark(view map[string]WatermarkRecord, e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		delete(view, e.Key())
		return
	}
	var r WatermarkRecord
	if json.Unmarshal(e.Value(), &r) != nil {
		delete(view, e.Key())
		return
	}
	view[e.Key()] = r
}

// signal wakes the waiters of Changed. w.mu must be held.
func (w *Watermarks) signal() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// watch applies the watch's entries until Close, watching anew when the watch ends or is
// stale (see watermarkWatchStale).
func (w *Watermarks) watch(watcher jetstream.KeyWatcher) {
	defer w.wg.Done()
	defer func() {
		if watcher != nil {
			_ = watcher.Stop()
		}
	}()
	t := time.NewTicker(watermarkWatchCheck)
	defer t.Stop()
	for {
		var updates <-chan jetstream.KeyValueEntry
		if watcher != nil {
			updates = watcher.Updates()
		}
		select {
		case e, ok := <-updates:
			if !ok {
				watcher = nil // watched anew at the next check
				continue
			}
			if e == nil {
				continue
			}
			w.mu.Lock()
			w.seenRev = max(w.seenRev, e.Revision())
			applyWatermark(w.seen, e)
			w.signal()
			w.mu.Unlock()
		case <-t.C:
			w.mu.Lock()
			stale := w.ackRev > w.seenRev && time.Since(w.ackAt) > watermarkWatchStale
			w.mu.Unlock()
			if watcher != nil && !stale {
				continue
			}
			if watcher != nil {
				_ = watcher.Stop()
				watcher = nil
			}
			ctx, cancel := context.WithTimeout(w.ctx, watermarkWatchStale)
			nw, err := w.watchAll(ctx)
			cancel()
			if err != nil {
				if w.ctx.Err() == nil {
					w.logger.Warn("watching the partitions' watermarks failed; retrying", "bucket", WatermarksBucket, "err", err)
				}
				continue
			}
			watcher = nw
		case <-w.ctx.Done():
			return
		}
	}
}

// Publish asks for partition's record of deployment to be rec (its UpdatedAt is set at the
// put). It never blocks: the put runs in the background, at most once per
// [WatermarkPutInterval] per partition, and not at all when rec is what was last put (UpdatedAt
// aside). A record held back by the interval, by a put in flight or by a failed put (logged)
// goes out at a later Publish once the interval has passed: call it after every batch.
func (w *Watermarks) Publish(deployment string, partition int, rec WatermarkRecord) {
	key := leaseKey(deployment, partition)
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	p := w.pubs[key]
	if p == nil {
		p = &watermarkPub{}
		w.pubs[key] = p
	}
	p.want = rec
	if p.inflight || (p.hasSent && p.sent.same(rec)) || (!p.lastPut.IsZero() && now.Sub(p.lastPut) < WatermarkPutInterval) {
		return
	}
	p.inflight, p.lastPut = true, now
	rec.UpdatedAt = now
	w.wg.Add(1)
	go w.put(key, p, rec)
}

// put stores rec under key and records the outcome in p.
func (w *Watermarks) put(key string, p *watermarkPub, rec WatermarkRecord) {
	defer w.wg.Done()
	data, err := json.Marshal(rec)
	var rev uint64
	if err == nil {
		ctx, cancel := context.WithTimeout(w.ctx, watermarkPutTimeout)
		rev, err = w.kv.Put(ctx, key, data)
		cancel()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	p.inflight = false
	if err != nil {
		if !w.closed {
			w.logger.Warn("publishing a partition's max event time failed; retrying later", "bucket", WatermarksBucket, "key", key, "err", err)
		}
		return
	}
	p.sent, p.hasSent = rec, true
	w.ackRev, w.ackAt = max(w.ackRev, rev), time.Now()
}

// Adopt puts partition's record of deployment from, as the bucket holds it, as the record of
// the same partition of deployment to (a promoted shadow takes its old primary's: it ran the
// same batches to the same max event time); nothing when from has none.
func (w *Watermarks) Adopt(ctx context.Context, from, to string, partition int) error {
	e, err := w.kv.Get(ctx, leaseKey(from, partition))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natsio: %s's watermark record of partition %d: %w", from, partition, err)
	}
	if _, err := w.kv.Put(ctx, leaseKey(to, partition), e.Value()); err != nil {
		return fmt.Errorf("natsio: %s's watermark record of partition %d: %w", to, partition, err)
	}
	return nil
}

// Record returns partition's record of deployment as the watch last delivered it, and
// whether there is one.
func (w *Watermarks) Record(deployment string, partition int) (WatermarkRecord, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.seen[leaseKey(deployment, partition)]
	return r, ok
}

// Min returns the bound of partition's watermark among the parts partitions of deployment:
// the smallest MaxEventMs of the partitions that count, those whose LastRowAt is less than
// idle before Now (idle 0 or less: none is idle): the partition itself by own (its current
// max event time and last row, which need not be published yet), and every other by the
// record the watch delivered (partitions without a record are left out). When none counts,
// math.MinInt64 (the watermark stays). It reads the watched records only.
func (w *Watermarks) Min(deployment string, partition, parts int, own WatermarkRecord, idle time.Duration) int64 {
	now := w.now()
	isIdle := func(r WatermarkRecord) bool { return idle > 0 && now.Sub(r.LastRowAt) >= idle }
	m := int64(math.MaxInt64)
	if !isIdle(own) {
		m = own.MaxEventMs
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range parts {
		if p == partition {
			continue
		}
		r, ok := w.seen[leaseKey(deployment, p)]
		if !ok || isIdle(r) {
			continue
		}
		m = min(m, r.MaxEventMs)
	}
	if m == math.MaxInt64 {
		return math.MinInt64
	}
	return m
}

// Changed returns a channel that is closed at the next change of any record the watch
// delivers (ask again after each).
func (w *Watermarks) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// Close stops the watch, cancels the puts in flight and waits for them. Later Publish calls
// do nothing; the records last read stay readable. Close is idempotent.
func (w *Watermarks) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stop()
	w.wg.Wait()
}
