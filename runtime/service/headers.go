package service

import "github.com/groupstate/groupstate/runtime/internal/natsio"

// Header names on the messages the service publishes: every output, dead letter and late
// row carries HeaderDeployment, HeaderKey (when it has a key) and HeaderBatch, and the
// Nats-Msg-Id that makes redeliveries duplicates; dead letters and late rows add
// HeaderReason (one of the engine's Reason constants, or "too_large_to_publish"),
// HeaderError, and HeaderSubject and HeaderSequence of the input row; the dead letter of a
// failed timeout call has HeaderTimeoutCall "true".
const (
	HeaderDeployment  = natsio.HeaderDeployment
	HeaderKey         = natsio.HeaderKey
	HeaderBatch       = natsio.HeaderBatch
	HeaderReason      = natsio.HeaderReason
	HeaderError       = natsio.HeaderError
	HeaderSubject     = natsio.HeaderSubject
	HeaderSequence    = natsio.HeaderSequence
	HeaderTimeoutCall = natsio.HeaderTimeoutCall
)
