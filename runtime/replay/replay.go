// Package replay runs a deployment's recorded history again, against the module it runs or a
// new one, and compares the outputs with those the deployment published.
//
// Every batch a deployment commits records its manifest (engine.Manifest) on the deployment's
// manifests stream: the input sequences it read, its processing time T and its watermarks.
// Modules are deterministic (abi/README.md, "Determinism"), so running the recorded batches
// again, with their rows fetched from the input stream by sequence and at their T and
// watermark, gives the same state and outputs; a changed module gives what it would have
// emitted on the same history. [Run] does that in an isolated store, from the deployment's
// first batch (state empty), and compares, batch by batch and key by key, the new outputs
// with the ones on the deployment's output stream.
package replay

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/history"
	"github.com/groupstate/groupstate/runtime/spec"
)

// Errors of [Run] and [Diff].
var (
	// ErrNoHistory: the deployment has no recorded batch to replay.
	ErrNoHistory = errors.New("replay: no recorded batch")
	// ErrHistoryGone: a stream no longer holds what the replay needs (its retention removed
	// it); the message names the first missing sequence.
	ErrHistoryGone = history.ErrGone
	// ErrIncomplete is an Options value missing.
	ErrIncomplete = errors.New("replay: JS, Spec and Module are required")
	// ErrDiffIncomplete is a DiffOptions value missing.
	ErrDiffIncomplete = errors.New("replay: JS, Primary and Shadow are required")
	// ErrNotShadow: [Diff]'s shadow cannot be a shadow of its primary (the same name, or
	// another number of partitions).
	ErrNotShadow = errors.New("replay: not a shadow")
)

// Options configures [Run].
type Options struct {
	// JS is a JetStream context of the deployment's NATS. Required.
	JS jetstream.JetStream
	// Spec is the spec the deployment runs with (client.Deployment.RunSpec: a shadow's
	// publishes on its shadow subjects). Required.
	Spec *spec.Spec
	// InputOf names the deployment whose input-side streams the deployment reads, when not
	// its own (client.Deployment.InputOf: a shadow's primary, kept once it is promoted).
	InputOf string
	// InitialState is the initial state the deployment started from (deploy
	// --initial-state: client.Client.InitialState, parsed with engine.ParseInitialState),
	// applied in each partition's first batch when the replay starts from empty state; nil:
	// none.
	InitialState *engine.InitialState
	// Module is the module to run the history with (the deployment's own, or a new one).
	// Required.
	Module []byte
	// Keys, when not empty, limits the comparison to these keys (canonical JSON keys, as
	// client.KeyFromArg makes them). Every key still runs: state is not per-key isolated
	// from the watermark.
	Keys [][]byte
	// FromBatch and ToBatch limit the comparison to the batches whose ids lie between them
	// (0: no bound); Since, when > 0, to the batches that ran at most Since before the last
	// recorded one. The batches before still run, to make the state the compared ones start
	// from.
	FromBatch, ToBatch uint64
	Since              time.Duration
	// Progress, when set, is called after each batch with the batches run and their total.
	Progress func(done, total int)
	// Dir is the directory of the isolated state store (default: a temporary directory,
	// removed when Run returns).
	Dir string
	// Logger receives the engine's logs. Default: discarded.
	Logger *slog.Logger
	// CacheDir is the directory of an on-disk compilation cache (engine.Options.CacheDir),
	// so that a module compiled before (by the CLI, or an earlier replay) is not compiled
	// again. Default: an in-memory cache.
	CacheDir string
}

// Report is the outcome of a [Run] or a [Diff].
type Report struct {
	// Batches is the number of batches run, Compared of those compared, Rows the input rows
	// run. For a [Diff], Batches and Compared are the shadow's batches compared and Rows
	// their input rows.
	Batches  int `json:"batches"`
	Compared int `json:"compared_batches"`
	Rows     int `json:"input_rows"`
	// Keys is the number of keys with outputs in the compared batches (old or new).
	Keys int `json:"keys"`
	// Output rows of the compared batches, per key in emission order: Equal rows are the same
	// bytes at the same place, Changed rows differ, OnlyOld rows the deployment published and
	// the replay did not emit, OnlyNew the other way.
	Equal   int `json:"equal"`
	Changed int `json:"changed"`
	OnlyOld int `json:"only_old"`
	OnlyNew int `json:"only_new"`
	// Differences lists every batch and key whose rows differ, in batch and key order.
	Differences []Difference `json:"differences"`
	// FromSnapshots lists the partitions whose replay started from a snapshot of the
	// deployment's state (see [Run]); the others started from empty state.
	FromSnapshots []SnapshotStart `json:"from_snapshots,omitempty"`
}

// Same reports whether the replay emitted exactly what the deployment published.
func (r *Report) Same() bool { return r.Changed == 0 && r.OnlyOld == 0 && r.OnlyNew == 0 }

// Difference is a batch and key whose output rows differ.
type Difference struct {
	// Partition and Batch are the recorded batch (its id in the partition's history; for a
	// [Diff], the primary's batch); Key its canonical JSON key.
	Partition int             `json:"partition"`
	Batch     uint64          `json:"batch"`
	Key       json.RawMessage `json:"key"`
	// Old are the rows the deployment published, New the rows the replay emitted (for a
	// [Diff], the primary's and the shadow's).
	Old []json.RawMessage `json:"old"`
	New []json.RawMessage `json:"new"`
}

// compareBatch adds the comparison of a batch's outputs, old and new by key, to the report:
// of every key either has (only those of keys when it is not empty), in key order.
func (r *Report) compareBatch(part int, batch uint64, keys [][]byte, old, new map[string][][]byte) {
	all := map[string]bool{}
	for k := range old {
		all[k] = true
	}
	for k := range new {
		all[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		if len(keys) > 0 && !slices.ContainsFunc(keys, func(want []byte) bool { return string(want) == k }) {
			continue
		}
		r.Keys++
		r.compare(part, batch, []byte(k), old[k], new[k])
	}
}

// compare adds the comparison of a batch's rows of one key to the report.
func (r *Report) compare(part int, batch uint64, key []byte, old, new [][]byte) {
	d := Difference{Partition: part, Batch: batch, Key: json.RawMessage(key)}
	differs := false
	for i := range max(len(old), len(new)) {
		switch {
		case i >= len(new):
			r.OnlyOld++
			differs = true
		case i >= len(old):
			r.OnlyNew++
			differs = true
		case bytes.Equal(old[i], new[i]):
			r.Equal++
		default:
			r.Changed++
			differs = true
		}
	}
	if !differs {
		return
	}
	for _, o := range old {
		d.Old = append(d.Old, json.RawMessage(o))
	}
	for _, n := range new {
		d.New = append(d.New, json.RawMessage(n))
	}
	r.Differences = append(r.Differences, d)
}

// sortDifferences puts r.Differences in partition, batch and key order.
func (r *Report) sortDifferences() {
	slices.SortFunc(r.Differences, func(a, b Difference) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Batch, b.Batch), bytes.Compare(a.Key, b.Key))
	})
}
