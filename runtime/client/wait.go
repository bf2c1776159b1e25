package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// Errors of [Client.WaitReady].
var (
	// ErrNotReady is returned when the deployment did not become ready in time; the message
	// says what it was waiting for and the runtime's last word.
	ErrNotReady = errors.New("not ready")
	// ErrStartFailed is returned when the runtime failed to start the deployment; the message
	// has its reason.
	ErrStartFailed = errors.New("the deployment failed to start")
)

// waitPoll is how often WaitReady looks.
const waitPoll = 100 * time.Millisecond

// WaitReady waits until deployment d, as [Client.Deploy] returned it, is ready: its input
// streams exist (so a row published now, core NATS or JetStream, is kept and processed) and,
// when running is true, a runtime runs this revision of it (every partition). progress, when
// not nil, is told each new thing it waits for. It returns [ErrStartFailed] with the
// runtime's reason when the revision failed to start, and [ErrNotReady] saying what it waited
// for when ctx ends first.
func (c *Client) WaitReady(ctx context.Context, d *Deployment, running bool, progress func(string)) error {
	waitingFor := ""
	say := func(what string) {
		if what != waitingFor && progress != nil {
			progress(what)
		}
		waitingFor = what
	}
	var last *Status
	for {
		st, err := c.Status(ctx, d.Name)
		if err == nil && st.DeployedAt.Equal(d.DeployedAt) && st.ModuleDigest == d.ModuleDigest {
			last = st
			if st.State == StatusFailed {
				return fmt.Errorf("%w: %s", ErrStartFailed, st.Error)
			}
		}
		switch {
		case !c.inputStreamsExist(ctx, d):
			say("the runtime to create the input streams")
		case !running:
			return nil
		case last != nil && Runs(last.State):
			return nil
		default:
			say("the runtime to run it")
		}
		select {
		case <-ctx.Done():
			why := "no runtime took it (is groupstate serve running?)"
			if last != nil {
				why = fmt.Sprintf("its status is %s", last.State)
				if last.Error != "" {
					why += ": " + last.Error
				}
			}
			return fmt.Errorf("%w: %s after waiting for %s; %s", ErrNotReady, d.Name, waitingFor, why)
		case <-time.After(waitPoll):
		}
	}
}

// inputStreamsExist tells whether the streams d's rows are published to exist: its input
// stream (or, with several inputs, each input's). A shadow reads its primary's: there is
// nothing of its own to wait for.
func (c *Client) inputStreamsExist(ctx context.Context, d *Deployment) bool {
	if d.ShadowOf != "" {
		return true
	}
	sp, inputOf := d.RunSpec(), d.Name
	if d.InputOf != "" {
		inputOf = d.InputOf
	}
	var opts []natsio.StreamOptions
	if sp.HasInputs() {
		for _, in := range sp.Inputs {
			opts = append(opts, input.NamedStreamOptions(in, inputOf, 0))
		}
	} else {
		opts = append(opts, input.StreamOptions(sp, inputOf, 0))
	}
	for _, o := range opts {
		name, err := natsio.ResolveStream(ctx, c.js, o)
		if err != nil {
			return false // looked up again at the next poll
		}
		if _, err := c.js.Stream(ctx, name); err != nil {
			return false
		}
	}
	if sp.HasInputs() {
		if _, err := c.js.Stream(ctx, topology.InputsStream(inputOf)); err != nil {
			return false
		}
	}
	return true
}
