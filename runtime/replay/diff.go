package replay

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
)

// DiffOptions configures [Diff].
type DiffOptions struct {
	// JS is a JetStream context of the deployments' NATS. Required.
	JS jetstream.JetStream
	// Primary is the primary deployment's spec, Shadow the spec its shadow runs with
	// (client.Deployment.RunSpec: its outputs on the shadow subjects). Required.
	Primary, Shadow *spec.Spec
	// Keys, when not empty, limits the comparison to these keys (canonical JSON keys, as
	// client.KeyFromArg makes them).
	Keys [][]byte
	// Since, when > 0, limits the comparison to the shadow's batches that ran at most Since
	// (of processing time) before its last recorded one.
	Since time.Duration
	// Logger receives warnings about batches that cannot be compared. Default: discarded.
	Logger *slog.Logger
}

// Diff compares the outputs a shadow deployment published with its primary's, batch by
// batch and key by key. Nothing runs: both recorded their batches' manifests, and the
// shadow ran each of the primary's batches again as one batch of its own, committing as its
// input position the sequence, in the primary's manifests stream, of the last manifest
// (chunk) of that batch. So each of the shadow's batches is aligned with the primary's batch
// whose manifests hold the sequence its first chunk's Position names, and the outputs of
// every chunk of the one are compared with those of every chunk of the other ("old" are the
// primary's, "new" the shadow's; Difference.Batch is the primary's batch id).
//
// Only batches both ran are compared: the primary's batches the shadow has not reached yet
// (or that ran before the shadow started) are left out. The report's Batches and Compared
// count the shadow's batches compared, Rows their input rows. A shadow that recorded no
// batch yet is [ErrNoHistory]; a shadow batch whose primary manifest is no longer kept is
// skipped with a warning to opts.Logger. The outputs of a batch that has just committed may
// not be published yet: its comparison may show rows only on one side.
func Diff(ctx context.Context, opts DiffOptions) (*Report, error) {
	if opts.JS == nil || opts.Primary == nil || opts.Shadow == nil {
		return nil, ErrDiffIncomplete
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	pr, sh := opts.Primary, opts.Shadow
	switch {
	case pr.Name == sh.Name:
		return nil, fmt.Errorf("%w: %s cannot shadow itself", ErrNotShadow, pr.Name)
	case max(pr.Partitions, 1) != max(sh.Partitions, 1):
		return nil, fmt.Errorf("%w: %s has partitions %d and %s %d", ErrNotShadow, pr.Name, pr.Partitions, sh.Name, sh.Partitions)
	}
	parts := max(pr.Partitions, 1)
	// The shadow's history first: every primary manifest its positions name was stored
	// before it, so reading the primary's after finds them all.
	shHist, prHist := make([][]batch, parts), make([][]batch, parts)
	total := 0
	for p := range parts {
		var err error
		if shHist[p], err = readHistory(ctx, opts.JS, sh.Name, p); err != nil {
			return nil, err
		}
		total += len(shHist[p])
	}
	if total == 0 {
		return nil, fmt.Errorf("%w: shadow %s has recorded no batch yet on stream %s", ErrNoHistory, sh.Name, topology.ManifestsStream(sh.Name))
	}
	for p := range parts {
		var err error
		if prHist[p], err = readHistory(ctx, opts.JS, pr.Name, p); err != nil {
			return nil, err
		}
	}
	al := align(prHist, shHist, opts)
	rep := &Report{}
	if len(al.pairs) == 0 {
		return rep, nil
	}
	out, err := openPublished()
	if err != nil {
		return nil, err
	}
	defer out.close()
	if err := readOutputs(ctx, opts.JS, pr.Name, pr.Output.Subject, pr.Output.Stream, parts, al.primaryIDs, al.since, out, sideOld); err != nil {
		return nil, err
	}
	if err := readOutputs(ctx, opts.JS, sh.Name, sh.Output.Subject, sh.Output.Stream, parts, al.shadowIDs, al.since, out, sideNew); err != nil {
		return nil, err
	}
	for _, pa := range al.pairs {
		var ids []uint64
		for _, b := range pa.shadow {
			ids = append(ids, b.ids...)
			rep.Batches++
			rep.Compared++
			rep.Rows += b.Rows
		}
		old, err := out.of(sideOld, pa.part, pa.primary.ids)
		if err != nil {
			return nil, err
		}
		got, err := out.of(sideNew, pa.part, ids)
		if err != nil {
			return nil, err
		}
		rep.compareBatch(pa.part, pa.primary.Batch, opts.Keys, old, got)
	}
	rep.sortDifferences()
	return rep, nil
}

// pair is a primary's batch and the shadow's batches that ran it again (one, unless the
// shadow committed more batches at the same position).
type pair struct {
	part    int
	primary *batch
	shadow  []*batch
}

// alignment is the batches [Diff] compares.
type alignment struct {
	// pairs are in partition, then primary batch, order.
	pairs []pair
	// primaryIDs and shadowIDs are the ids of the compared batches' chunks, per partition.
	primaryIDs, shadowIDs []map[uint64]bool
	// since is the earliest processing time of a compared batch (epoch ms).
	since int64
}

// align pairs the shadow's batches (those within opts.Since of its last) with the primary's
// batches they ran again, through their positions (see [Diff]).
func align(prHist, shHist [][]batch, opts DiffOptions) alignment {
	var last int64
	for _, h := range shHist {
		for _, b := range h {
			last = max(last, b.ProcessingTimeMs)
		}
	}
	al := alignment{primaryIDs: make([]map[uint64]bool, len(prHist)), shadowIDs: make([]map[uint64]bool, len(shHist)), since: last}
	for p := range shHist {
		al.primaryIDs[p], al.shadowIDs[p] = map[uint64]bool{}, map[uint64]bool{}
		bySeq := map[uint64]int{} // primary manifest sequence: index of its batch in prHist[p]
		for i, b := range prHist[p] {
			for _, seq := range b.seqs {
				bySeq[seq] = i
			}
		}
		byPrimary := map[int]int{} // index in prHist[p]: index of its pair in al.pairs
		skipped := 0
		for i := range shHist[p] {
			b := &shHist[p][i]
			if opts.Since > 0 && b.ProcessingTimeMs < last-opts.Since.Milliseconds() {
				continue
			}
			pi, ok := bySeq[b.Position]
			if !ok {
				if skipped++; skipped == 1 {
					opts.Logger.Warn("replay: a shadow batch ran a primary batch whose manifest is no longer kept: not compared",
						"shadow", opts.Shadow.Name, "partition", p, "batch", b.Batch, "primary_manifest_sequence", b.Position)
				}
				continue
			}
			j, ok := byPrimary[pi]
			if !ok {
				j = len(al.pairs)
				byPrimary[pi] = j
				al.pairs = append(al.pairs, pair{part: p, primary: &prHist[p][pi]})
				for _, id := range prHist[p][pi].ids {
					al.primaryIDs[p][id] = true
				}
			}
			al.pairs[j].shadow = append(al.pairs[j].shadow, b)
			for _, id := range b.ids {
				al.shadowIDs[p][id] = true
			}
			al.since = min(al.since, b.ProcessingTimeMs)
		}
		if skipped > 1 {
			opts.Logger.Warn("replay: shadow batches not compared: their primary batches' manifests are no longer kept",
				"shadow", opts.Shadow.Name, "partition", p, "batches", skipped)
		}
	}
	slices.SortStableFunc(al.pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.part, b.part), cmp.Compare(a.primary.Batch, b.primary.Batch))
	})
	return al
}
