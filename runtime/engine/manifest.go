package engine

import (
	"encoding/json"

	"github.com/groupstate/groupstate/state"
)

// Manifest is what a committed batch records of itself with [Config.Manifests] (an outbox
// entry of kind state.OutboxManifest, its payload this struct in JSON): what it read and the
// time it ran at, all that is needed to run it again and get the same state and outputs.
// Batch ids are those of the engine's commits; a batch whose timeouts commit in chunks
// (see [Engine.RunBatch]) records a manifest per chunk, the later ones with Continued set,
// which running the first one again reproduces.
type Manifest struct {
	// Batch is the commit's batch id.
	Batch uint64 `json:"batch"`
	// ProcessingTimeMs is the batch's processing time T, WatermarkMs the watermark it ran
	// at, and NextWatermarkMs the watermark it committed (the next batch's), in epoch
	// milliseconds (docs/semantics.md, "A micro-batch").
	ProcessingTimeMs int64 `json:"processing_time_ms"`
	WatermarkMs      int64 `json:"watermark_ms"`
	NextWatermarkMs  int64 `json:"next_watermark_ms"`
	// Rows is the number of input rows; FirstSequence and LastSequence the smallest and the
	// largest input stream sequence among them (0 without rows, or when the rows had none).
	Rows          int    `json:"rows"`
	FirstSequence uint64 `json:"first_sequence,omitempty"`
	LastSequence  uint64 `json:"last_sequence,omitempty"`
	// Position is the input position the batch committed (BatchInput.Position, or the one
	// before it when the batch gave none).
	Position uint64 `json:"position"`
	// HadState tells that the deployment held state (a key with a value or a timeout) when
	// the batch began: a replay that starts at a batch without it starts from empty state.
	HadState bool `json:"had_state,omitempty"`
	// Continued marks a later chunk of a batch (no rows of its own), Open a chunk after which
	// more of its batch follows, and Drain a draining batch (BatchInput.Drain).
	Continued bool `json:"continued,omitempty"`
	Open      bool `json:"open,omitempty"`
	Drain     bool `json:"drain,omitempty"`
}

// newManifest starts the manifest of a batch of in (its first chunk), run after the commit
// that wrote p.
func newManifest(in BatchInput, p state.Progress) Manifest {
	m := Manifest{Rows: len(in.Rows), Drain: in.Drain, HadState: p.Keys > 0 || p.TimerKeys > 0}
	for i := range in.Rows {
		if q := in.Rows[i].Sequence; q != 0 {
			if m.FirstSequence == 0 || q < m.FirstSequence {
				m.FirstSequence = q
			}
			m.LastSequence = max(m.LastSequence, q)
		}
	}
	return m
}

// appendManifest adds the chunk's manifest to its outbox, to commit with position and, when
// more chunks follow, the batch left open.
func (b *batch) appendManifest(position uint64, more bool) {
	m := b.man
	m.Batch, m.ProcessingTimeMs, m.WatermarkMs, m.NextWatermarkMs = b.id, b.T, b.W, b.nextW
	if more {
		m.NextWatermarkMs = b.W // the watermark moves with the last chunk
	}
	m.Position, m.Open = position, more
	if position == 0 {
		m.Position = b.e.progress.Position
	}
	payload, _ := json.Marshal(m) // a struct of numbers and booleans: cannot fail
	b.append(state.OutboxEntry{Kind: state.OutboxManifest, Payload: payload})
}
