package client

import (
	"context"
	"slices"

	"github.com/groupstate/groupstate/runtime/internal/registry"
)

// DeploymentStreams are the streams of a deployment that exist: those it reads and those it
// writes.
type DeploymentStreams struct {
	// Input are the streams it reads: its input streams (or, for a shadow, its primary's and
	// its primary's manifests), its partitioned stream, its inputs stream.
	Input []string `json:"input"`
	// Output are the streams it writes: outputs, dead letters, late rows, its changelog and
	// its manifests.
	Output []string `json:"output"`
}

// Streams returns the streams of deployment d (as [Client.Deploy] or [Client.Get] returned
// it) that exist now, each list sorted; a stream the runtime has not created yet is left out.
func (c *Client) Streams(ctx context.Context, d *Deployment) DeploymentStreams {
	rec := registry.Record{Name: d.Name, ShadowOf: d.ShadowOf, InputOf: d.InputOf}
	in, own := c.streamsOf(ctx, rec, d.RunSpec())
	existing := func(names []string) []string {
		out := []string{}
		for _, s := range names {
			if _, err := c.js.Stream(ctx, s); err == nil {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return DeploymentStreams{Input: existing(in), Output: existing(own)}
}
