// Command sessions is event-time sessionization: a user's events belong to one session until
// a gap of more than config.gap of event time without events; a session is emitted when a
// later event opens the next one, or when the watermark passes its end plus the gap. The
// handler is in package session (./session), so that benchmarks can also run it natively.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sessions.wasm .
package main

import "github.com/groupstate/groupstate/samples/sessions/go/session"

func init() { session.Register(nil) }

func main() {}
