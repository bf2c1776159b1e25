// Package scenario runs scenario files: JSON Lines scripts of micro-batches, restarts and
// expectations that pin down a handler's behaviour without NATS and without a wall clock
// (README.md, "`groupstate test`: scenario files"). `groupstate test` is a thin wrapper
// around [RunSummary]. A file runs a step at a time: its memory does not grow with its length
// nor with its number of keys.
//
// Each line is one step:
//
//	{"at": 12000, "rows": [{...}, ...]}   one micro-batch at processing time 12000 ms
//	{"at": 12000, "inputs": [{"name": "clicks", "rows": [{...}]}, ...]}
//	                                       the same, for a spec with inputs: rows per input
//	{"restart": true}                      close everything and reopen from the same state
//	{"drain": true}                        the last batch: fire every timeout (Flink's stop --drain)
//	{"expect": [{...}, ...]}               the rows emitted since the previous expect
//
// Under event-time timeouts a batch that advances the watermark is followed at once by a
// no-data batch (docs/semantics.md, "A micro-batch": No-data batches), at the same
// processing time.
package scenario

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// ErrExpectation is wrapped by the error of a failed expect step.
var ErrExpectation = errors.New("scenario: expectation failed")

// ErrInvalidStep is wrapped by the error of a line that is not a valid step.
var ErrInvalidStep = errors.New("scenario: invalid step")

// Options configures [Run].
type Options struct {
	// Spec is the deployment spec (required).
	Spec *spec.Spec
	// Wasm is the handler module (required).
	Wasm []byte
	// Runtime is used to start engines; default a new one with an in-memory cache.
	Runtime *engine.Runtime
	// StateDir holds the scenario's state; default a temporary directory removed afterwards.
	StateDir string
	// Out receives every emitted row as one compact JSON line, in emission order. Default
	// io.Discard.
	Out io.Writer
	// Log receives dead letters and late rows as readable lines. Default io.Discard.
	Log io.Writer
	// Logger receives the runtime's logs. Default: discarded.
	Logger *slog.Logger
	// InitialState is applied in the scenario's first batch (see [engine.InitialState]);
	// a restart does not apply it again. Default: nil, none.
	InitialState *engine.InitialState
}

// Step is one parsed line of a scenario file.
type Step struct {
	// Line is the 1-based line number.
	Line int
	// At, Rows: a batch (Rows may be empty).
	At   *int64
	Rows []json.RawMessage
	// Inputs are a batch's rows by input, for a spec with inputs (in place of Rows): the
	// rows reach the handler in this order.
	Inputs  []StepInput
	Restart bool
	// Drain: the deployment's last batch, which fires every timeout (see
	// engine.BatchInput.Drain), at the processing time of the batch before it (0 if none).
	// Only expect steps may follow it.
	Drain bool
	// Expect is set for an expect step (possibly empty: nothing emitted).
	Expect []json.RawMessage
	expect bool
}

// StepInput is one input's rows in a batch step ({"name": ..., "rows": [...]}).
type StepInput struct {
	Name string            `json:"name"`
	Rows []json.RawMessage `json:"rows"`
}

// Parse reads a scenario file. It checks every line before anything runs: unknown fields,
// a step that is none or several of batch, restart and expect, and processing times that
// decrease are errors naming the line. It holds every step in memory: [Run] holds one at a
// time.
func Parse(r io.Reader) ([]Step, error) {
	var steps []Step
	err := scan(r, func(st Step) error {
		steps = append(steps, st)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return steps, nil
}

// scan parses the scenario read from r a line at a time and calls fn with each step, checking
// the order of the steps as it goes (see [Parse]). A step's rows are fn's until it returns.
func scan(r io.Reader, fn func(Step) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var lastAt *int64
	drainLine := 0
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		st, err := parseStep(text)
		if err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrInvalidStep, line, err)
		}
		st.Line = line
		if drainLine > 0 && !st.expect {
			return fmt.Errorf("%w: line %d: a step after the drain on line %d; a drained deployment runs nothing more, so only expect steps may follow", ErrInvalidStep, line, drainLine)
		}
		if st.Drain {
			drainLine = line
		}
		if st.At != nil {
			if lastAt != nil && *st.At < *lastAt {
				return fmt.Errorf("%w: line %d: \"at\" %d is before the previous batch's %d; processing time never decreases", ErrInvalidStep, line, *st.At, *lastAt)
			}
			lastAt = st.At
		}
		if err := fn(st); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("scenario: reading: %w", err)
	}
	return nil
}

// maxLine is the longest line (step) a scenario file may have.
const maxLine = 64 << 20

func parseStep(text []byte) (Step, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(text, &raw); err != nil {
		return Step{}, fmt.Errorf("not a JSON object: %v", err)
	}
	var st Step
	kinds := 0
	for k, v := range raw {
		switch k {
		case "at":
			var at int64
			if err := json.Unmarshal(v, &at); err != nil {
				return st, fmt.Errorf("\"at\" must be an integer number of milliseconds: %v", err)
			}
			if at < 0 {
				return st, fmt.Errorf("\"at\" must not be negative")
			}
			st.At = &at
			kinds++
		case "rows":
			if err := json.Unmarshal(v, &st.Rows); err != nil {
				return st, fmt.Errorf("\"rows\" must be an array: %v", err)
			}
		case "inputs":
			dec := json.NewDecoder(bytes.NewReader(v))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&st.Inputs); err != nil {
				return st, fmt.Errorf("\"inputs\" must be an array of {\"name\", \"rows\"}: %v", err)
			}
			for _, in := range st.Inputs {
				if in.Name == "" {
					return st, fmt.Errorf("an input of \"inputs\" has no \"name\"")
				}
			}
		case "restart":
			if err := json.Unmarshal(v, &st.Restart); err != nil || !st.Restart {
				return st, fmt.Errorf("\"restart\" must be true")
			}
			kinds++
		case "drain":
			if err := json.Unmarshal(v, &st.Drain); err != nil || !st.Drain {
				return st, fmt.Errorf("\"drain\" must be true")
			}
			kinds++
		case "expect":
			if err := json.Unmarshal(v, &st.Expect); err != nil {
				return st, fmt.Errorf("\"expect\" must be an array: %v", err)
			}
			st.expect = true
			kinds++
		default:
			return st, fmt.Errorf("unknown field %q (a step has \"at\" and \"rows\" or \"inputs\", \"restart\", \"drain\", or \"expect\")", k)
		}
	}
	_, hasRows := raw["rows"]
	_, hasInputs := raw["inputs"]
	for field, has := range map[string]bool{"rows": hasRows, "inputs": hasInputs} {
		if has && st.At == nil {
			return st, fmt.Errorf("%q without \"at\"", field)
		}
	}
	if hasRows && hasInputs {
		return st, fmt.Errorf("a batch has \"rows\" or \"inputs\", not both")
	}
	if kinds != 1 {
		return st, fmt.Errorf("a step is exactly one of a batch (\"at\"), a restart, a drain or an expect")
	}
	return st, nil
}

// Summary counts the steps of a scenario that ran.
type Summary struct {
	// Batches counts the batch and drain steps, Expectations the expect steps.
	Batches, Expectations int
}

// Run runs the scenario read from r. It returns an error wrapping [ErrExpectation] with a
// readable diff at the first expect that fails. It checks every line before anything runs
// (see [Parse]), then runs the steps a line at a time, holding one step's rows in memory, and
// the rows emitted only while an expect step is still to come: its memory does not grow with
// the length of the scenario nor with the number of keys. When r is an [io.Seeker] (a file),
// it reads r twice, from its current offset; otherwise it first reads it whole into memory.
func Run(ctx context.Context, opts Options, r io.Reader) error {
	_, err := RunSummary(ctx, opts, r)
	return err
}

// RunSummary is [Run], and returns what the scenario held: its counts are known once every
// line was checked, so they are returned with an error of a step that ran.
func RunSummary(ctx context.Context, opts Options, r io.Reader) (Summary, error) {
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		b, err := io.ReadAll(r)
		if err != nil {
			return Summary{}, fmt.Errorf("scenario: reading: %w", err)
		}
		rs = bytes.NewReader(b)
	}
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return Summary{}, fmt.Errorf("scenario: reading: %w", err)
	}
	h, cleanup, err := newHarness(ctx, &opts)
	if err != nil {
		return Summary{}, err
	}
	defer cleanup()
	var sum Summary
	err = scan(rs, func(st Step) error {
		if err := h.checkInputs(st); err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrInvalidStep, st.Line, err)
		}
		h.count(st, &sum)
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return sum, fmt.Errorf("scenario: reading: %w", err)
	}
	if err := h.open(ctx); err != nil {
		return sum, err
	}
	defer h.close(ctx)
	return sum, scan(rs, func(st Step) error { return h.step(ctx, st) })
}

// RunSteps runs parsed steps.
func RunSteps(ctx context.Context, opts Options, steps []Step) error {
	h, cleanup, err := newHarness(ctx, &opts)
	if err != nil {
		return err
	}
	defer cleanup()
	var sum Summary
	for _, st := range steps {
		if err := h.checkInputs(st); err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrInvalidStep, st.Line, err)
		}
		h.count(st, &sum)
	}
	if err := h.open(ctx); err != nil {
		return err
	}
	defer h.close(ctx)
	for _, st := range steps {
		if err := h.step(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// newHarness fills in opts' defaults and returns a harness for them, not yet open, and the
// function that removes what the defaults made (a state directory, a runtime).
func newHarness(ctx context.Context, opts *Options) (*harness, func(), error) {
	if opts.Spec == nil {
		return nil, nil, errors.New("scenario: Options.Spec is required")
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	if opts.StateDir == "" {
		dir, err := os.MkdirTemp("", "groupstate-scenario-")
		if err != nil {
			return nil, nil, err
		}
		undo = append(undo, func() { os.RemoveAll(dir) })
		opts.StateDir = dir
	}
	if opts.Runtime == nil {
		rt, err := engine.New(engine.Options{Logger: opts.Logger})
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		undo = append(undo, func() { rt.Close(ctx) })
		opts.Runtime = rt
	}
	h := &harness{opts: *opts, inputs: map[string]int{}}
	for i, in := range opts.Spec.Inputs {
		h.inputs[in.Name] = i
	}
	return h, cleanup, nil
}

// count counts st in sum, and notes the last expect step: the rows emitted after it are not
// kept. The steps are counted in the order they run.
func (h *harness) count(st Step, sum *Summary) {
	h.counted++
	switch {
	case st.At != nil || st.Drain:
		sum.Batches++
	case st.expect:
		sum.Expectations++
		h.lastExpect = h.counted
	}
}

type harness struct {
	opts    Options
	lastAt  int64 // the processing time of the last batch step (a drain's)
	store   *state.Store
	eng     *engine.Engine
	emitted []json.RawMessage // since the previous expect step, while one is to come
	inputs  map[string]int    // the spec's input names, to their index
	// counted and ran count the steps checked and the steps run; lastExpect is the count of
	// the last expect step checked (0: none): the rows emitted after it are written out, not
	// kept.
	counted, ran, lastExpect int
}

// checkInputs checks that a batch step gives its rows as the spec says: by input ("inputs",
// naming the spec's inputs, each once) for a spec with inputs, else as "rows".
func (h *harness) checkInputs(st Step) error {
	if st.At == nil {
		return nil
	}
	if !h.opts.Spec.HasInputs() {
		if st.Inputs != nil {
			return errors.New("\"inputs\" is for a spec with inputs; this spec has one input: give \"rows\"")
		}
		return nil
	}
	if len(st.Rows) > 0 {
		return errors.New("the spec has inputs: give a batch's rows per input, as \"inputs\": [{\"name\": ..., \"rows\": [...]}]")
	}
	seen := map[string]bool{}
	for _, in := range st.Inputs {
		if _, ok := h.inputs[in.Name]; !ok {
			names := make([]string, 0, len(h.inputs))
			for _, i := range h.opts.Spec.Inputs {
				names = append(names, i.Name)
			}
			return fmt.Errorf("input %q is not one of the spec's inputs (%s)", in.Name, strings.Join(names, ", "))
		}
		if seen[in.Name] {
			return fmt.Errorf("input %q is given twice in one batch", in.Name)
		}
		seen[in.Name] = true
	}
	return nil
}

func (h *harness) open(ctx context.Context) error {
	st, err := state.Open(h.opts.StateDir, &state.Options{Logger: h.opts.Logger})
	if err != nil {
		return err
	}
	eng, err := h.opts.Runtime.NewEngine(ctx, engine.Config{
		Spec: h.opts.Spec, Wasm: h.opts.Wasm,
		Store: st, Sink: engine.SinkFunc(h.deliver), Logger: h.opts.Logger,
		InitialState: h.opts.InitialState,
	})
	if err != nil {
		st.Close()
		return err
	}
	h.store, h.eng = st, eng
	return nil
}

func (h *harness) close(ctx context.Context) {
	if h.eng != nil {
		h.eng.Close(ctx)
		h.eng = nil
	}
	if h.store != nil {
		h.store.Close()
		h.store = nil
	}
}

func (h *harness) deliver(_ context.Context, _ string, entries []state.OutboxEntry) error {
	for _, e := range entries {
		switch e.Kind {
		case state.OutboxOutput:
			var buf bytes.Buffer
			if err := json.Compact(&buf, e.Payload); err != nil {
				buf.Reset()
				buf.Write(e.Payload)
			}
			buf.WriteByte('\n')
			_, _ = h.opts.Out.Write(buf.Bytes())
			if h.ran < h.lastExpect {
				h.emitted = append(h.emitted, append(json.RawMessage(nil), buf.Bytes()[:buf.Len()-1]...))
			}
		default:
			fmt.Fprintf(h.opts.Log, "%s key=%s reason=%s error=%q row=%s\n", kindName(e.Kind), e.Key,
				e.Reason, e.Error, e.Payload)
		}
	}
	return nil
}

func kindName(k state.OutboxKind) string {
	if k == state.OutboxLate {
		return "late"
	}
	return "dead-letter"
}

func (h *harness) step(ctx context.Context, st Step) error {
	h.ran++
	switch {
	case st.Restart:
		h.close(ctx)
		return h.open(ctx)
	case st.expect:
		got := h.emitted
		h.emitted = nil
		if diff := Diff(st.Expect, got); diff != "" {
			return fmt.Errorf("%w at line %d:\n%s", ErrExpectation, st.Line, diff)
		}
		return nil
	}
	if st.Drain {
		if _, err := h.eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: h.lastAt, Drain: true}); err != nil {
			return fmt.Errorf("scenario: line %d: %w", st.Line, err)
		}
		return nil
	}
	h.lastAt = *st.At
	rows := make([]engine.Row, 0, len(st.Rows))
	for _, r := range st.Rows {
		rows = append(rows, engine.Row{Data: r, Sequence: uint64(len(rows) + 1)})
	}
	for _, in := range st.Inputs {
		for _, r := range in.Rows {
			rows = append(rows, engine.Row{Data: r, Sequence: uint64(len(rows) + 1), Input: h.inputs[in.Name]})
		}
	}
	in := engine.BatchInput{ProcessingTimeMs: *st.At, Rows: rows}
	for {
		rep, err := h.eng.RunBatch(ctx, in)
		if err != nil {
			return fmt.Errorf("scenario: line %d: %w", st.Line, err)
		}
		if !rep.NeedsNoDataBatch {
			return nil
		}
		in = engine.BatchInput{ProcessingTimeMs: *st.At}
	}
}

// Diff compares expected and actual rows as JSON values, ignoring order (as multisets). It
// returns "" when they are equal, else a readable report.
func Diff(want, got []json.RawMessage) string {
	canon := func(rows []json.RawMessage) ([]string, error) {
		out := make([]string, len(rows))
		for i, r := range rows {
			c, err := Canonical(r)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	w, err := canon(want)
	if err != nil {
		return "expect holds invalid JSON: " + err.Error()
	}
	g, _ := canon(got)
	counts := map[string]int{}
	for _, s := range w {
		counts[s]++
	}
	for _, s := range g {
		counts[s]--
	}
	var missing, extra []string
	for s, n := range counts {
		for ; n > 0; n-- {
			missing = append(missing, s)
		}
		for ; n < 0; n++ {
			extra = append(extra, s)
		}
	}
	if len(missing) == 0 && len(extra) == 0 {
		return ""
	}
	sort.Strings(missing)
	sort.Strings(extra)
	var b strings.Builder
	fmt.Fprintf(&b, "  expected %d row(s), got %d\n", len(w), len(g))
	for _, s := range missing {
		fmt.Fprintf(&b, "  - missing:    %s\n", s)
	}
	for _, s := range extra {
		fmt.Fprintf(&b, "  + unexpected: %s\n", s)
	}
	if len(g) > 0 {
		b.WriteString("  emitted, in order:\n")
		for _, s := range g {
			fmt.Fprintf(&b, "    %s\n", s)
		}
	}
	return b.String()
}

// Canonical returns the canonical text of a JSON value: object keys sorted, numbers by value
// (2 and 2.0 are equal), no insignificant space.
func Canonical(v json.RawMessage) (string, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return "", err
	}
	b, err := json.Marshal(x)
	return string(b), err
}
