package runner

import (
	"context"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/state"
)

// publisherSink is the NATS publisher as the engine's [engine.PipelinedSink].
type publisherSink struct{ *output.Publisher }

var _ engine.PipelinedSink = publisherSink{}

// Start implements [engine.PipelinedSink].
func (p publisherSink) Start(ctx context.Context, deployment string, entries []state.OutboxEntry) engine.Delivery {
	return p.Publisher.Start(ctx, deployment, entries)
}
