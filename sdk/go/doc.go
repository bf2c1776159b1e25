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
// Under wasip1 the package exports the ABI v1 functions (gs_abi_version, gs_alloc, gs_init,
// gs_process) and imports groupstate.group_begin and groupstate.log, see package
// github.com/groupstate/groupstate/abi. On other platforms the same code builds natively and
// a [Module] can be driven directly with ABI buffers, which is how tests and benchmarks run a
// handler without WebAssembly.
package groupstate
