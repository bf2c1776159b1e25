package engine

import (
	"context"

	"github.com/groupstate/groupstate/state"
)

// Sink receives what a batch produced, after the batch committed: emitted rows, dead letters
// and late rows, in commit order. The engine keeps entries in the state store's outbox until
// Deliver returns nil, and delivers them again after an error or a crash, so a Sink must be
// idempotent (the NATS service's publishes carry a message id derived from the entry's
// [state.OutboxID], which the output stream de-duplicates). The engine calls it on the
// goroutine that drives the engine, never concurrently.
type Sink interface {
	// Deliver delivers entries, in order, and returns nil once all of them are stored where
	// they go (they are then deleted from the outbox). The entries and their slices belong
	// to the engine once Deliver returns: a Sink that keeps them must copy them. ctx is the
	// delivering RunBatch's.
	Deliver(ctx context.Context, deployment string, entries []state.OutboxEntry) error
}

// SinkFunc adapts a function to [Sink].
type SinkFunc func(ctx context.Context, deployment string, entries []state.OutboxEntry) error

// Deliver implements [Sink].
func (f SinkFunc) Deliver(ctx context.Context, deployment string, entries []state.OutboxEntry) error {
	return f(ctx, deployment, entries)
}

// PipelinedSink is a [Sink] that can send a batch's entries and have their acknowledgements
// awaited later. With one, the engine calls Start with a batch's entries right after the
// batch committed, and the Delivery's Wait after the next batch committed (or when a no-data
// batch is skipped, or in Close), so the next batch runs while the sink stores this one's.
//
// Order is kept: the engine starts a delivery only after every earlier one's Wait returned
// nil. After a failed Wait it starts nothing more: the next RunBatch first delivers the whole
// outbox again with Deliver, and returns [ErrDeliveryPending] (running no batch) while that
// fails. Start, Wait and Deliver are called on the goroutine that drives the engine.
type PipelinedSink interface {
	Sink
	// Start sends entries, in order, and returns at once; the returned Delivery (not nil)
	// reports the outcome. The entries and their slices belong to the delivery until its
	// Wait returned; they are not modified before then. ctx is the committing RunBatch's.
	Start(ctx context.Context, deployment string, entries []state.OutboxEntry) Delivery
}

// Delivery is a delivery that a [PipelinedSink] started. The engine calls Wait once.
type Delivery interface {
	// Wait blocks until every entry of the delivery was acknowledged (nil), one failed, or
	// ctx ended; either way nothing of the delivery is still being sent when it returns.
	Wait(ctx context.Context) error
}

// Reasons a row is dead-lettered or dropped, in [state.OutboxEntry].Reason (docs/semantics.md,
// "Beyond Spark: per-key failures"); the entry's Error says more.
const (
	// ReasonInvalidJSON: the row is not valid JSON.
	ReasonInvalidJSON = "invalid_json"
	// ReasonNotUTF8: the row holds bytes that are not valid UTF-8.
	ReasonNotUTF8 = "not_utf8"
	// ReasonNotObject: the row is JSON but not an object.
	ReasonNotObject = "not_object"
	// ReasonMissingKey: the key field is missing or null.
	ReasonMissingKey = "missing_key"
	// ReasonBadKey: the key field is not a string or a number.
	ReasonBadKey = "bad_key"
	// ReasonMissingEventTime: the event-time field is missing or null.
	ReasonMissingEventTime = "missing_event_time"
	// ReasonBadEventTime: the event-time field is neither epoch milliseconds nor an RFC 3339
	// timestamp.
	ReasonBadEventTime = "bad_event_time"
	// ReasonEventTimeAhead: the row's event time is further ahead of the batch's processing
	// time than event_time.max_ahead; it did not move the watermark.
	ReasonEventTimeAhead = "event_time_ahead"
	// ReasonTooLarge: the row is larger than limits.max_row_bytes.
	ReasonTooLarge = "row_too_large"
	// ReasonHandlerError: the call for the row's key failed under on_error: dead_letter (a
	// failed timeout call's entry has no payload and TimeoutCall set).
	ReasonHandlerError = "handler_error"
	// ReasonLate: the row was late (event time at or before the watermark) and dropped; it
	// goes to late.subject, as an entry of kind [state.OutboxLate], only when one is set.
	ReasonLate = "late"
	// ReasonWrongPartition: the row's key belongs to another partition than the one whose
	// input it arrived on: with key.subject_token the NATS server partitions rows by their
	// subject's token, and the row's key field disagrees with it (see
	// [Config.WrongPartition]). It is not processed in the wrong partition.
	ReasonWrongPartition = "wrong_partition"
	// ReasonQuarantined: the row's key is quarantined (its calls kept failing as a whole: a
	// trap, or the time, memory or stack limit), so it was not called; the error names the
	// last failure. The quarantine ends with the deployment's next revision.
	ReasonQuarantined = "quarantined"
)
