package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/api"
	"github.com/groupstate/groupstate/state"
)

// DrainReport is what a drain did, summed over the deployment's partitions.
type DrainReport struct {
	// Partitions is the number of units drained: 1, or the deployment's partitions.
	Partitions int
	// TimeoutCalls counts the handler calls of timeouts the drain fired; Emitted the rows
	// they emitted.
	TimeoutCalls, Emitted int
}

// Drain asks the runtimes that run the deployment to run its last batch (docs/semantics.md,
// "transformWithState handlers", rule 9; Flink's stop --drain): each partition finishes the
// batch in flight, stops reading input (rows not run yet stay in the input stream), fires
// every timeout its keys hold as if time and the watermark had passed them, publishes what
// the calls emit, reads drained in its status, and runs nothing more. It waits for every
// partition, asking again while a partition has no runtime (a takeover in progress), until
// ctx ends. It does not undeploy: call [Client.Undeploy] next; until then a restart of a
// runtime resumes the deployment, and a new drain fires the timeouts set since.
//
// Stop the producers and let the deployment catch up (status: lag 0) first: rows that
// arrive after a partition drained are not run.
func (c *Client) Drain(ctx context.Context, name string) (DrainReport, error) {
	if err := c.mayAsk(ctx, "drain "+name, api.VerbDrain, name); err != nil {
		return DrainReport{}, err
	}
	d, err := c.Get(ctx, name)
	if err != nil {
		return DrainReport{}, err
	}
	parts := max(d.Spec.Partitions, 1)
	rep := DrainReport{Partitions: parts}
	for p := range parts {
		unit := name
		if parts > 1 {
			unit = state.PartitionName(name, p)
		}
		var reply api.DrainReply
		for {
			rctx, cancel := context.WithTimeout(ctx, drainRequestTimeout)
			err = c.request(rctx, api.Subject(api.VerbDrain, unit), struct{}{}, &reply)
			cancel()
			if err == nil || !errors.Is(err, ErrNoRuntime) || ctx.Err() != nil {
				break
			}
			select {
			case <-time.After(500 * time.Millisecond):
			case <-ctx.Done():
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return rep, fmt.Errorf("client: draining %s: %w", unit, err)
		}
		rep.TimeoutCalls += reply.TimeoutCalls
		rep.Emitted += reply.Emitted
	}
	return rep, nil
}

// drainRequestTimeout bounds one drain request: the runtime answers once its drain batch
// committed and published, within its own bound of two minutes.
const drainRequestTimeout = 2*time.Minute + 10*time.Second
