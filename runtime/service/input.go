package service

import (
	"context"
	"fmt"

	"github.com/groupstate/groupstate/runtime/internal/input"
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
func (r *runner) startInput(ctx context.Context, held <-chan error) *inputOpen {
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
func (r *runner) openInput(ctx context.Context, t *timings, held <-chan error) (string, *input.Source, error) {
	if r.shadowing() {
		return r.openShadowInput(ctx, t, held)
	}
	sp := r.spec
	inStream, err := r.ensureStreams(ctx)
	t.mark("input_streams")
	if err != nil {
		return "", nil, err
	}
	consumer, subjects := r.consumerName(), sp.Input.Subjects
	if sp.HasInputs() {
		subjects = []string{input.InputsFilter(r.inputOf)} // everything the inputs stream holds
	}
	if r.parts > 1 {
		// The partition reads what the router (run with partition 0) routed to it, or, with
		// key.subject_token, what the server put on its subjects.
		inStream = input.PartitionedStream(r.inputOf)
		consumer = r.consumerName()
		subjects = []string{input.PartitionFilter(r.inputOf, r.part, r.bySubject())}
	}
	src, err := input.NewSource(ctx, r.env.js, inStream, consumer, subjects, r.sourceOptions(t, held)...)
	t.mark("input_consumer")
	if err != nil {
		r.deps.forgetStreams(r.rec) // the next open ensures them again
		return "", nil, fmt.Errorf("input consumer: %w", err)
	}
	return inStream, src, nil
}

// consumerName is the name of the durable consumer r reads (see consumerName).
func (r *runner) consumerName() string { return consumerName(r.spec.Name, r.part, r.parts) }

// consumerName is the name of the durable consumer that partition part of deployment name,
// of parts partitions, reads: the deployment's, with partitions one per partition.
func consumerName(name string, part, parts int) string {
	if parts > 1 {
		return input.ConsumerName(fmt.Sprintf("%s-p%d", name, part))
	}
	return input.ConsumerName(name)
}

// sourceOptions are the options of r's consumer: with held not nil, the rewind waits for it
// (see startInput).
func (r *runner) sourceOptions(t *timings, held <-chan error) []input.SourceOption {
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
