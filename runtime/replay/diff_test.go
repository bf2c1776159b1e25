package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/changelog"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/replay"
	"github.com/groupstate/groupstate/runtime/spec"
)

const clicksSpec = `
name: clicks
module: unused.wasm
input: {subjects: ["clicks.>"]}
key: {field: user_id}
timeout: processing_time
output: {subject: clicks.out, stream: CLICKS_OUT}
`

const clicksV2Spec = `
name: clicks-v2
module: unused.wasm
input: {subjects: ["clicks.>"]}
key: {field: user_id}
timeout: processing_time
output: {subject: clicks.out, stream: CLICKS_OUT}
`

// out is an output row of a synthetic batch: of its chunk'th chunk (0: the first), of key (a
// canonical JSON key).
type out struct {
	chunk    int
	key, row string
}

// o is an output row of a batch's first chunk.
func o(key, row string) out { return out{key: key, row: row} }

// step is a batch of a synthetic history: the primary's, in chunks, and the shadow's run of
// it, unless the shadow lags.
type step struct {
	at           time.Duration // processing time, after the history's start
	rows         int
	chunks       int   // of the primary's batch (0: one)
	shadowChunks int   // of the shadow's batch (0: one)
	old, new     []out // what the primary and the shadow published
	lag          bool  // the shadow has not run it yet
}

// same is a step with rows input rows at at whose outputs are outs on both sides.
func same(at time.Duration, rows int, outs ...out) step {
	return step{at: at, rows: rows, old: outs, new: outs}
}

// diffEnv is an embedded NATS with the streams of a primary and its shadow, and no runtime:
// tests publish the history the runtimes would have.
type diffEnv struct {
	t               *testing.T
	js              jetstream.JetStream
	primary, shadow *spec.Spec
	msgID           int
}

func newDiffEnv(t *testing.T) *diffEnv {
	t.Helper()
	_, js := startNATS(t)
	primary := parseSpec(t, clicksSpec)
	e := &diffEnv{t: t, js: js, primary: primary, shadow: parseSpec(t, clicksV2Spec).AsShadowOf(primary)}
	ctx := context.Background()
	for _, name := range []string{e.primary.Name, e.shadow.Name} {
		_, err := changelog.EnsureManifestsStream(ctx, js, name, 1, 0)
		testutil.Require(t, err)
	}
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: e.primary.Output.Stream, Subjects: []string{e.primary.Output.Subject}})
	testutil.Require(t, err)
	// The shadow's spec names no stream: Diff finds the one that captures its subject.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "CLICKS_V2_SHADOW_OUT", Subjects: []string{e.shadow.Output.Subject}})
	testutil.Require(t, err)
	return e
}

// manifest publishes m on deployment's manifests subject of partition 0 and returns its
// sequence in the manifests stream.
func (e *diffEnv) manifest(deployment string, m engine.Manifest) uint64 {
	b, err := json.Marshal(m)
	testutil.Require(e.t, err)
	ack, err := e.js.Publish(context.Background(), topology.ManifestSubject(deployment, 0), b)
	testutil.Require(e.t, err)
	return ack.Sequence
}

// output publishes row as an output of key of deployment's batch on subject.
func (e *diffEnv) output(deployment, subject string, batch uint64, key, row string) {
	e.msgID++
	msg := &nats.Msg{Subject: subject, Data: []byte(row), Header: nats.Header{}}
	msg.Header.Set(output.HeaderDeployment, deployment)
	msg.Header.Set(output.HeaderBatch, strconv.FormatUint(batch, 10))
	msg.Header.Set(output.HeaderKey, key)
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s-%d", deployment, e.msgID))
	_, err := e.js.PublishMsg(context.Background(), msg)
	testutil.Require(e.t, err)
}

// history publishes the manifests and outputs of steps, as the primary and its shadow would
// have, and returns the primary's batch id of each step (its first chunk's).
func (e *diffEnv) history(steps []step) []uint64 {
	const start = 1_700_000_000_000 // epoch ms
	pID, sID := uint64(10), uint64(1000)
	var inputPos uint64
	ids := make([]uint64, len(steps))
	// Another deployment's output on the primary's subject: not the primary's.
	e.output("other", e.primary.Output.Subject, pID, `"u1"`, `{"other":true}`)
	for i, s := range steps {
		t := start + s.at.Milliseconds()
		first := inputPos + 1
		inputPos += uint64(s.rows)
		man := engine.Manifest{ProcessingTimeMs: t, WatermarkMs: t - 1000, NextWatermarkMs: t, Rows: s.rows, Position: inputPos}
		if s.rows > 0 {
			man.FirstSequence, man.LastSequence = first, inputPos
		}
		// The primary's chunks.
		var pIDs []uint64
		var last uint64 // the primary manifest sequence of the batch's last chunk
		for c := range max(s.chunks, 1) {
			m := man
			m.Batch = pID
			if c > 0 {
				m.Rows, m.FirstSequence, m.LastSequence, m.Continued = 0, 0, 0, true
			}
			m.Open = c < max(s.chunks, 1)-1
			last = e.manifest(e.primary.Name, m)
			pIDs = append(pIDs, pID)
			pID++
		}
		ids[i] = pIDs[0]
		for _, r := range s.old {
			e.output(e.primary.Name, e.primary.Output.Subject, pIDs[r.chunk], r.key, r.row)
		}
		if s.lag {
			continue
		}
		// The shadow's run of it, at the primary's last chunk's manifest sequence.
		var sIDs []uint64
		for c := range max(s.shadowChunks, 1) {
			m := man
			m.Batch, m.Position = sID, last
			if c > 0 {
				m.Rows, m.FirstSequence, m.LastSequence, m.Continued = 0, 0, 0, true
			}
			m.Open = c < max(s.shadowChunks, 1)-1
			e.manifest(e.shadow.Name, m)
			sIDs = append(sIDs, sID)
			sID++
		}
		for _, r := range s.new {
			e.output(e.shadow.Name, e.shadow.Output.Subject, sIDs[r.chunk], r.key, r.row)
		}
	}
	return ids
}

// TestDiff: Diff aligns the shadow's batches with the primary's through their positions (the
// primary's manifest sequences) and compares their outputs key by key, over chunked batches,
// a shadow that lags, Since and Keys.
func TestDiff(t *testing.T) {
	type wantDiff struct {
		step int // whose primary batch id is the difference's batch
		key  string
	}
	tests := []struct {
		name  string
		steps []step
		since time.Duration
		keys  []string
		// The report.
		batches, rows, nkeys, equal, changed, onlyOld, onlyNew int
		diffs                                                  []wantDiff
	}{
		{
			name: "same",
			steps: []step{
				same(0, 2, o(`"u1"`, `{"n":1}`), o(`"u2"`, `{"n":1}`)),
				same(time.Second, 1, o(`"u1"`, `{"n":2}`)),
				same(2*time.Second, 0, o(`"u2"`, `{"closed":true}`)), // a batch of timeouts only
			},
			batches: 3, rows: 3, nkeys: 4, equal: 4,
		},
		{
			name: "a row differs",
			steps: []step{
				same(0, 2, o(`"u1"`, `{"n":1}`), o(`"u2"`, `{"n":1}`)),
				{at: time.Second, rows: 2, old: []out{o(`"u1"`, `{"n":2}`), o(`"u2"`, `{"n":2}`)}, new: []out{o(`"u1"`, `{"n":3}`), o(`"u2"`, `{"n":2}`)}},
			},
			batches: 2, rows: 4, nkeys: 4, equal: 3, changed: 1,
			diffs: []wantDiff{{1, `"u1"`}},
		},
		{
			name: "rows on one side only",
			steps: []step{
				{at: 0, rows: 1, old: []out{o(`"u1"`, `{"n":1}`), o(`"u1"`, `{"closed":true}`)}, new: []out{o(`"u1"`, `{"n":1}`)}},
				{at: time.Second, rows: 1, new: []out{o(`"u2"`, `{"n":1}`)}},
			},
			batches: 2, rows: 2, nkeys: 2, equal: 1, onlyOld: 1, onlyNew: 1,
			diffs: []wantDiff{{0, `"u1"`}, {1, `"u2"`}},
		},
		{
			name: "a chunked primary batch is one shadow batch",
			steps: []step{
				same(0, 1, o(`"u1"`, `{"n":1}`)),
				{at: time.Second, rows: 3, chunks: 3,
					old: []out{o(`"u1"`, `{"n":2}`), {1, `"u1"`, `{"closed":true}`}, {2, `"u2"`, `{"closed":true}`}},
					new: []out{o(`"u1"`, `{"n":2}`), o(`"u1"`, `{"closed":true}`), o(`"u2"`, `{"closed":true}`)}},
				same(2*time.Second, 1, o(`"u1"`, `{"n":1}`)),
			},
			batches: 3, rows: 5, nkeys: 4, equal: 5,
		},
		{
			name: "chunked on both sides, differing in a later chunk",
			steps: []step{
				same(0, 1, o(`"u1"`, `{"n":1}`)),
				{at: time.Second, rows: 1, chunks: 2, shadowChunks: 2,
					old: []out{o(`"u1"`, `{"n":2}`), {1, `"u2"`, `{"closed":true}`}},
					new: []out{o(`"u1"`, `{"n":2}`), {1, `"u2"`, `{"closed":false}`}}},
			},
			batches: 2, rows: 2, nkeys: 3, equal: 2, changed: 1,
			diffs: []wantDiff{{1, `"u2"`}},
		},
		{
			name: "the shadow lags",
			steps: []step{
				same(0, 1, o(`"u1"`, `{"n":1}`)),
				{at: time.Second, rows: 1, old: []out{o(`"u1"`, `{"n":2}`)}, lag: true},
				{at: 2 * time.Second, rows: 2, chunks: 2, old: []out{o(`"u2"`, `{"n":1}`), {1, `"u1"`, `{"closed":true}`}}, lag: true},
			},
			batches: 1, rows: 1, nkeys: 1, equal: 1,
		},
		{
			name: "since",
			steps: []step{
				{at: 0, rows: 1, old: []out{o(`"u1"`, `{"n":1}`)}, new: []out{o(`"u1"`, `{"n":9}`)}},
				same(10*time.Second, 1, o(`"u1"`, `{"n":2}`)),
				same(20*time.Second, 1, o(`"u2"`, `{"n":1}`)),
				same(30*time.Second, 2, o(`"u1"`, `{"n":3}`), o(`"u2"`, `{"n":2}`)),
				{at: 40 * time.Second, rows: 1, old: []out{o(`"u1"`, `{"n":4}`)}, lag: true},
			},
			since:   15 * time.Second, // of the shadow's last batch (30s): from 15s on
			batches: 2, rows: 3, nkeys: 3, equal: 3,
		},
		{
			name: "since, all of it",
			steps: []step{
				{at: 0, rows: 1, old: []out{o(`"u1"`, `{"n":1}`)}, new: []out{o(`"u1"`, `{"n":9}`)}},
				same(10*time.Second, 1, o(`"u1"`, `{"n":2}`)),
				same(20*time.Second, 1, o(`"u2"`, `{"n":1}`)),
				same(30*time.Second, 2, o(`"u1"`, `{"n":3}`), o(`"u2"`, `{"n":2}`)),
			},
			since:   time.Hour,
			batches: 4, rows: 5, nkeys: 5, equal: 4, changed: 1,
			diffs: []wantDiff{{0, `"u1"`}},
		},
		{
			name: "keys",
			steps: []step{
				{at: 0, rows: 2, old: []out{o(`"u1"`, `{"n":1}`), o(`"u2"`, `{"n":1}`)}, new: []out{o(`"u1"`, `{"n":1}`), o(`"u2"`, `{"n":7}`)}},
			},
			keys:    []string{`"u1"`},
			batches: 1, rows: 2, nkeys: 1, equal: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newDiffEnv(t)
			ids := e.history(tc.steps)
			opts := replay.DiffOptions{JS: e.js, Primary: e.primary, Shadow: e.shadow, Since: tc.since}
			for _, k := range tc.keys {
				opts.Keys = append(opts.Keys, []byte(k))
			}
			rep, err := replay.Diff(context.Background(), opts)
			testutil.Require(t, err)
			for _, d := range rep.Differences {
				t.Logf("batch %d key %s: old %s new %s", d.Batch, d.Key, d.Old, d.New)
			}
			if rep.Batches != tc.batches || rep.Compared != tc.batches || rep.Rows != tc.rows || rep.Keys != tc.nkeys || rep.Equal != tc.equal ||
				rep.Changed != tc.changed || rep.OnlyOld != tc.onlyOld || rep.OnlyNew != tc.onlyNew {
				t.Errorf("report %+v, want %d batches of %d rows, %d keys, %d equal, %d changed, %d only old, %d only new",
					rep, tc.batches, tc.rows, tc.nkeys, tc.equal, tc.changed, tc.onlyOld, tc.onlyNew)
			}
			if same := tc.changed == 0 && tc.onlyOld == 0 && tc.onlyNew == 0; rep.Same() != same {
				t.Errorf("Same() = %v, want %v", rep.Same(), same)
			}
			if len(rep.Differences) != len(tc.diffs) {
				t.Fatalf("%d differences, want %d", len(rep.Differences), len(tc.diffs))
			}
			for i, want := range tc.diffs {
				if d := rep.Differences[i]; d.Batch != ids[want.step] || string(d.Key) != want.key || d.Partition != 0 {
					t.Errorf("difference %d: partition %d batch %d key %s, want the primary's batch %d key %s", i, d.Partition, d.Batch, d.Key, ids[want.step], want.key)
				}
			}
		})
	}
}

// TestDiffPrimaryManifestGone: a shadow batch whose primary manifest the primary's manifests
// stream no longer keeps is not compared (and logged); the others are.
func TestDiffPrimaryManifestGone(t *testing.T) {
	e := newDiffEnv(t)
	e.history([]step{
		{at: 0, rows: 1, old: []out{o(`"u1"`, `{"n":1}`)}, new: []out{o(`"u1"`, `{"n":9}`)}},
		same(time.Second, 1, o(`"u1"`, `{"n":2}`)),
	})
	s, err := e.js.Stream(context.Background(), topology.ManifestsStream(e.primary.Name))
	testutil.Require(t, err)
	testutil.Require(t, s.Purge(context.Background(), jetstream.WithPurgeSequence(2))) // the first batch's
	var logged countLog
	rep, err := replay.Diff(context.Background(), replay.DiffOptions{JS: e.js, Primary: e.primary, Shadow: e.shadow, Logger: slog.New(&logged)})
	testutil.Require(t, err)
	if !rep.Same() || rep.Batches != 1 || rep.Equal != 1 {
		t.Errorf("report %+v, want the second batch compared, the same", rep)
	}
	if logged.n == 0 {
		t.Errorf("the batch not compared was not logged")
	}
}

// countLog is a slog.Handler that counts its records.
type countLog struct{ n int }

func (h *countLog) Enabled(context.Context, slog.Level) bool  { return true }
func (h *countLog) Handle(context.Context, slog.Record) error { h.n++; return nil }
func (h *countLog) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *countLog) WithGroup(string) slog.Handler             { return h }

// TestDiffRefuses: Diff needs its options, a shadow other than its primary, and a shadow
// that recorded a batch.
func TestDiffRefuses(t *testing.T) {
	e := newDiffEnv(t)
	ctx := context.Background()
	if _, err := replay.Diff(ctx, replay.DiffOptions{JS: e.js, Primary: e.primary}); !errors.Is(err, replay.ErrDiffIncomplete) {
		t.Errorf("without a shadow: %v, want ErrDiffIncomplete", err)
	}
	if _, err := replay.Diff(ctx, replay.DiffOptions{JS: e.js, Primary: e.primary, Shadow: e.primary}); !errors.Is(err, replay.ErrNotShadow) {
		t.Errorf("the primary as its shadow: %v, want ErrNotShadow", err)
	}
	if _, err := replay.Diff(ctx, replay.DiffOptions{JS: e.js, Primary: e.primary, Shadow: e.shadow}); !errors.Is(err, replay.ErrNoHistory) {
		t.Errorf("a shadow without batches: %v, want ErrNoHistory", err)
	}
	gone := *e.shadow
	gone.Name = "never-ran"
	if _, err := replay.Diff(ctx, replay.DiffOptions{JS: e.js, Primary: e.primary, Shadow: &gone}); !errors.Is(err, replay.ErrNoHistory) {
		t.Errorf("a shadow without a manifests stream: %v, want ErrNoHistory", err)
	}
}
