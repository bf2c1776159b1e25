// Package input is how groupstate reads streams: the [Source] of a deployment's input (a
// durable pull consumer whose pull requests it sends itself, so that no delivery is lost or
// skipped, see pull.go) and the [StreamReader] that reads what a stream holds in order, for
// history and replay.
package input
