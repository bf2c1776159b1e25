package engine

import (
	"context"

	"github.com/groupstate/groupstate/state"
)

// Sink receives what a batch produced, after the batch committed: emitted rows, dead letters
// and late rows, in commit order. The engine keeps entries in the state store's outbox until
// Deliver returns nil, and delivers them again after an error or a crash, so a Sink must be
// idempotent (the NATS service's publishes carry a message id derived from the entry's
// [state.OutboxID], which the output stream de-duplicates). The entries and their slices
// belong to the engine once Deliver returns.
type Sink interface {
	Deliver(ctx context.Context, deployment string, entries []state.OutboxEntry) error
}

// SinkFunc adapts a function to [Sink].
type SinkFunc func(ctx context.Context, deployment string, entries []state.OutboxEntry) error

// Deliver implements [Sink].
func (f SinkFunc) Deliver(ctx context.Context, deployment string, entries []state.OutboxEntry) error {
	return f(ctx, deployment, entries)
}

// PipelinedSink is a [Sink] that can send a batch's entries and have their acknowledgements
// awaited later. With one, the engine sends a batch's outputs after its commit and awaits them
// after the next batch commits, so the next batch runs while the sink stores this one's.
// Order is kept: the engine starts a delivery only after every earlier one succeeded.
type PipelinedSink interface {
	Sink
	// Start sends entries and returns at once; the returned Delivery reports the outcome.
	// The entries belong to the delivery until its Wait returned.
	Start(ctx context.Context, deployment string, entries []state.OutboxEntry) Delivery
}

// Delivery is a delivery that a [PipelinedSink] started.
type Delivery interface {
	// Wait blocks until every entry of the delivery was acknowledged (nil), one failed, or
	// ctx ended; either way nothing of the delivery is still being sent when it returns.
	Wait(ctx context.Context) error
}

// Reasons a row is dead-lettered or dropped, in [state.OutboxEntry].Reason.
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
