package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"time"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
	"github.com/groupstate/groupstate/timeouts"
)

// RunBatch runs one micro-batch (DESIGN section 3): it drops late rows, calls the handler once
// per key with rows, then once per key whose timeout expired and that got no rows, and commits
// state, timers, watermark, position and outbox in one synced Pebble batch. Then it delivers
// the outbox to the sink: with the NATS sink it sends the batch's messages and returns, and the
// next RunBatch awaits their acknowledgements after its own commit (see deliverCommitted).
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
	b := &e.run
	*b = batchRun{e: e, T: in.ProcessingTimeMs, W: e.wm.Current(), id: e.progress.BatchID + 1, keyBuf: b.keyBuf}
	b.rep.BatchID = b.id
	b.rep.RowsIn = len(in.Rows)
	b.sb = e.ks.NewBatch(b.id)
	defer b.done()

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
		// deployment does not sync Pebble every trigger interval. The last batch's delivery
		// finishes here, so an idle deployment's outbox empties.
		if err := e.finishInflight(ctx); err != nil {
			e.pending = true
			e.logger.Warn("outbox delivery failed; will retry before the next batch", "err", err)
		}
		b.rep.BatchID, b.rep.Skipped = e.progress.BatchID, true
		b.rep.WatermarkMs = e.progress.WatermarkMs
		b.rep.Duration = time.Since(start)
		rep := b.rep
		return &rep, nil
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
	p, err := b.sb.Commit()
	if err != nil {
		e.wm.Discard()
		return nil, fmt.Errorf("engine: committing batch %d: %w", b.id, err)
	}
	_, advanced := e.wm.Advance()
	e.progress = p
	b.rep.WatermarkMs = next
	b.rep.WatermarkAdvanced = advanced
	b.rep.NeedsNoDataBatch = advanced && e.rules.Mode == timeouts.EventTime
	if err := e.deliverCommitted(ctx, b.outbox); err != nil {
		// Committed: the entries stay in the outbox and go out before the next batch runs.
		e.pending = true
		e.logger.Warn("outbox delivery failed; will retry before the next batch", "batch", b.id, "err", err)
	}
	b.rep.Duration = time.Since(start)
	rep := b.rep
	return &rep, nil
}

// batchRun is the work of one RunBatch.
type batchRun struct {
	e    *Engine
	T, W int64
	id   uint64
	sb   *state.Batch
	rep  BatchReport
	in   []Row

	groups []handler.Group // data groups (the first nData), then timeout groups
	prev   []state.Entry   // per group, its entry before the batch
	nData  int
	outbox []state.OutboxEntry
	keys   []byte // the batch's group keys (Group.Key and outbox keys point into it)
	keyBuf []byte // the key of the row being read
}

// batchBuffers is the working memory of batches, kept by the engine and reused by every
// RunBatch so that a batch allocates nothing per row or per group (the engine runs one batch
// at a time). Everything here lives for one batch only; what outlives it or reaches the sink
// (group keys, the outbox slice) is allocated per batch instead, in one piece.
type batchBuffers struct {
	seed     maphash.Seed
	table    []int32  // open-addressing hash of the data groups' keys: group index+1, 0 = empty
	rowGroup []int32  // per input row: its group, or -1 (dead-lettered or late)
	rowStart []int32  // per data group i: its rows are rowData[rowStart[i]:rowStart[i+1]]
	cursor   []int32  // per data group: row count, then fill position
	rowData  [][]byte // every grouped row's data, grouped (Group.Rows are sub-slices)
	rowIdx   []int32  // the input index of each rowData entry, for dead letters
	groups   []handler.Group
	prev     []state.Entry
	results  []handler.Result
	vals     []byte // state values read by the batch (Group.State and prev point into it)
	keyCap   int    // key bytes of the previous batch, to size the next one's
	outCap   int    // outbox entries of the previous batch
}

// done releases the batch: it closes the state batch and drops the references the reused
// buffers hold, so that no row, state or result is kept alive after RunBatch returns.
func (b *batchRun) done() {
	b.sb.Close()
	bf := &b.e.buf
	bf.keyCap, bf.outCap = len(b.keys), len(b.outbox)
	if cap(b.groups) > cap(bf.groups) {
		bf.groups = b.groups // keep the grown arrays for the next batch
	}
	if cap(b.prev) > cap(bf.prev) {
		bf.prev = b.prev
	}
	if cap(bf.vals) > maxKeptValues {
		bf.vals = nil
	}
	clear(bf.rowData[:cap(bf.rowData)])
	clear(bf.groups[:cap(bf.groups)])
	clear(bf.prev[:cap(bf.prev)])
	clear(bf.results[:cap(bf.results)])
	keyBuf := b.keyBuf
	*b = batchRun{keyBuf: keyBuf}
}

// maxKeptValues is the most state-value bytes the engine keeps for the next batch.
const maxKeptValues = 64 << 20

// resize returns s with length n, reusing its array when it is large enough and keeping
// its first min(len(s), n) elements.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		ns := make([]T, n, n+n/4)
		copy(ns, s)
		return ns
	}
	return s[:n]
}

// keep copies key into the batch's key arena and returns the copy.
func (b *batchRun) keep(key []byte) []byte {
	if b.keys == nil {
		b.keys = make([]byte, 0, max(b.e.buf.keyCap+b.e.buf.keyCap/4, 256))
	}
	n := len(b.keys)
	b.keys = append(b.keys, key...)
	return b.keys[n:len(b.keys):len(b.keys)]
}

// find returns the index of the data group of key, or -1 and the table slot where it goes.
func (b *batchRun) find(key []byte) (group int, slot int) {
	t := b.e.buf.table
	mask := len(t) - 1
	for p := int(maphash.Bytes(b.e.buf.seed, key)) & mask; ; p = (p + 1) & mask {
		v := t[p]
		if v == 0 {
			return -1, p
		}
		if bytes.Equal(b.groups[v-1].Key, key) {
			return int(v - 1), p
		}
	}
}

// groupRows validates and groups the rows, dead-lettering those it cannot use and dropping
// late ones. It allocates nothing per row: a first pass finds each row's group (a hash table
// over the engine's buffers), a second lays the rows out group by group in one slice, of
// which each Group.Rows is a part.
func (b *batchRun) groupRows(rows []Row) {
	e := b.e
	bf := &e.buf
	b.in = rows
	n := 1
	for n < 2*len(rows) {
		n <<= 1 // at most half full: a group per row at worst
	}
	bf.table = resize(bf.table, n)
	clear(bf.table)
	bf.rowGroup = resize(bf.rowGroup, len(rows))
	b.groups = bf.groups[:0]
	counts := bf.cursor[:0]
	grouped := 0
	for j, r := range rows {
		bf.rowGroup[j] = -1
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
					b.append(rowEntry(state.OutboxLate, b.keep(key), r, ReasonLate,
						fmt.Sprintf("event time %d is at or before the watermark %d", evt, b.W)))
				}
				continue
			}
		}
		i, slot := b.find(key)
		if i < 0 {
			i = len(b.groups)
			bf.table[slot] = int32(i + 1)
			b.groups = append(b.groups, handler.Group{Key: b.keep(key)})
			counts = append(counts, 0)
		}
		counts[i]++
		bf.rowGroup[j] = int32(i)
		grouped++
	}
	bf.cursor = counts
	b.nData = len(b.groups)
	bf.rowStart = resize(bf.rowStart, b.nData+1)
	bf.rowStart[0] = 0
	for i, c := range counts {
		bf.rowStart[i+1] = bf.rowStart[i] + c
		counts[i] = bf.rowStart[i] // from here on, the next position of group i
	}
	bf.rowData = resize(bf.rowData, grouped)
	bf.rowIdx = resize(bf.rowIdx, grouped)
	for j, i := range bf.rowGroup {
		if i >= 0 {
			p := counts[i]
			counts[i]++
			bf.rowData[p] = rows[j].Data
			bf.rowIdx[p] = int32(j)
		}
	}
	for i := range b.groups {
		lo, hi := bf.rowStart[i], bf.rowStart[i+1]
		b.groups[i].Rows = bf.rowData[lo:hi:hi]
	}
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
		return nil, 0, ReasonBadKey, fmt.Errorf("key field %q is %s, not a string or number", e.spec.Key.Field, rowjson.Kind(tok))
	}
	if e.timePath == nil {
		return key, 0, "", nil
	}
	tok, err = rowjson.Lookup(data, e.timePath)
	if err != nil {
		return nil, 0, ReasonMissingEventTime, fmt.Errorf("event time field %q is missing or null", e.spec.EventTime.Field)
	}
	evt, ok := rowjson.PlainInt(tok)
	if !ok {
		evt, err = timeouts.ParseEventTime(tok)
	}
	if err != nil {
		return nil, 0, ReasonBadEventTime, fmt.Errorf("event time field %q: %v", e.spec.EventTime.Field, err)
	}
	return key, evt, "", nil
}

// addData reads the state of every key with rows.
func (b *batchRun) addData() error {
	bf := &b.e.buf
	b.prev = resize(bf.prev, len(b.groups))
	bf.vals = bf.vals[:0]
	for i := range b.groups {
		if err := b.load(i); err != nil {
			return err
		}
	}
	return nil
}

// load reads group i's state into the batch's value buffer.
func (b *batchRun) load(i int) error {
	g := &b.groups[i]
	bf := &b.e.buf
	en, _, vals, err := b.e.ks.GetAppend(bf.vals, g.Key)
	if err != nil {
		return fmt.Errorf("engine: reading state of key %s: %w", g.Key, err)
	}
	bf.vals = vals
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
	err := b.e.ks.Expired(bound, func(key []byte, _ int64) error {
		if i, _ := b.find(key); i < 0 {
			b.groups = append(b.groups, handler.Group{Key: b.keep(key), Flags: abi.GroupTimedOut})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: scanning timers: %w", err)
	}
	b.prev = resize(b.prev, len(b.groups))
	for i := b.nData; i < len(b.groups); i++ {
		if err := b.load(i); err != nil {
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
	bf := &b.e.buf
	bf.results = resize(bf.results, len(b.groups))
	results := bf.results
	c := &handler.Call{ProcessingTimeMs: b.T, WatermarkMs: b.W, Groups: b.groups}
	if err := b.e.h.Process(ctx, c, results); err != nil {
		return fmt.Errorf("engine: running the handler: %w", err)
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
		b.append(state.OutboxEntry{Kind: state.OutboxOutput, Key: g.Key, Payload: row})
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
	if b.e.spec.OnError == spec.OnErrorFail {
		return fmt.Errorf("%w: %w", ErrKeyFailed, kerr)
	}
	b.rep.FailedKeys++
	b.e.logger.Warn("handler failed for a key; dead-lettering its rows", "key", string(g.Key), "err", err)
	if g.Flags&abi.GroupTimedOut != 0 {
		prev := b.prev[i]
		next := prev
		next.TimeoutMs = abi.NoTimeout
		b.sb.Set(g.Key, prev, next)
		b.append(state.OutboxEntry{Kind: state.OutboxDeadLetter, Key: g.Key, Reason: ReasonHandlerError, Error: err.Error(), TimeoutCall: true})
		b.rep.DeadLetters++
		return nil
	}
	bf := &b.e.buf
	for _, j := range bf.rowIdx[bf.rowStart[i]:bf.rowStart[i+1]] {
		b.deadLetter(g.Key, b.in[j], ReasonHandlerError, err)
	}
	return nil
}

func (b *batchRun) deadLetter(key []byte, r Row, reason string, err error) {
	b.append(rowEntry(state.OutboxDeadLetter, key, r, reason, err.Error()))
	b.rep.DeadLetters++
}

// rowEntry is the outbox entry of input row r, dead-lettered or late for reason.
func rowEntry(kind state.OutboxKind, key []byte, r Row, reason, msg string) state.OutboxEntry {
	return state.OutboxEntry{Kind: kind, Key: key, Payload: r.Data, Reason: reason, Error: msg, Subject: r.Subject, Sequence: r.Sequence}
}

// append records en in the state batch's outbox and in the batch's list of entries to deliver.
func (b *batchRun) append(en state.OutboxEntry) {
	en.ID = b.sb.AppendOutbox(&en)
	if b.outbox == nil {
		b.outbox = make([]state.OutboxEntry, 0, max(b.e.buf.outCap+b.e.buf.outCap/4, 16))
	}
	b.outbox = append(b.outbox, en)
}
