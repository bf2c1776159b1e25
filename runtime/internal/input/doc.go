// Package input is how groupstate reads streams: the [Source] of a deployment's input (a
// durable pull consumer whose pull requests it sends itself, so that no delivery is lost or
// skipped, see pull.go), the [StreamReader] that reads what a stream holds in order, for
// history and replay, and the streams a deployment reads when its input is not one stream
// as published: the partitioned stream that the [Router] fills (router.go) or the server
// fills by sourcing the input ([EnsureSourcedPartitionedStream], sourced.go), and the inputs
// stream of a deployment with several inputs ([EnsureInputsStream], inputs.go).
package input
