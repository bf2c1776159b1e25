package handler

import (
	"context"
	"sync"
)

// BufferModule is a handler module running in-process that speaks the ABI's buffers, such as
// a Go SDK *groupstate.Module compiled natively.
type BufferModule interface {
	Init(in []byte) []byte
	Process(in []byte) []byte
}

// Native runs a BufferModule in-process through the same buffers a WASM module gets, so a
// comparison with the WASM build of the same code measures the sandbox, not the encoding.
type Native struct {
	mu     sync.Mutex
	mod    BufferModule
	buf    []byte
	closed bool
}

// NewNative wraps an initialized module.
func NewNative(mod BufferModule) *Native { return &Native{mod: mod} }

// Process implements Handler.
func (n *Native) Process(ctx context.Context, call *Call, results []Result) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	n.buf = Encode(n.buf[:0], call)
	if err := Decode(n.mod.Process(n.buf), results); err != nil {
		FailAll(results, err)
	}
	return nil
}

// Close implements Handler.
func (n *Native) Close(context.Context) error {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	return nil
}
