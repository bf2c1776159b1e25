package output

import (
	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
)

// SinkStream is a stream that keeps what a deployment publishes: its outputs, its dead
// letters or its late rows.
type SinkStream struct {
	// What names it in errors: "output", "dead-letter" or "late".
	What string
	// Options ensure it (natsio.EnsureStream) or check it (natsio.CheckStream); the caller
	// sets Avoid to the deployment's input stream.
	Options natsio.StreamOptions
}

// SinkStreams returns the streams the deployment of sp publishes to (a sink without a
// subject has none): each the spec's stream, else the stream that already captures the
// subject, else the deployment's default (topology.OutputStream, ...); a duplicate window
// wide enough for exactly-once publishing; the spec's max_age (the default on creation); owned
// by the deployment, so that a stream someone else made is never changed (natsio.ErrForeignStream).
// replicas is the replica count of a stream created (0: natsio.DefaultReplicas).
func SinkStreams(sp *spec.Spec, replicas int) []SinkStream {
	sinks := []struct {
		what, fallback string
		sink           spec.SinkSpec
	}{
		{"output", topology.OutputStream(sp.Name), spec.SinkSpec{Subject: sp.Output.Subject, Stream: sp.Output.Stream, MaxAge: sp.Output.MaxAge}},
		{"dead-letter", topology.DeadLetterStream(sp.Name), sp.DeadLetter},
		{"late", topology.LateStream(sp.Name), sp.Late},
	}
	var out []SinkStream
	for _, s := range sinks {
		if s.sink.Subject == "" {
			continue
		}
		out = append(out, SinkStream{What: s.what, Options: natsio.StreamOptions{Name: s.sink.Stream, Fallback: s.fallback,
			Subjects: []string{s.sink.Subject}, Duplicates: natsio.MinDuplicateWindow, MaxAge: s.sink.MaxAge.Std(),
			CreateMaxAge: spec.DefaultStreamMaxAge, Replicas: replicas, Owner: sp.Name}})
	}
	return out
}
