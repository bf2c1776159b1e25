// Package output is how groupstate publishes: the [Publisher] that turns a batch's outbox
// entries into NATS messages (outputs, dead letters, late rows, manifests) with their
// message ids and headers, and awaits their acknowledgements on a subscription of its own
// (pubacks.go). Only this package maps outbox entries to headers.
package output
