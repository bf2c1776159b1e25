// Package samples embeds the sessions sample's spec and module, so `groupstate demo` runs
// from any directory. The samples themselves are the folders beside this file.
package samples

import "embed"

// FS holds sessions/sessions.yaml and sessions/go/sessions.wasm.
//
//go:embed sessions/sessions.yaml sessions/go/sessions.wasm
var FS embed.FS
