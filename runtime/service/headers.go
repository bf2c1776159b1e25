package service

import "github.com/groupstate/groupstate/runtime/internal/natsio"

// Header names on the messages the service publishes: every output, dead letter and late
// row carries HeaderDeployment, HeaderKey (when it has a key) and HeaderBatch, and the
// Nats-Msg-Id that makes redeliveries duplicates; dead letters and late rows add
// HeaderReason (one of the engine's Reason constants, "too_large_to_publish" or "unpublishable"),
// HeaderError, and HeaderSubject and HeaderSequence of the input row; the dead letter of a
// failed timeout call has HeaderTimeoutCall "true".
const (
	HeaderDeployment  = natsio.HeaderDeployment  // "Groupstate-Deployment"
	HeaderKey         = natsio.HeaderKey         // "Groupstate-Key"
	HeaderBatch       = natsio.HeaderBatch       // "Groupstate-Batch"
	HeaderReason      = natsio.HeaderReason      // "Groupstate-Reason"
	HeaderError       = natsio.HeaderError       // "Groupstate-Error"
	HeaderSubject     = natsio.HeaderSubject     // "Groupstate-Subject"
	HeaderSequence    = natsio.HeaderSequence    // "Groupstate-Sequence"
	HeaderTimeoutCall = natsio.HeaderTimeoutCall // "Groupstate-Timeout-Call"
)
