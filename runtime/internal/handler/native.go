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

// nativeMinGroups is the fewest groups a Native gives one module of several in a call: below
// it, a goroutine costs more than it saves.
const nativeMinGroups = 256

// Native runs BufferModules in-process through the same buffers a WASM module gets, so a
// comparison with the WASM build of the same code measures the sandbox, not the encoding.
// With several modules (instances of the same handler), a call's groups are split among them
// and run in parallel, as the WASM host splits a call among its instances; each module runs
// one part at a time. Safe for concurrent use (calls run one at a time).
type Native struct {
	mu     sync.Mutex
	mods   []BufferModule
	bufs   [][]byte // one encoding buffer per module
	closed bool
}

// NewNative wraps initialized modules: at least one, each an instance of the same handler.
func NewNative(mods ...BufferModule) *Native {
	return &Native{mods: mods, bufs: make([][]byte, len(mods))}
}

// Process implements Handler.
func (n *Native) Process(ctx context.Context, call *Call, results []Result) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	parts := min(len(n.mods), max(len(call.Groups)/nativeMinGroups, 1))
	if parts == 1 {
		n.run(0, call, results)
		return nil
	}
	var wg sync.WaitGroup
	per := (len(call.Groups) + parts - 1) / parts
	for p := range parts {
		lo, hi := p*per, min((p+1)*per, len(call.Groups))
		sub := &Call{ProcessingTimeMs: call.ProcessingTimeMs, WatermarkMs: call.WatermarkMs, Groups: call.Groups[lo:hi]}
		wg.Go(func() { n.run(p, sub, results[lo:hi]) })
	}
	wg.Wait()
	return nil
}

// run runs call on module i, its results into results.
func (n *Native) run(i int, call *Call, results []Result) {
	n.bufs[i] = Encode(n.bufs[i][:0], call)
	if err := Decode(n.mods[i].Process(n.bufs[i]), results); err != nil {
		FailAll(results, err)
	}
}

// Close implements Handler.
func (n *Native) Close(context.Context) error {
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	return nil
}
