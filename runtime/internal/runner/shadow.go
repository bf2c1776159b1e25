package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/history"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/registry"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// A shadow deployment (deploy --shadow) runs its primary's batches again, live: its
// consumer reads the primary's manifests stream instead of the input, and each primary batch
// (a first chunk and the chunks that continued it) runs as one batch of the shadow with the
// same rows, fetched from the input stream by sequence, at the same processing time and
// watermark. The shadow's input position is the manifests stream's sequence of the last
// manifest it ran, so a restart resumes exactly; its own manifests carry it (which is how
// groupstate diff pairs its batches with the primary's). With partitions, each partition of
// the shadow follows the primary's manifests of that partition and reads its rows from the
// primary's partitioned stream (runner.inputOf). Promote (record.Promoting, set once the
// primary stopped) waits for each partition to run every batch the primary recorded of it,
// moves its position to the primary's input position of it, and once every partition did,
// stores the record as a primary (see promote).

// shadowSource is a shadow's batchSource: the primary's batches, cut from its manifests (see
// cut), with their rows read from the input stream (see rows); and the shadow's
// promotion, which ends the source (outcome promoted). Used by the loop only, but for
// promoted and handover, which open sets before the loop starts.
type shadowSource struct {
	feed
	fetched []input.Msg // manifests fetched, not yet committed
	rest    []input.Msg // fetched after the batch returned last
	last    *input.Msg  // the batch returned last's last manifest

	stream  string              // the input stream
	rd      *input.StreamReader // nil: not open
	nextSeq uint64              // the sequence rd reads next (at least)
	// checkedAt is when checkPrimary last looked for the primary's record (gone tells that
	// it found none), or partitionsPromoted at the partitions' statuses.
	checkedAt time.Time
	gone      bool
	// promoted tells that the promotion committed the shadow's new input position (see
	// promote): only the record is left to store.
	promoted bool
	// more tells that the loop's pending manifests hold part of a primary batch: it fetches
	// the rest before it runs the batch, unless ended says that none will come (a shadow
	// being promoted whose primary stopped between the chunks of a batch).
	more, ended bool
	// batch is the primary batch cut last (see cut), which input makes the batch of.
	batch shadowBatch
	// handover is where the partition took over the primary's input, once promoted.
	handover registry.Handover
}

var _ batchSource = (*shadowSource)(nil)

func (in *shadowSource) next(ctx, batchCtx context.Context, backoff *time.Duration) (batch, outcome) {
	r := in.r
	in.start(ctx)
	after := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		if in.promoted {
			// The partition committed its promotion (now, or before a restart): store the
			// record once every partition did.
			switch r.promoteOrFault(ctx, backoff) {
			case shadowPromoted:
				return batch{}, promoted
			case shadowStop:
				return batch{}, stopLoop
			}
			select {
			case <-ctx.Done():
				return batch{}, stopLoop
			case <-time.After(promoteWait):
			}
			continue
		}
		if len(in.fetched) == 0 || in.more {
			ev, msgs, reply := in.wait(ctx, backoff, nil)
			switch ev {
			case gotDrain:
				return batch{drain: reply}, drainAsked
			case gotStop:
				return batch{}, stopLoop
			case gotWatermark, gotRetry:
				continue
			}
			var step shadowStep
			switch msgs, step = in.sift(ctx, after, msgs, len(in.fetched) == 0, backoff); step {
			case shadowPromoted:
				return batch{}, promoted
			case shadowStop:
				return batch{}, stopLoop
			case shadowFetch:
				continue
			}
			in.fetched = append(in.fetched, msgs...)
		}
		wait, err := in.cut(in.fetched)
		if err != nil {
			r.fail(err)
			return batch{}, stopLoop
		}
		if wait {
			in.fetched = in.rest
			continue
		}
		return in.input(batchCtx), runIt
	}
	return batch{}, stopLoop
}

func (in *shadowSource) committed(ctx context.Context, _ *engine.BatchReport) {
	in.r.ack(ctx, *in.last)
	in.fetched, in.last = in.rest, nil // a shadow runs the primary's batches only: no no-data batch
}

func (in *shadowSource) pending(ctx context.Context) (uint64, error) { return in.r.src.Pending(ctx) }

// close stops the prefetch and closes the reader of the input rows, when open.
func (in *shadowSource) close() {
	if in.rd != nil {
		in.rd.Close()
		in.rd = nil
	}
	in.stop()
}

// shadowBatch is one primary batch to run again: the messages of its manifests (its first
// chunk's and those of the chunks that continued it), and the first and last decoded.
type shadowBatch struct {
	msgs        []input.Msg
	first, last engine.Manifest
}

// shadowStep is what the loop does with a fetch once a shadow looked at it (see sift).
type shadowStep int

const (
	shadowAppend   shadowStep = iota // add the manifests to the pending ones and cut a batch
	shadowFetch                      // nothing to run: fetch again
	shadowPromoted                   // the shadow is promoted: the service runs it again as a primary
	shadowStop                       // a write of the state failed for good: the loop ends (see stopOnStateError)
)

// sift is what a shadow does with the manifests msgs of a fetch (idle: nothing pending):
// it drops those it ran already; with none while being promoted, it finishes the batch
// pending (the primary stopped between its chunks) or promotes; with none while idle, it
// checks that the primary is still deployed. It returns the manifests to add to the pending
// ones, and what the loop does next.
func (in *shadowSource) sift(ctx, after context.Context, msgs []input.Msg, idle bool, backoff *time.Duration) ([]input.Msg, shadowStep) {
	r := in.r
	if len(msgs) == 0 && r.rec.Promoting {
		if !in.more {
			return nil, r.promoteOrFault(ctx, backoff)
		}
		in.ended = true // the primary stopped between the chunks of a batch
	}
	msgs = in.dropRun(after, msgs)
	if idle && len(msgs) == 0 {
		in.checkPrimary(ctx)
		r.publishStatus(after, false) // what the last batches did, once the throttle lets it
		return nil, shadowFetch       // caught up with the primary: no batch of the shadow's own
	}
	return msgs, shadowAppend
}

// cut cuts the first primary batch out of the pending manifests (see cutShadow) for
// input, and sets what is left as the source's rest; wait tells that its last chunk is
// still to come (the rest is then all pending).
func (in *shadowSource) cut(pending []input.Msg) (wait bool, err error) {
	b, rest, more, err := cutShadow(pending, in.ended)
	in.more, in.ended, in.rest = more, false, rest
	if err != nil || more {
		return more, err
	}
	in.batch = b
	return false, nil
}

// shadowing tells whether r runs a shadow.
func (r *Runner) shadowing() bool { return r.rec.ShadowOf != "" }

// openShadowInput ensures the shadow's streams and creates its consumer of the primary's
// manifests (of its partition), returning the manifests stream's name (held: see
// startInput).
func (r *Runner) openShadowInput(ctx context.Context, t *timings, held <-chan error) (string, *input.Source, error) {
	if _, err := r.ensureStreams(ctx); err != nil {
		return "", nil, err
	}
	t.mark("input_streams")
	primary := r.rec.ShadowOf
	stream := topology.ManifestsStream(primary)
	src, err := input.NewSource(ctx, r.env.JS, stream, r.consumerName(), []string{topology.ManifestSubject(primary, r.part)}, r.sourceOptions(t, held)...)
	t.mark("input_consumer")
	if err != nil {
		return "", nil, fmt.Errorf("consumer of primary %s's batch manifests (stream %s): %w", primary, stream, err)
	}
	return stream, src, nil
}

// dropRun drops the manifests of msgs the shadow ran already (at or before its position:
// delivered again after a restart), acknowledging the last of them.
func (in *shadowSource) dropRun(ctx context.Context, msgs []input.Msg) []input.Msg {
	r := in.r
	pos := r.eng.Progress().Position
	i := 0
	for i < len(msgs) && msgs[i].Sequence <= pos {
		i++
	}
	if i > 0 {
		r.ack(ctx, msgs[i-1])
	}
	return msgs[i:]
}

// cutShadow returns the first primary batch in pending (its first chunk and the continued
// ones up to the one not open) and the rest; more tells that the batch's last chunk is not in
// pending yet (fetch more), unless ended says that no more will come (the primary stopped
// between two chunks): the batch is then what pending holds of it. Continued chunks that lead
// pending (of a batch whose first chunk the stream no longer holds) are dropped: there is
// nothing to run.
func cutShadow(pending []input.Msg, ended bool) (b shadowBatch, rest []input.Msg, more bool, err error) {
	start := 0
	for i := range pending {
		var m engine.Manifest
		if err := json.Unmarshal(pending[i].Data, &m); err != nil {
			return shadowBatch{}, nil, false, fmt.Errorf("manifest at sequence %d: %w", pending[i].Sequence, err)
		}
		if i == start && m.Continued {
			start = i + 1
			continue
		}
		if i == start {
			b.first = m
		}
		b.last = m
		if !m.Open {
			b.msgs = pending[start : i+1]
			return b, pending[i+1:], false, nil
		}
	}
	if ended && start < len(pending) {
		b.msgs = pending[start:]
		return b, nil, false, nil
	}
	return shadowBatch{}, pending[start:], true, nil
}

// input makes the batch of the primary batch cut last (see cut): its rows, read from
// the input stream, at the primary's processing time and watermark; its last manifest's
// message is the one to acknowledge.
func (in *shadowSource) input(ctx context.Context) batch {
	b := in.batch
	in.last = &b.msgs[len(b.msgs)-1]
	rows, err := in.rows(ctx, b.first)
	if err != nil {
		return batch{err: err}
	}
	nextW := b.last.NextWatermarkMs
	return batch{in: engine.BatchInput{ProcessingTimeMs: b.first.ProcessingTimeMs, Rows: rows, Position: in.last.Sequence, Drain: b.first.Drain, NextWatermarkMs: &nextW},
		last: in.last}
}

// rows reads the rows of the primary's batch man from the input stream.
func (in *shadowSource) rows(ctx context.Context, man engine.Manifest) ([]engine.Row, error) {
	r := in.r
	if man.Rows == 0 {
		return nil, nil
	}
	for attempt := 0; ; attempt++ {
		if in.rd == nil || man.FirstSequence < in.nextSeq {
			if err := in.openRows(ctx, man.FirstSequence); err != nil {
				return nil, err
			}
		}
		rows, err := history.Rows(ctx, in.rd, in.stream, r.spec, r.inputOf, man)
		if err == nil {
			in.nextSeq = man.LastSequence + 1
			return rows, nil
		}
		// The reader reads what the stream held when it was opened, and its consumer goes
		// after a minute without reads: open it again, once, before taking the rows as gone.
		in.rd.Close()
		in.rd = nil
		if attempt == 1 || ctx.Err() != nil {
			return nil, fmt.Errorf("rows of primary %s's batch %d: %w", r.rec.ShadowOf, man.Batch, err)
		}
	}
}

// openRows opens the shadow's reader of the input stream at sequence from.
func (in *shadowSource) openRows(ctx context.Context, from uint64) error {
	r := in.r
	if in.rd != nil {
		in.rd.Close()
		in.rd = nil
	}
	stream, filters, err := history.Input(ctx, r.env.JS, r.spec, r.inputOf, r.part)
	if err != nil {
		return err
	}
	rd, err := input.OpenStreamReader(ctx, r.env.JS, stream, filters, from)
	if err != nil {
		return err
	}
	in.stream, in.rd, in.nextSeq = stream, rd, from
	return nil
}

// promote, for a shadow being promoted whose partition ran every batch its primary recorded
// for it, moves the partition's position to the primary's input position (that of the
// primary's last recorded batch of the partition); once every partition did, it stores the
// record as a primary's, and the service restarts its partitions reading the input. It
// returns whether the record is stored; false with no error while batches or partitions are
// left.
//
// The steps are not atomic. The commit records, with the position, the input stream's
// creation time in place of the manifests stream's: a runner that opens a shadow being
// promoted whose state says so (promotionCommitted) skips the shadow's reconcile, whose
// position now counts in the input, and only waits for the others and stores the record. A
// partition that committed says so in its status (client.Status.Promoted), which is how the
// partitions, on whichever runtimes, learn that all did.
func (r *Runner) promote(ctx context.Context) (bool, error) {
	if !r.shadow.promoted {
		if done, err := r.commitPromotion(ctx); err != nil || !done {
			return false, err
		}
	}
	handovers := []registry.Handover{r.shadow.handover}
	if r.parts > 1 {
		var all bool
		var err error
		if handovers, all, err = r.partitionsPromoted(ctx); err != nil || !all {
			r.publishStatus(ctx, false) // promoted, as often as the throttle lets it (a lost put heals)
			return false, err
		}
	}
	primary := r.rec.ShadowOf
	rec := r.rec
	rec.ShadowOf, rec.ShadowSpec, rec.Promoting, rec.PrimaryHandovers = "", nil, false, nil
	rec.InputOf, rec.Handovers = r.inputOf, handovers
	rec.DeployedAt = time.Now().UTC()
	if _, err := r.env.Registry.Update(ctx, rec); err != nil {
		// Another partition may have stored it first.
		if cur, gerr := r.env.Registry.Get(ctx, rec.Name); gerr == nil && cur.ShadowOf == "" {
			return true, nil
		}
		return false, fmt.Errorf("promoting: storing %s as a primary: %w", rec.Name, err)
	}
	r.logger.Info("shadow promoted: it reads the input from the old primary's position on", "old_primary", primary)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for q := range r.parts {
		if err := r.env.JS.DeleteConsumer(dctx, topology.ManifestsStream(primary), topology.PartitionConsumer(r.spec.Name, q, r.parts)); err != nil {
			r.logger.Warn("deleting a consumer of the old primary's manifests failed", "partition", q, "err", err)
		}
	}
	return true, nil
}

// commitPromotion is promote's first step for r's partition: once it ran every batch the
// primary recorded for it, it commits the primary's input position; it tells whether it did.
func (r *Runner) commitPromotion(ctx context.Context) (bool, error) {
	primary := r.rec.ShadowOf
	mstream, err := r.env.JS.Stream(ctx, topology.ManifestsStream(primary))
	if err != nil {
		return false, fmt.Errorf("promoting: primary %s's manifests stream: %w", primary, err)
	}
	p, err := r.ks.Progress()
	if err != nil {
		return false, err
	}
	// The primary's input position: its last manifest's of the partition, unless the
	// primary is itself a promoted shadow that recorded no batch of the partition since its
	// promotion (its manifests then count in its old primary's manifests stream).
	h, handedOver := r.primaryHandover()
	var position uint64
	raw, err := mstream.GetLastMsgForSubject(ctx, topology.ManifestSubject(primary, r.part))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		// The primary recorded no batch of the partition: it goes on from the start, or
		// where the primary took the partition over.
		position = h.Position
	case err != nil:
		return false, fmt.Errorf("promoting: primary %s's last manifest of partition %d: %w", primary, r.part, err)
	case p.Position < raw.Sequence:
		return false, nil
	default:
		var m engine.Manifest
		if err := json.Unmarshal(raw.Data, &m); err != nil {
			return false, fmt.Errorf("promoting: primary %s's last manifest (sequence %d): %w", primary, raw.Sequence, err)
		}
		position = m.Position
		if handedOver && m.Batch <= h.Batch {
			position = h.Position
		}
	}
	created, err := r.inputCreated(ctx)
	if err != nil {
		return false, err
	}
	b := r.ks.NewBatch(p.BatchID + 1)
	b.SetInputCreated(created)
	b.SetProgress(p.WatermarkMs, position)
	if p.Generation != 0 {
		b.SetGeneration(p.Generation)
	}
	if p.Open.Active {
		b.SetOpen(p.Open)
	}
	if _, err := b.Commit(); err != nil {
		return false, err
	}
	if r.parts > 1 && r.spec.EventTime != nil {
		// The partitions' shared watermark goes on from the primary's records, not from
		// none (which would let each partition's first batches move it alone).
		if wm, err := r.deps.Watermarks(ctx); err != nil {
			r.logger.Warn("adopting the primary's watermark records failed", "err", err)
		} else if err := wm.Adopt(ctx, primary, r.spec.Name, r.part); err != nil {
			r.logger.Warn("adopting the primary's watermark record failed", "err", err)
		}
	}
	r.setPromoted(registry.Handover{Partition: r.part, Batch: p.BatchID + 1, Position: position})
	r.logger.Info("shadow's partition takes over its primary's input position", "old_primary", primary, "position", position)
	return true, nil
}

// primaryHandover is where the primary took r's partition over, when the primary is a
// promoted shadow (registry.Record.PrimaryHandovers).
func (r *Runner) primaryHandover() (registry.Handover, bool) {
	for _, h := range r.rec.PrimaryHandovers {
		if h.Partition == r.part {
			return h, true
		}
	}
	return registry.Handover{}, false
}

// setPromoted notes that r's partition committed its promotion at h (see promote), in its
// status too.
func (r *Runner) setPromoted(h registry.Handover) {
	r.shadow.promoted, r.shadow.handover = true, h
	r.report.setPromoted(h)
	if r.eng != nil {
		r.publishStatus(context.Background(), true)
	}
}

// partitionsPromoted tells whether every partition of the shadow committed its promotion,
// by their statuses (see promote), and returns where each took over, in partition order; it
// looks at most every primaryCheckEvery.
func (r *Runner) partitionsPromoted(ctx context.Context) ([]registry.Handover, bool, error) {
	in := r.shadow
	if time.Since(in.checkedAt) < primaryCheckEvery {
		return nil, false, nil
	}
	in.checkedAt = time.Now()
	handovers := []registry.Handover{in.handover}
	for q := range r.parts {
		if q == r.part {
			continue
		}
		doc, err := r.env.Registry.GetStatus(ctx, topology.Keyspace(r.spec.Name, q, r.parts))
		if errors.Is(err, registry.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		var st client.Status
		if err := json.Unmarshal(doc, &st); err != nil {
			return nil, false, fmt.Errorf("promoting: status of partition %d: %w", q, err)
		}
		if !st.Promoted || st.ShadowOf != r.rec.ShadowOf || !st.DeployedAt.Equal(r.rec.DeployedAt) {
			return nil, false, nil
		}
		handovers = append(handovers, registry.Handover{Partition: q, Batch: st.PromotedBatch, Position: st.PromotedPosition})
	}
	slices.SortFunc(handovers, func(a, b registry.Handover) int { return a.Partition - b.Partition })
	return handovers, true, nil
}

// inputCreated is the creation time of the shadow's input stream (UnixNano), as a primary's
// progress records it.
func (r *Runner) inputCreated(ctx context.Context) (int64, error) {
	in, _, err := history.Input(ctx, r.env.JS, r.spec, r.inputOf, r.part)
	if err != nil {
		return 0, err
	}
	st, err := r.env.JS.Stream(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("promoting: input stream %s: %w", in, err)
	}
	return st.CachedInfo().Created.UnixNano(), nil
}

// promotionCommitted tells whether the shadow's state holds a promotion's commit: its input
// position counts in the input stream (see promote). When it does, it notes the partition
// promoted (shadowSource.promoted and handover: the last batch committed is the promotion's).
func (r *Runner) promotionCommitted(ctx context.Context) (bool, error) {
	p, err := r.ks.Progress()
	if err != nil {
		return false, err
	}
	created, err := r.inputCreated(ctx)
	if err != nil {
		return false, err
	}
	if p.InputCreated == 0 || p.InputCreated != created {
		return false, nil
	}
	r.shadow.promoted, r.shadow.handover = true, registry.Handover{Partition: r.part, Batch: p.BatchID, Position: p.Position}
	return true, nil
}

// promoteOrFault runs promote and tells the loop what next: shadowPromoted once it stored
// the record, shadowStop after a write of the state failed for good (see
// stopOnStateError), else shadowFetch: another error goes to the status (see fault) and the
// promotion is tried again.
func (r *Runner) promoteOrFault(ctx context.Context, backoff *time.Duration) shadowStep {
	done, err := r.promote(ctx)
	switch {
	case done:
		return shadowPromoted
	case err != nil && r.stopOnStateError(err):
		return shadowStop
	case err != nil:
		r.fault(ctx, err, backoff)
	}
	return shadowFetch
}

// promoteWait is how long a partition that committed its promotion waits before it looks
// again whether the others did (partitionsPromoted looks at most every primaryCheckEvery).
const promoteWait = 500 * time.Millisecond

// primaryCheckEvery is how often an idle shadow looks whether its primary is still deployed.
const primaryCheckEvery = 2 * time.Second

// checkPrimary, for a shadow that ran every batch its primary recorded, looks (at most every
// primaryCheckEvery) whether the primary is still deployed: a primary undeployed without a
// promote records no more batches, and the shadow would wait for them without a word, so its
// status says so.
func (in *shadowSource) checkPrimary(ctx context.Context) {
	r := in.r
	if time.Since(in.checkedAt) < primaryCheckEvery {
		return
	}
	in.checkedAt = time.Now()
	_, err := r.env.Registry.Get(ctx, r.rec.ShadowOf)
	switch gone := errors.Is(err, registry.ErrNotFound); {
	case gone && !in.gone:
		r.SetError(fmt.Errorf("primary %s is no longer deployed: the shadow ran every batch it recorded and waits; promote it (groupstate promote %s) or undeploy it", r.rec.ShadowOf, r.spec.Name))
	case !gone && err == nil && in.gone:
		r.report.clearError()
	}
	if err == nil || errors.Is(err, registry.ErrNotFound) {
		in.gone = errors.Is(err, registry.ErrNotFound)
	}
}
