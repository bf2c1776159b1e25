package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// RunBatch runs one micro-batch (DESIGN section 3): it drops late rows, calls the handler once
// per key with rows, then once per key whose timeout expired and that got no rows, and commits
// state, timers, watermark, position and outbox in one synced Pebble batch. Then it delivers
// the outbox to the sink.
//
// On error nothing of the batch is committed and the engine is as before the call, so the
// same input may be run again. A failed delivery after the commit is not an error of the
// batch: the entries stay in the outbox, and the next RunBatch delivers them before anything
// else, failing with [ErrDeliveryPending] (and running no batch) while it cannot.
func (e *Engine) RunBatch(ctx context.Context, in BatchInput) (*BatchReport, error) {
	if e.closed {
		return nil, ErrEngineClosed
	}
	start := time.Now()
	if err := e.deliverPending(ctx); err != nil {
		// Outputs of earlier batches are still undelivered: run no new batch until they are
		// out, which keeps outputs in order and holds input back (it stays in the stream).
		return nil, fmt.Errorf("%w: %w", ErrDeliveryPending, err)
	}
	b := &batchRun{e: e, T: in.ProcessingTimeMs, W: e.wm.Current(), id: e.progress.BatchID + 1}
	b.rep.BatchID = b.id
	b.rep.RowsIn = len(in.Rows)
	b.sb = e.ks.NewBatch(b.id)
	defer b.sb.Close()

	b.groupRows(in.Rows)
	if err := b.addData(); err != nil {
		e.wm.Discard()
		return nil, err
	}
	if err := b.addTimeouts(); err != nil {
		e.wm.Discard()
		return nil, err
	}
	if len(in.Rows) == 0 && len(b.groups) == 0 && (in.Position == 0 || in.Position == e.progress.Position) {
		// A no-data batch with no timeout to fire changes nothing: skip the commit, so an idle
		// deployment does not sync Pebble every trigger interval.
		b.rep.BatchID, b.rep.Skipped = e.progress.BatchID, true
		b.rep.WatermarkMs = e.progress.WatermarkMs
		b.rep.Duration = time.Since(start)
		return &b.rep, nil
	}
	if err := b.call(ctx); err != nil {
		e.wm.Discard()
		return nil, err
	}
	next := e.wm.Next()
	pos := in.Position
	if pos == 0 {
		pos = e.progress.Position
	}
	b.sb.SetProgress(next, pos)
	if err := b.sb.Commit(); err != nil {
		e.wm.Discard()
		return nil, fmt.Errorf("runtime: committing batch %d: %w", b.id, err)
	}
	_, advanced := e.wm.Advance()
	if p, err := e.ks.Progress(); err == nil {
		e.progress = p
	} else {
		e.progress.BatchID, e.progress.WatermarkMs, e.progress.Position = b.id, next, pos
	}
	b.rep.WatermarkMs = next
	b.rep.WatermarkAdvanced = advanced
	b.rep.NeedsNoDataBatch = advanced && e.rules.Mode == timeouts.EventTime
	if err := e.deliver(ctx, b.outbox); err != nil {
		// Committed: the entries stay in the outbox and go out before the next batch runs.
		e.pending = true
		e.logger.Warn("outbox delivery failed; will retry before the next batch", "batch", b.id, "err", err)
	}
	b.rep.Duration = time.Since(start)
	return &b.rep, nil
}

// batchRun is the work of one RunBatch.
type batchRun struct {
	e    *Engine
	T, W int64
	id   uint64
	sb   *state.Batch
	rep  BatchReport

	keys   map[string]int // canonical key -> index in groups
	groups []handler.Group
	prev   []state.Entry
	rows   [][]Row // per group, the rows (for dead letters)
	nData  int
	outbox []state.OutboxEntry
	keyBuf []byte
}

// groupRows validates and groups the rows, dead-lettering those it cannot use and dropping
// late ones.
func (b *batchRun) groupRows(rows []Row) {
	e := b.e
	b.keys = make(map[string]int)
	for _, r := range rows {
		key, evt, reason, err := e.extract(r.Data, b.keyBuf[:0])
		if err != nil {
			b.deadLetter(nil, r, reason, err)
			continue
		}
		b.keyBuf = key
		if e.timePath != nil {
			e.wm.Observe(evt)
			if e.rules.DropsLate() && timeouts.IsLate(evt, b.W) {
				b.rep.LateRows++
				if e.spec.Late.Subject != "" {
					b.append(state.OutboxLate, key, r.Data, rowHeaders(r, ReasonLate,
						fmt.Sprintf("event time %d is at or before the watermark %d", evt, b.W)))
				}
				continue
			}
		}
		i, ok := b.keys[string(key)]
		if !ok {
			i = len(b.groups)
			k := string(key)
			b.keys[k] = i
			b.groups = append(b.groups, handler.Group{Key: []byte(k)})
			b.rows = append(b.rows, nil)
		}
		b.groups[i].Rows = append(b.groups[i].Rows, r.Data)
		b.rows[i] = append(b.rows[i], r)
	}
	b.nData = len(b.groups)
}

// extract finds a row's canonical key and event time.
func (e *Engine) extract(data, keyBuf []byte) (key []byte, evt int64, reason string, err error) {
	if max := e.spec.Limits.MaxRowBytes; max > 0 && uint64(len(data)) > uint64(max) {
		return nil, 0, ReasonTooLarge, fmt.Errorf("row of %d bytes is over the limit of %d bytes", len(data), max)
	}
	if err := rowjson.Validate(data); err != nil {
		switch {
		case errors.Is(err, rowjson.ErrNotUTF8):
			return nil, 0, ReasonNotUTF8, errors.New("row is not valid UTF-8")
		case errors.Is(err, rowjson.ErrNotObject):
			return nil, 0, ReasonNotObject, errors.New("row is not a JSON object")
		}
		return nil, 0, ReasonInvalidJSON, errors.New("row is not valid JSON")
	}
	tok, err := rowjson.Lookup(data, e.keyPath)
	if err != nil {
		return nil, 0, ReasonMissingKey, fmt.Errorf("key field %q is missing or null", e.spec.Key.Field)
	}
	key, err = rowjson.AppendCanonicalKey(keyBuf, tok)
	if err != nil {
		return nil, 0, ReasonBadKey, fmt.Errorf("key field %q is %s, not a string or number", e.spec.Key.Field, tokenKind(tok))
	}
	if e.timePath == nil {
		return key, 0, "", nil
	}
	tok, err = rowjson.Lookup(data, e.timePath)
	if err != nil {
		return nil, 0, ReasonMissingEventTime, fmt.Errorf("event time field %q is missing or null", e.spec.EventTime.Field)
	}
	evt, err = timeouts.ParseEventTime(tok)
	if err != nil {
		return nil, 0, ReasonBadEventTime, fmt.Errorf("event time field %q: %v", e.spec.EventTime.Field, err)
	}
	return key, evt, "", nil
}

func tokenKind(tok []byte) string {
	switch tok[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "not a scalar"
}

// addData reads the state of every key with rows.
func (b *batchRun) addData() error {
	b.prev = make([]state.Entry, len(b.groups))
	for i := range b.groups {
		if err := b.load(i); err != nil {
			return err
		}
	}
	return nil
}

func (b *batchRun) load(i int) error {
	g := &b.groups[i]
	en, _, err := b.e.ks.Get(g.Key)
	if err != nil {
		return fmt.Errorf("runtime: reading state of key %s: %w", g.Key, err)
	}
	b.prev[i] = en
	if en.HasValue {
		g.Flags |= abi.GroupStateExists
		g.State = en.Value
	}
	return nil
}

// addTimeouts adds a timeout call for every key whose timeout expired (strictly before the
// bound of its mode) and that got no rows in this batch (DESIGN section 3 rule 3).
func (b *batchRun) addTimeouts() error {
	bound, ok := b.e.rules.ExpiryBound(b.T, b.W)
	if !ok {
		return nil
	}
	var expired [][]byte
	err := b.e.ks.Expired(bound, func(key []byte, _ int64) error {
		if _, hasData := b.keys[string(key)]; !hasData {
			expired = append(expired, append([]byte(nil), key...))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("runtime: scanning timers: %w", err)
	}
	for _, k := range expired {
		b.groups = append(b.groups, handler.Group{Key: k, Flags: abi.GroupTimedOut})
		b.prev = append(b.prev, state.Entry{})
		b.rows = append(b.rows, nil)
		if err := b.load(len(b.groups) - 1); err != nil {
			return err
		}
	}
	return nil
}

// call runs the handler on every group and records the results in the state batch.
func (b *batchRun) call(ctx context.Context) error {
	if len(b.groups) == 0 {
		return nil
	}
	results := make([]handler.Result, len(b.groups))
	c := &handler.Call{ProcessingTimeMs: b.T, WatermarkMs: b.W, Groups: b.groups}
	if err := b.e.h.Process(ctx, c, results); err != nil {
		return fmt.Errorf("runtime: running the handler: %w", err)
	}
	b.rep.DataCalls = b.nData
	b.rep.TimeoutCalls = len(b.groups) - b.nData
	for i := range results {
		if err := b.apply(i, &results[i]); err != nil {
			return err
		}
	}
	return nil
}

// apply records one group's result, or handles its failure by the deployment's policy.
func (b *batchRun) apply(i int, r *handler.Result) error {
	g, prev := &b.groups[i], b.prev[i]
	err := r.Err
	if err == nil && r.TimeoutSet {
		if cerr := b.e.rules.CheckTimeoutResult(r.TimeoutMs, b.T, b.W); cerr != nil {
			err = fmt.Errorf("module returned an invalid timeout: %w", cerr)
		}
	}
	if err == nil {
		for j, row := range r.Emits {
			if !json.Valid(row) {
				err = fmt.Errorf("emitted row %d is not valid JSON", j)
				break
			}
		}
	}
	if err != nil {
		return b.fail(i, err)
	}
	next := state.Entry{} // rule 4: only what this call set
	if r.TimeoutSet {
		next.TimeoutMs = r.TimeoutMs
	}
	switch r.Action {
	case abi.ActionKeep:
		next.Value, next.HasValue, next.UpdatedMs = prev.Value, prev.HasValue, prev.UpdatedMs
	case abi.ActionUpdate:
		next.Value, next.HasValue, next.UpdatedMs = r.State, true, b.T
	case abi.ActionRemove:
	}
	b.sb.Set(g.Key, prev, next)
	for _, row := range r.Emits {
		b.append(state.OutboxOutput, g.Key, row, nil)
	}
	b.rep.Emitted += len(r.Emits)
	return nil
}

// fail handles a failed call for group i: under on_error: fail the batch fails; under
// dead_letter the key's rows go to the dead-letter sink with the error and its state stays as
// it was. A failed timeout call has no rows: its dead letter carries the key, and the timeout
// is consumed (as after any timeout call) so it does not fire again every batch.
func (b *batchRun) fail(i int, err error) error {
	g := &b.groups[i]
	kerr := &KeyError{Key: string(g.Key), Err: err}
	if b.e.spec.OnError == OnErrorFail {
		return fmt.Errorf("%w: %w", ErrKeyFailed, kerr)
	}
	b.rep.FailedKeys++
	b.e.logger.Warn("handler failed for a key; dead-lettering its rows", "key", string(g.Key), "err", err)
	if g.Flags&abi.GroupTimedOut != 0 {
		prev := b.prev[i]
		next := prev
		next.TimeoutMs = abi.NoTimeout
		b.sb.Set(g.Key, prev, next)
		h := map[string]string{HeaderReason: ReasonHandlerError, HeaderError: err.Error(), "Groupstate-Timeout-Call": "true"}
		b.append(state.OutboxDeadLetter, g.Key, nil, h)
		b.rep.DeadLetters++
		return nil
	}
	for _, r := range b.rows[i] {
		b.deadLetter(g.Key, r, ReasonHandlerError, err)
	}
	return nil
}

func (b *batchRun) deadLetter(key []byte, r Row, reason string, err error) {
	b.append(state.OutboxDeadLetter, key, r.Data, rowHeaders(r, reason, err.Error()))
	b.rep.DeadLetters++
}

func rowHeaders(r Row, reason, msg string) map[string]string {
	h := map[string]string{HeaderReason: reason, HeaderError: msg}
	if r.Subject != "" {
		h[HeaderSubject] = r.Subject
	}
	if r.Sequence != 0 {
		h[HeaderSequence] = itoa(r.Sequence)
	}
	return h
}

func (b *batchRun) append(kind state.OutboxKind, key, payload []byte, headers map[string]string) {
	id := b.sb.AppendOutbox(kind, key, payload, headers)
	b.outbox = append(b.outbox, state.OutboxEntry{ID: id, Kind: kind, Key: key, Payload: payload, Headers: headers})
}
