package service

import "github.com/groupstate/groupstate/runtime/internal/output"

// Header names on the messages the service publishes: every output, dead letter and late
// row carries HeaderDeployment, HeaderKey (when it has a key) and HeaderBatch, and the
// Nats-Msg-Id that makes redeliveries duplicates; dead letters and late rows add
// HeaderReason (one of the engine's Reason constants, "too_large_to_publish" or "unpublishable"),
// HeaderError, and HeaderSubject and HeaderSequence of the input row; the dead letter of a
// failed timeout call has HeaderTimeoutCall "true".
const (
	HeaderDeployment  = output.HeaderDeployment  // "Groupstate-Deployment"
	HeaderKey         = output.HeaderKey         // "Groupstate-Key"
	HeaderBatch       = output.HeaderBatch       // "Groupstate-Batch"
	HeaderReason      = output.HeaderReason      // "Groupstate-Reason"
	HeaderError       = output.HeaderError       // "Groupstate-Error"
	HeaderSubject     = output.HeaderSubject     // "Groupstate-Subject"
	HeaderSequence    = output.HeaderSequence    // "Groupstate-Sequence"
	HeaderTimeoutCall = output.HeaderTimeoutCall // "Groupstate-Timeout-Call"
)
