package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/state"
)

// ErrInitialState: an initial-state file is not what [ParseInitialState] accepts (wrapped
// with the line and what is wrong).
var ErrInitialState = errors.New("engine: invalid initial state")

// The bounds of an initial-state file: its keys all go into the deployment's first batch,
// so the file is bounded like one (a line like a row, the whole like a big batch's state).
const (
	MaxInitialStateLine  = 1 << 20
	MaxInitialStateBytes = 256 << 20
)

// InitialState is a deployment's initial state (docs/semantics.md, "transformWithState
// handlers", rule 8): a state per key, applied once, in the deployment's first batch, before
// its data calls. A v1 (flatMapGroupsWithState) handler sees a key's initial state as the
// key's state; a key only in the initial state is called with no rows (and hasTimedOut
// false), as Spark does. A restart or redeploy of a deployment that committed a batch does
// not apply it again.
//
// An InitialState is immutable once parsed and safe for concurrent use.
type InitialState struct {
	keys  [][]byte // canonical keys, in file order
	vals  [][]byte // per key, its state: the compacted JSON of the line's "state"
	lines []int    // per key, its line in the file (1-based)
	index map[string]int
}

// ParseInitialState reads an initial-state file: JSON Lines of {"key": K, "state": V}, K a
// JSON string or number (a key as docs/semantics.md, "Keys", says: 42 and 42.0 are one key)
// and V any JSON value but null, whose compact text becomes the key's state bytes. Blank
// lines are skipped. A key twice, a line that is not such an object, or a file over
// [MaxInitialStateBytes] (a line over [MaxInitialStateLine]) is refused with an error
// wrapping [ErrInitialState] that names the line.
func ParseInitialState(r io.Reader) (*InitialState, error) {
	s := &InitialState{index: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxInitialStateLine)
	keyPath, statePath := rowjson.Path{"key"}, rowjson.Path{"state"}
	total, n := 0, 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		total += len(sc.Bytes()) + 1
		if total > MaxInitialStateBytes {
			return nil, fmt.Errorf("%w: over %d bytes at line %d", ErrInitialState, MaxInitialStateBytes, n)
		}
		if len(line) == 0 {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: line %d: %s", ErrInitialState, n, fmt.Sprintf(format, args...))
		}
		if err := rowjson.Validate(line); err != nil {
			return nil, bad("not a JSON object: %v", err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(line, &fields); err != nil {
			return nil, bad("%v", err)
		}
		for name := range fields {
			if name != "key" && name != "state" {
				return nil, bad(`unknown field %q (a line is {"key": K, "state": V})`, name)
			}
		}
		tok, err := rowjson.Lookup(line, keyPath)
		if err != nil {
			return nil, bad(`no "key" (a line is {"key": K, "state": V})`)
		}
		key, err := rowjson.AppendCanonicalKey(nil, tok)
		if err != nil {
			return nil, bad(`"key" is %s, not a string or number`, rowjson.Kind(tok))
		}
		st, err := rowjson.Lookup(line, statePath)
		if err != nil {
			return nil, bad(`no "state", or it is null (a line is {"key": K, "state": V}; a key without state needs no line)`)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, st); err != nil {
			return nil, bad(`"state": %v`, err)
		}
		if first, ok := s.index[string(key)]; ok {
			return nil, bad("key %s again (first on line %d): a key has one initial state", key, s.lines[first])
		}
		s.index[string(key)] = len(s.keys)
		s.keys = append(s.keys, key)
		s.vals = append(s.vals, compact.Bytes())
		s.lines = append(s.lines, n)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d is over %d bytes", ErrInitialState, n+1, MaxInitialStateLine)
		}
		return nil, fmt.Errorf("%w: reading: %v", ErrInitialState, err)
	}
	return s, nil
}

// Len returns the number of keys.
func (s *InitialState) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// Get returns key's initial state (its canonical key, as rows' keys are), or false when the
// file has none for it. The returned bytes must not be modified.
func (s *InitialState) Get(key []byte) ([]byte, bool) {
	if s == nil {
		return nil, false
	}
	i, ok := s.index[string(key)]
	if !ok {
		return nil, false
	}
	return s.vals[i], true
}

// Partition returns the initial state of the keys of partition p of a deployment split into
// partitions (see package partition): what the engine of that partition applies.
func (s *InitialState) Partition(p, partitions int) *InitialState {
	out := &InitialState{index: map[string]int{}}
	for i, k := range s.keys {
		if partition.Of(k, partitions) == p {
			out.index[string(k)] = len(out.keys)
			out.keys = append(out.keys, k)
			out.vals = append(out.vals, s.vals[i])
			out.lines = append(out.lines, s.lines[i])
		}
	}
	return out
}

// each calls fn with every key and its state, in file order.
func (s *InitialState) each(fn func(key, state []byte)) {
	for i, k := range s.keys {
		fn(k, s.vals[i])
	}
}

// initialPending returns is when a keyspace at progress p is to apply it: when it never applied
// an initial state and holds no state (no key, no timeout: a new deployment, or a name whose
// state was dropped). A keyspace that holds state it did not start from keeps it, with a
// warning: the file is not applied over it.
func initialPending(ks *state.Deployment, p state.Progress, is *InitialState, logger *slog.Logger) (*InitialState, error) {
	if is.Len() == 0 {
		return nil, nil
	}
	applied, err := ks.InitialStateApplied()
	if err != nil {
		return nil, err
	}
	switch {
	case applied:
		return nil, nil
	case p.Keys > 0 || p.TimerKeys > 0:
		logger.Warn("the initial state is not applied: the deployment already holds state (deployed under this name before?); deploy under a new name to start from it",
			"keys", p.Keys, "initial_keys", is.Len())
		return nil, nil
	}
	return is, nil
}

// addInitial applies the initial state in the keyspace's first batch (none committed yet):
// a data group's key with an initial state starts from it, and every other key of the file
// gets a call with no rows (b.nInit of them, after the data groups). The initial state is
// set in the state batch before the calls, as the keys' state before them, so that a call
// that keeps its state, or fails, leaves the initial state.
func (b *batch) addInitial() {
	e := b.e
	if e.initial == nil {
		return
	}
	b.sb.MarkInitialStateApplied()
	b.initialApplied = true
	for i := range b.nData {
		if v, ok := e.initial.Get(b.groups[i].Key); ok {
			b.setInitial(i, v)
		}
	}
	e.initial.each(func(key, v []byte) {
		if b.nData > 0 {
			if i, _ := b.find(key); i >= 0 {
				return // a data group, done above
			}
		}
		i := len(b.groups)
		b.groups = append(b.groups, handler.Group{Key: b.keep(key)})
		b.prev = resize(b.prev, i+1)
		b.prev[i] = state.Entry{}
		b.setInitial(i, v)
		b.nInit++
	})
}

// setInitial makes v group i's state before its call.
func (b *batch) setInitial(i int, v []byte) {
	g := &b.groups[i]
	init := state.Entry{Value: v, HasValue: true, UpdatedMs: b.T}
	b.sb.Set(g.Key, b.prev[i], init)
	b.prev[i] = init
	g.State = v
	g.Flags |= abi.GroupStateExists
}
