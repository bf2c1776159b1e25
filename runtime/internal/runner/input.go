package runner

import (
	"context"
	"fmt"

	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// inputOpen is the opening of a runner's input, which may run while the runner's state is
// restored (a takeover): its streams ensured and the consumer it reads created and rewound
// to its ack floor. Nothing of it depends on the state; what does (reconcile) comes after.
type inputOpen struct {
	done   chan struct{}
	stream string // the stream the consumer reads
	src    *input.Source
	err    error
	steps  []any // how long each step took (see timings)
}

// startInput starts opening r's input in its own goroutine; wait returns it. Nothing else may
// open r's input until then (see runner.open). With held not nil, the consumer is rewound
// (which disturbs whoever reads it: see input.BeforeRewind) only once held says that r
// holds its partition (nil); an error from it ends the opening with that error.
func (r *Runner) startInput(ctx context.Context, held <-chan error) *inputOpen {
	in := &inputOpen{done: make(chan struct{})}
	go func() {
		defer close(in.done)
		t := startTimings()
		in.stream, in.src, in.err = r.openInput(ctx, t, held)
		in.steps = t.steps
	}()
	return in
}

// wait waits for the opening to end and returns the input stream and the consumer on it.
func (in *inputOpen) wait() (string, *input.Source, error) {
	<-in.done
	return in.stream, in.src, in.err
}

// openInput ensures r's streams and creates the consumer it reads, rewound to its ack floor,
// marking each step in t.
func (r *Runner) openInput(ctx context.Context, t *timings, held <-chan error) (string, *input.Source, error) {
	if r.shadowing() {
		return r.openShadowInput(ctx, t, held)
	}
	sp := r.spec
	inStream, err := r.ensureStreams(ctx)
	t.mark("input_streams")
	if err != nil {
		return "", nil, err
	}
	// With partitions, the partition reads what the router (run with partition 0) routed to
	// it, or, with key.subject_token, what the server put on its subjects; with several
	// inputs, everything the inputs stream holds.
	inStream, subjects := topology.Read(sp, r.inputOf, r.part, inStream)
	src, err := input.NewSource(ctx, r.env.JS, inStream, r.consumerName(), subjects, r.sourceOptions(t, held)...)
	t.mark("input_consumer")
	if err != nil {
		r.deps.ForgetStreams(r.rec) // the next open ensures them again
		return "", nil, fmt.Errorf("input consumer: %w", err)
	}
	return inStream, src, nil
}

// consumerName is the name of the durable consumer r reads (see topology.PartitionConsumer).
func (r *Runner) consumerName() string {
	return topology.PartitionConsumer(r.spec.Name, r.part, r.parts)
}

// sourceOptions are the options of r's consumer: with held not nil, the rewind waits for it
// (see startInput).
func (r *Runner) sourceOptions(t *timings, held <-chan error) []input.SourceOption {
	var opts []input.SourceOption
	if held != nil {
		opts = append(opts, input.BeforeRewind(func(ctx context.Context) error {
			select {
			case err := <-held:
				t.mark("input_consumer_until_held")
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}))
	}
	return opts
}
