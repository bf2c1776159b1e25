package groupstate

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/groupstate/groupstate/abi"
)

// ProcessorHandle is what a [StatefulProcessor]'s Init receives: the deployment's config and
// the means to declare state variables ([NewValueState], [NewListState], [NewMapState]). It is
// valid only during Init.
type ProcessorHandle struct {
	e      *v2Module
	config Config
}

// Config returns the deployment's config (name, timeout mode, config object).
func (h *ProcessorHandle) Config() Config { return h.config }

// Inputs returns the names of the deployment's inputs, in the spec's order, when its spec
// has several named inputs (the spec's inputs list; abi/README.md 9.3a), and nil when it has
// one input (input). A processor that joins inputs checks them here and fails its Init when
// they are not the ones it expects. Each row's input name is given by [InputName]. The slice
// is a copy.
func (h *ProcessorHandle) Inputs() []string { return slices.Clone(h.config.inputs) }

// VarOption configures a state variable at its declaration.
type VarOption func(*varOptions)

type varOptions struct {
	ttl    time.Duration
	ttlSet bool
}

// WithTTL gives a state variable a time to live (Spark's TTLConfig): each value, list element
// or map entry expires ttl after it was last written, judged at the batch's processing time
// (the batch that wrote it at T expires it at T + ttl, and a read at T' >= T + ttl no longer
// sees it). ttl is truncated to milliseconds and must be at least one millisecond.
func WithTTL(ttl time.Duration) VarOption {
	return func(o *varOptions) { o.ttl, o.ttlSet = ttl, true }
}

// stateVar is the part every state variable handle shares: its module and its index.
type stateVar struct {
	e    *v2Module
	idx  uint32
	name string
}

// encodeError returns the error of encoding a value of the variable: [ErrNullState] as it is,
// any other error prefixed with the variable's name.
func (v stateVar) encodeError(err error) error {
	if err == ErrNullState {
		return err
	}
	return fmt.Errorf("groupstate: encoding state variable %s: %w", v.name, err)
}

// decodeError returns the error of decoding a stored value of the variable.
func (v stateVar) decodeError(err error) error {
	return fmt.Errorf("groupstate: decoding state variable %s: %w", v.name, err)
}

// declare adds a variable to the declarations. An invalid declaration fails the module's init
// with a message that names it; declaring outside Init panics.
func (h *ProcessorHandle) declare(fn, name string, kind abi.VarKind, opts []VarOption, check func([]byte) error) stateVar {
	e := h.e
	if !e.declaring {
		panic(fmt.Sprintf("groupstate: %s(%q) called outside the processor's Init", fn, name))
	}
	var o varOptions
	for _, f := range opts {
		f(&o)
	}
	d := abi.VarDecl{Name: name, Kind: kind}
	err := abi.ValidateVarName(name)
	if err == nil && o.ttlSet {
		if d.TTLMs = o.ttl.Milliseconds(); d.TTLMs <= 0 {
			err = fmt.Errorf("ttl %v is not at least 1ms", o.ttl)
		}
	}
	for _, v := range e.vars {
		if err == nil && v.decl.Name == name {
			err = fmt.Errorf("declared twice")
		}
	}
	if err != nil && e.declErr == nil {
		e.declErr = fmt.Errorf("groupstate: state variable %q: %w", name, err)
	}
	e.vars = append(e.vars, varInfo{decl: d, check: check})
	return stateVar{e: e, idx: uint32(len(e.vars) - 1), name: name}
}

// codec encodes and decodes the values of a state variable as JSON: with encoding/json,
// unless T implements [JSONAppender] (encoding) or *T json.Unmarshaler (decoding), as in
// [Typed].
type codec[T any] struct {
	jenc       *jsonEncoder
	encScratch T                // the value being encoded
	fastEnc    JSONAppender     // bound to &encScratch
	decScratch T                // the value being decoded
	fastDec    json.Unmarshaler // bound to &decScratch
}

// bind sets up c's fast paths; c must not move afterwards.
func (c *codec[T]) bind(jenc *jsonEncoder) {
	c.jenc = jenc
	c.fastEnc, _ = any(&c.encScratch).(JSONAppender)
	c.fastDec, _ = any(&c.decScratch).(json.Unmarshaler)
}

// encode returns the JSON of v, valid until the module's next encoding. A value that encodes
// to null is [ErrNullState].
func (c *codec[T]) encode(v T) ([]byte, error) {
	b, err := encodeValue(c.jenc, c.fastEnc, &c.encScratch, v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, ErrNullState
	}
	return b, nil
}

// decode decodes the JSON b into a T.
func (c *codec[T]) decode(b []byte) (T, error) {
	var zero T
	if c.fastDec == nil {
		var v T
		err := json.Unmarshal(b, &v)
		return v, err
	}
	c.decScratch = zero
	err := c.fastDec.UnmarshalJSON(b)
	v := c.decScratch
	c.decScratch = zero
	return v, err
}

// check reports whether b decodes into a T.
func (c *codec[T]) check(b []byte) error {
	_, err := c.decode(b)
	return err
}
