package input

import (
	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
)

// StreamOptions returns the options of the stream the deployment of sp reads its one input
// from (natsio.EnsureStream), named after deployment inputOf (registry.Record.InputDeployment):
// the spec's input.stream, else the stream that already captures the input subjects, else
// topology.InputStream; owned by inputOf, so a stream someone else made is never changed.
// replicas is the replica count of a stream created (0: natsio.DefaultReplicas).
func StreamOptions(sp *spec.Spec, inputOf string, replicas int) natsio.StreamOptions {
	return natsio.StreamOptions{Name: sp.Input.Stream, Fallback: topology.InputStream(inputOf), Subjects: sp.Input.Subjects,
		MaxAge: sp.Input.MaxAge.Std(), CreateMaxAge: spec.DefaultStreamMaxAge, Replicas: replicas, Owner: inputOf}
}

// NamedStreamOptions is [StreamOptions] for input in of a deployment with several inputs
// (default stream topology.NamedInputStream).
func NamedStreamOptions(in spec.NamedInput, inputOf string, replicas int) natsio.StreamOptions {
	return natsio.StreamOptions{Name: in.Stream, Fallback: topology.NamedInputStream(inputOf, in.Name), Subjects: in.Subjects,
		MaxAge: in.MaxAge.Std(), CreateMaxAge: spec.DefaultStreamMaxAge, Replicas: replicas, Owner: inputOf}
}
