// Package nativehook lets groupstate's own tests and benchmarks run a handler compiled
// natively (the Go SDK's *groupstate.Module built for the host) in an engine, so the WASM
// build of a handler can be compared with the very same code in the very same engine. It is
// not public API: users always run modules.
package nativehook

import "github.com/groupstate/groupstate/runtime/internal/handler"

// Use makes the engine configuration cfg (an *engine.Config) run mods in-process instead of
// a WebAssembly module: one, or several instances of the same handler, among which each call's
// groups are split and run in parallel (as a module's instances are). Package engine sets it
// when it is initialized; it panics on anything but an *engine.Config.
var Use func(cfg any, mods ...handler.BufferModule)
