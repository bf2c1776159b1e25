// Package groupstate is the Go SDK for writing groupstate handlers: the per-key function of a
// Spark-style flatMapGroupsWithState stream, compiled to WebAssembly with the standard Go
// toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o handler.wasm ./handler
//
// A handler is a package main with an empty main function that registers its function in init:
//
//	package main
//
//	import groupstate "github.com/groupstate/groupstate/sdk/go"
//
//	type login struct{}
//	type count struct{ N int `json:"n"` }
//
//	func init() {
//		groupstate.Handle(func(key groupstate.Key, rows iter.Seq[login],
//			state *groupstate.GroupState[count], out *groupstate.Emitter[count]) error {
//			c, _ := state.GetOption()
//			for range rows {
//				c.N++
//			}
//			out.Emit(c)
//			return state.Update(c)
//		})
//	}
//
//	func main() {}
//
// The host calls the handler once per key and micro-batch with that key's new rows and a state
// handle, and once more, with no rows and [GroupState.HasTimedOut] true, when a timeout the
// handler set expires. The state handle follows Spark's GroupState exactly (see the method
// docs and docs/semantics.md).
//
// There are two layers:
//
//   - [Handle] (typed): rows are decoded from JSON into R, the state is a JSON value of type S,
//     emitted values of type O are encoded to JSON.
//   - [HandleRaw] (raw): rows, state and emitted rows are bytes, nothing is decoded and nothing
//     is allocated per row.
//
// The typed layer uses encoding/json unless a type implements json.Unmarshaler (rows, state)
// or [JSONAppender] (state, outputs); package github.com/groupstate/groupstate/sdk/go/jsonobj
// writes those methods without reflection, which matters most under WebAssembly (see
// [Typed]).
//
// [OnInit] receives the deployment's config once per instance, and [Log] writes to the host's
// log.
//
// # transformWithState handlers (ABI v2)
//
// ABI v2 (abi/README.md section 9) is a draft that may still change; the runtime runs v2
// modules, and samples/carts/go is a complete processor.
//
// A [StatefulProcessor] follows Spark 4's transformWithState (Flink's KeyedProcessFunction):
// each key holds several named state variables, declared once in Init, and any number of
// timers. [ValueState] holds one value, [ListState] an ordered list, [MapState] values under
// string keys; each may have a TTL ([WithTTL]). Values are JSON, with the conventions of the
// typed layer. The state is not sent with the call: reads go to the host through the
// groupstate.state import, a page at a time for lists and maps, and writes are buffered and
// sent with the next read or the call's result, so appending to a long list or setting one
// entry of a big map costs one operation, never the collection.
//
//	package main
//
//	import (
//		"iter"
//		"time"
//
//		groupstate "github.com/groupstate/groupstate/sdk/go"
//	)
//
//	type click struct{ Page string `json:"page"` }
//	type visit struct {
//		Page  string `json:"page"`
//		Count int    `json:"count"`
//	}
//
//	type visits struct {
//		pages *groupstate.MapState[int]
//	}
//
//	func (p *visits) Init(h *groupstate.ProcessorHandle) error {
//		p.pages = groupstate.NewMapState[int](h, "pages", groupstate.WithTTL(24*time.Hour))
//		return nil
//	}
//
//	func (p *visits) HandleInputRows(user groupstate.Key, rows iter.Seq[click], t *groupstate.Timers, out *groupstate.Emitter[visit]) error {
//		for c := range rows {
//			n, _ := p.pages.GetOption(c.Page)
//			if err := p.pages.Update(c.Page, n+1); err != nil {
//				return err
//			}
//		}
//		return t.Register(t.CurrentProcessingTimeMs() + time.Hour.Milliseconds())
//	}
//
//	func (p *visits) HandleExpiredTimer(user groupstate.Key, timerMs int64, t *groupstate.Timers, out *groupstate.Emitter[visit]) error {
//		for page, n := range p.pages.All() {
//			out.Emit(visit{Page: page, Count: n})
//		}
//		p.pages.Clear()
//		return nil
//	}
//
//	func init() { groupstate.Process(&visits{}) }
//
//	func main() {}
//
// The host calls HandleInputRows once per key and batch with its rows, HandleExpiredTimer once
// per expired timer (after the batch's data calls, in timestamp order), and, with
// --initial-state, the optional [InitialStateHandler] once per key of the file (by default the
// SDK sets the variables from it). A failing call (an error, a panic, a refused state request)
// fails its key only, and none of its writes take effect.
//
// A deployment with several named inputs (the spec's inputs list, e.g. the two sides of a
// stream-stream join) calls the processor with a key's rows of every input: a row type that
// embeds [InputName] gets each row's input name, and [ProcessorHandle.Inputs] lists the names
// at Init.
//
// A module registers either a handler ([Handle], [HandleRaw]: ABI v1) or one processor
// ([Process]: ABI v2), never both; gs_abi_version reports which. The variable handles, the
// [Timers] and the [Emitter] are valid only inside the calls of the processor, which run one
// at a time on the module's goroutine: no locking is needed, and nothing may be used from
// another goroutine or kept for a later call. To drive a processor's [Module] natively, give it
// a [StateHost] with [Module.SetStateHost].
//
// Under wasip1 the package exports the ABI v1 functions (gs_abi_version, gs_alloc, gs_init,
// gs_process; gs_abi_version returns 2 for a processor's module) and the group cell
// gs_group_cell, and imports groupstate.log (and groupstate.group_begin and groupstate.state,
// only in a module that registers a processor), see package
// github.com/groupstate/groupstate/abi. On other platforms the same code builds natively and
// a [Module] can be driven directly with ABI buffers, which is how tests and benchmarks run a
// handler without WebAssembly.
package groupstate
