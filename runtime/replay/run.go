package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/state"
)

// Run replays the deployment's recorded history with opts.Module and compares its outputs
// with the deployment's (see the package documentation). Each partition's history runs from
// its oldest recorded batch, which must have run on empty state (the deployment's first
// batch, or the first after its state was reset), or, for a replicated deployment, from the
// newest snapshot of its state from which the recorded batches run on: when the oldest
// recorded batch ran on state (its first batches' manifests are no longer kept), and also
// when the comparison starts later (FromBatch, Since), a snapshot taken before the first
// compared batch, which saves running the batches before it (Report.FromSnapshots lists
// them; the module then starts from state its predecessor made, as a redeploy would).
// Without either, Run fails with [ErrHistoryGone], as it does when the input stream no
// longer holds rows of a batch it runs. (A deploy --reset-state emptied the deployment's
// state without a batch: a replay over it keeps the state it made, so replay the history
// after it only once the batches before it are no longer kept.)
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.JS == nil || opts.Spec == nil || opts.Module == nil {
		return nil, ErrIncomplete
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sp := opts.Spec
	parts := max(sp.Partitions, 1)
	hist := make([][]batch, parts)
	total := 0
	for p := range parts {
		var err error
		if hist[p], err = readHistory(ctx, opts.JS, sp.Name, p); err != nil {
			return nil, err
		}
		total += len(hist[p])
	}
	if total == 0 {
		return nil, fmt.Errorf("%w: deployment %s has no batch manifest on stream %s", ErrNoHistory, sp.Name, topology.ManifestsStream(sp.Name))
	}
	wanted, since := markCompared(hist, opts)
	old, err := openPublished()
	if err != nil {
		return nil, err
	}
	defer old.close()
	if err := readOutputs(ctx, opts.JS, sp.Name, sp.Output.Subject, sp.Output.Stream, parts, wanted, since, old, sideOld); err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "groupstate-replay-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	st, err := state.Open(dir, &state.Options{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rt, err := engine.New(engine.Options{Logger: opts.Logger, CacheDir: opts.CacheDir})
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	r := &replayer{opts: opts, rt: rt, store: st, rep: &Report{}, total: total, old: old}
	for p := range parts {
		if err := r.partition(ctx, p, hist[p]); err != nil {
			return nil, err
		}
	}
	r.rep.sortDifferences()
	return r.rep, nil
}

// batch is a recorded batch: its manifests (the first chunk's, and those of the chunks that
// continued it).
type batch struct {
	engine.Manifest          // the first chunk's
	ids             []uint64 // of every chunk
	seqs            []uint64 // of every chunk's manifest in the manifests stream
	nextW           int64    // the watermark its last chunk committed
	compared        bool
}

// readHistory reads partition p's recorded batches, in order.
func readHistory(ctx context.Context, js jetstream.JetStream, deployment string, p int) ([]batch, error) {
	name := topology.ManifestsStream(deployment)
	if _, err := js.Stream(ctx, name); errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: deployment %s has no manifests stream %s (deployed with a runtime that did not record manifests?)", ErrNoHistory, deployment, name)
	} else if err != nil {
		return nil, err
	}
	rd, err := input.OpenStreamReader(ctx, js, name, []string{topology.ManifestSubject(deployment, p)}, 0)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var hist []batch
	for {
		m, ok, err := rd.Next(ctx)
		if err != nil || !ok {
			return hist, err
		}
		var man engine.Manifest
		if err := json.Unmarshal(m.Data, &man); err != nil {
			return nil, fmt.Errorf("replay: manifest at sequence %d of %s: %w", m.Sequence, name, err)
		}
		switch {
		case man.Continued && len(hist) > 0:
			b := &hist[len(hist)-1]
			b.ids, b.seqs, b.nextW = append(b.ids, man.Batch), append(b.seqs, m.Sequence), man.NextWatermarkMs
		case man.Continued:
			// The rest of a batch whose first chunk is no longer kept: nothing to run.
		default:
			hist = append(hist, batch{Manifest: man, ids: []uint64{man.Batch}, seqs: []uint64{m.Sequence}, nextW: man.NextWatermarkMs})
		}
	}
}

// markCompared marks the batches whose outputs are compared (opts' bounds) and returns their
// ids per partition and the processing time of the earliest (its outputs were published
// after it).
func markCompared(hist [][]batch, opts Options) (wanted []map[uint64]bool, since int64) {
	var last int64
	for _, h := range hist {
		for _, b := range h {
			last = max(last, b.ProcessingTimeMs)
		}
	}
	since = last
	wanted = make([]map[uint64]bool, len(hist))
	for p, h := range hist {
		wanted[p] = map[uint64]bool{}
		for i := range h {
			b := &h[i]
			b.compared = (opts.FromBatch == 0 || b.Batch >= opts.FromBatch) && (opts.ToBatch == 0 || b.Batch <= opts.ToBatch) &&
				(opts.Since <= 0 || b.ProcessingTimeMs >= last-opts.Since.Milliseconds())
			if b.compared {
				for _, id := range b.ids {
					wanted[p][id] = true
				}
				since = min(since, b.ProcessingTimeMs)
			}
		}
	}
	return wanted, since
}

// readOutputs reads the outputs deployment published on subject (stored in stream, or when
// it is "", in the stream that captures subject) of the wanted batches (per partition: the
// partition of each output's key, among parts), from the messages stored at processing time
// since (epoch ms) on, into out as side. Outputs of other deployments on the same subject are
// skipped, and so are those published again (same message id).
func readOutputs(ctx context.Context, js jetstream.JetStream, deployment, subject, stream string, parts int, wanted []map[uint64]bool, since int64, out *published, side byte) error {
	name := stream
	if name == "" {
		var err error
		if name, err = js.StreamNameBySubject(ctx, subject); err != nil {
			return fmt.Errorf("replay: the stream of output subject %s: %w", subject, err)
		}
	}
	rd, err := input.OpenStreamReaderAt(ctx, js, name, []string{subject}, time.UnixMilli(since).Add(-clockSkew))
	if err != nil {
		return err
	}
	defer rd.Close()
	for {
		m, ok, err := rd.Next(ctx)
		if err != nil || !ok {
			return err
		}
		if m.Header.Get(output.HeaderDeployment) != deployment {
			continue
		}
		id, err := strconv.ParseUint(m.Header.Get(output.HeaderBatch), 10, 64)
		if err != nil {
			return fmt.Errorf("replay: output at sequence %d of %s has no batch id: %w", m.Sequence, name, err)
		}
		key := m.Header.Get(output.HeaderKey)
		p := partition.Of([]byte(key), parts)
		if !wanted[p][id] {
			continue
		}
		if msgID := m.Header.Get(jetstream.MsgIDHeader); msgID != "" {
			first, err := out.firstSeen(side, msgID)
			if err != nil {
				return err
			}
			if !first {
				continue // published again after the duplicate window
			}
		}
		if err := out.add(side, p, id, key, m.Data); err != nil {
			return err
		}
	}
}

// clockSkew is how far behind the runtime's clock (which gave a batch its processing time) the
// NATS server's clock (which stamps the outputs it stores) may be: outputs are read from the
// earliest compared batch's processing time less this.
const clockSkew = 10 * time.Minute

// timeOf formats a batch's processing time for messages.
func timeOf(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
