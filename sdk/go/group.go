package groupstate

import (
	"iter"

	"github.com/groupstate/groupstate/abi"
)

// RawHandler is a handler of the raw layer: it is called once per key and batch (and once per
// expired timeout) with that key's group. An error fails the group: the host applies the
// deployment's on_error policy to it, and nothing the call did (state change, timeout,
// emitted rows) takes effect.
type RawHandler func(g *RawGroup) error

// RawGroup is one key's call: its key, its new rows, its state handle and a way to emit rows.
// It and everything it returns are valid only during the call.
type RawGroup struct {
	index int
	key   Key
	count int
	rows  iter.Seq[[]byte]
	group *abi.Group // the rows' source, for the typed layer's allocation-free loop
	state RawState
	w     *abi.ResultWriter
	enc   *jsonEncoder
	err   error // first failure recorded by the typed layer
	typed any   // the typed layer's reusable handles (typed.go)
}

// Index returns the 0-based position of the group in the current batch of calls.
func (g *RawGroup) Index() int { return g.index }

// Key returns the group's key.
func (g *RawGroup) Key() Key { return g.key }

// Rows iterates over the group's rows in arrival order, each one input message (a JSON
// document) unchanged. The slices alias the host's input buffer: they are valid only during
// the call and must not be modified; copy what must outlive it. A timeout call has no rows.
// Rows may be iterated more than once.
func (g *RawGroup) Rows() iter.Seq[[]byte] { return g.rows }

// RowCount returns the number of rows.
func (g *RawGroup) RowCount() int { return g.count }

// State returns the group's state handle.
func (g *RawGroup) State() *RawState { return &g.state }

// Emit appends a copy of row to the group's output; each emitted row becomes one message on
// the deployment's output subject, in emission order. Rows of a failing call are discarded.
func (g *RawGroup) Emit(row []byte) { g.w.Emit(row) }

// fail records err as the group's failure unless one is recorded already.
func (g *RawGroup) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}
