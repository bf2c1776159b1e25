package runtime

import (
	"context"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/state"
)

// Sink receives what a batch produced, after the batch committed: emitted rows, dead letters
// and late rows, in commit order. The engine keeps entries in the state store's outbox until
// Deliver returns nil, and delivers them again after an error or a crash, so a Sink must be
// idempotent (the NATS sink publishes with a deterministic Nats-Msg-Id, see [MsgID]).
type Sink interface {
	Deliver(ctx context.Context, deployment string, entries []state.OutboxEntry) error
}

// SinkFunc adapts a function to [Sink].
type SinkFunc func(ctx context.Context, deployment string, entries []state.OutboxEntry) error

// Deliver implements [Sink].
func (f SinkFunc) Deliver(ctx context.Context, deployment string, entries []state.OutboxEntry) error {
	return f(ctx, deployment, entries)
}

// Header names on outputs and dead letters.
const (
	// HeaderDeployment names the deployment.
	HeaderDeployment = natsio.HeaderDeployment
	// HeaderKey carries the group key as a canonical JSON scalar.
	HeaderKey = natsio.HeaderKey
	// HeaderBatch carries the batch id.
	HeaderBatch = natsio.HeaderBatch
	// HeaderReason says why a row was dead-lettered (one of the Reason constants).
	HeaderReason = natsio.HeaderReason
	// HeaderError carries the error message of a dead letter.
	HeaderError = natsio.HeaderError
	// HeaderSubject is the subject the row arrived on.
	HeaderSubject = natsio.HeaderSubject
	// HeaderSequence is the row's input stream sequence.
	HeaderSequence = natsio.HeaderSequence
)

// Reasons a row is dead-lettered (HeaderReason).
const (
	ReasonInvalidJSON      = "invalid_json"
	ReasonNotUTF8          = "not_utf8"
	ReasonNotObject        = "not_object"
	ReasonMissingKey       = "missing_key"
	ReasonBadKey           = "bad_key"
	ReasonMissingEventTime = "missing_event_time"
	ReasonBadEventTime     = "bad_event_time"
	ReasonTooLarge         = "row_too_large"
	ReasonHandlerError     = "handler_error"
	ReasonLate             = "late"
)
