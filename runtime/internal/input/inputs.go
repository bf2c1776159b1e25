package input

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/subject"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// A deployment with several named inputs (the spec's inputs) reads one stream, its inputs
// stream ([InputsStream]), which the NATS server fills by sourcing each input's stream
// through one subject transform per input subject ([InputsSources]), putting each row on
//
//	gs.in.<deployment>.<input>.<the subject it was published on>
//
// so that one consumer, one position and one commit cover every input (exactly once as for
// one input), and the subject tells a row's input ([SplitInputsSubject]). The input streams
// are left as they are. The server remembers how far it sourced each (in the stream), so a row
// is copied once however often the stream's leader changes. See RATIONALE.md, "Several
// inputs read one stream".

// ErrInputsChanged is returned by [EnsureInputsStream] when the existing inputs stream
// sources other streams or through other transforms (another input's name, subjects or
// stream): the server would take a changed source for a new one and copy that input again
// from its start.
var ErrInputsChanged = errors.New("natsio: the inputs stream sources the inputs differently")

// NamedInput is one input of a deployment with several, for [InputsSources].
type NamedInput struct {
	// Name is the input's name in the spec.
	Name string
	// Stream is the stream that captures its subjects.
	Stream string
	// Subjects are its subjects.
	Subjects []string
}

// InputsSources returns the sources of deployment's inputs stream: one per distinct input
// stream (in the order of first use), each with one transform per subject of each input it
// captures, mapping the subject to "gs.in.<deployment>.<input>.<subject>" with every wildcard
// kept ({{wildcard(i)}} for the i-th '*', a '>' tail as it is).
func InputsSources(deployment string, inputs []NamedInput) []*jetstream.StreamSource {
	var out []*jetstream.StreamSource
	byStream := map[string]*jetstream.StreamSource{}
	for _, in := range inputs {
		src := byStream[in.Stream]
		if src == nil {
			src = &jetstream.StreamSource{Name: in.Stream}
			byStream[in.Stream] = src
			out = append(out, src)
		}
		for _, s := range in.Subjects {
			tokens := strings.Split(s, ".")
			wild := 0
			for j, t := range tokens {
				if t == "*" {
					wild++
					tokens[j] = "{{wildcard(" + strconv.Itoa(wild) + ")}}"
				}
			}
			src.SubjectTransforms = append(src.SubjectTransforms, jetstream.SubjectTransformConfig{
				Source: s, Destination: topology.InputsPrefix(deployment) + in.Name + "." + strings.Join(tokens, "."),
			})
		}
	}
	return out
}

// SplitInputsSubject returns the input name and the subject a row of deployment's inputs
// stream was published on, from the subject it has there; ok is false for a subject that is
// not one of the stream's.
func SplitInputsSubject(deployment, s string) (input, original string, ok bool) {
	rest, found := strings.CutPrefix(s, topology.InputsPrefix(deployment))
	if !found {
		return "", "", false
	}
	input, original, ok = strings.Cut(rest, ".")
	if !ok || input == "" || original == "" {
		return "", "", false
	}
	return input, original, true
}

// EnsureInputsStream creates or updates deployment's inputs stream ([InputsStream]): no
// subjects of its own, the sources of [InputsSources], file storage, limits retention, discard
// old, max_age maxAge, and replicas copies when it creates the stream. An existing stream
// keeps its replicas and storage and gets the max_age; one that sources the inputs otherwise
// is refused with [ErrInputsChanged] (the inputs are fixed at the first deploy). A source the
// server cannot set up (an input stream missing, say) does not fail the call: the stream's
// source info reports it.
func EnsureInputsStream(ctx context.Context, js jetstream.JetStream, deployment string, inputs []NamedInput, replicas int, maxAge time.Duration) error {
	if deployment == "" || len(inputs) == 0 {
		return errors.New("natsio: an inputs stream needs a deployment and inputs")
	}
	for _, in := range inputs {
		for _, s := range in.Subjects {
			if err := subject.CheckPattern(s); err != nil {
				return fmt.Errorf("natsio: input %s subject %q %v", in.Name, s, err)
			}
		}
	}
	srcs := InputsSources(deployment, inputs)
	name := topology.InputsStream(deployment)
	cfg := jetstream.StreamConfig{
		Name:        name,
		Description: "groupstate inputs of " + deployment + " (sourced from each input's stream)",
		Sources:     srcs,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      maxAge,
		Replicas:    natsio.ReplicasFor(js, replicas),
	}
	return ensureOwnStream(ctx, js, "inputs stream", cfg, func(old *jetstream.StreamConfig) (bool, error) {
		if len(old.Subjects) > 0 || !sameSources(old.Sources, srcs) {
			return false, fmt.Errorf("%w: %s sources %s, not %s (the inputs' names, subjects and streams are fixed at the first deploy); deploy under a new name",
				ErrInputsChanged, name, describeSources(old.Sources), describeSources(srcs))
		}
		if old.MaxAge == maxAge && old.Discard == jetstream.DiscardOld {
			return false, nil
		}
		old.MaxAge, old.Discard = maxAge, jetstream.DiscardOld
		old.Duplicates = natsio.CapDuplicates(old.Duplicates, maxAge)
		return true, nil
	})
}

// sameSources tells whether a and b source the same streams through the same transforms, in
// any order.
func sameSources(a, b []*jetstream.StreamSource) bool {
	if len(a) != len(b) {
		return false
	}
	byName := func(x, y *jetstream.StreamSource) int { return strings.Compare(x.Name, y.Name) }
	a, b = slices.SortedFunc(slices.Values(a), byName), slices.SortedFunc(slices.Values(b), byName)
	for i := range a {
		if a[i].Name != b[i].Name || !sameTransforms(a[i].SubjectTransforms, b[i].SubjectTransforms) {
			return false
		}
	}
	return true
}

// InputsPending returns how many rows of each named input deployment's inputs stream holds
// after sequence after (the rows not yet delivered to the deployment, of those the server
// sourced). It counts with one short-lived consumer per input (filtered to the input, starting
// after after, deleted at once), so call it seldom: a status, not every batch.
func InputsPending(ctx context.Context, js jetstream.JetStream, deployment string, names []string, after uint64) (map[string]uint64, error) {
	stream := topology.InputsStream(deployment)
	out := make(map[string]uint64, len(names))
	for _, name := range names {
		c, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
			FilterSubject:     topology.InputsPrefix(deployment) + name + ".>",
			DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:       after + 1,
			AckPolicy:         jetstream.AckNonePolicy,
			MemoryStorage:     true,
			InactiveThreshold: 10 * time.Second, // gone even if the delete below is not
		})
		if err != nil {
			return nil, fmt.Errorf("natsio: counting input %s's pending rows: %w", name, err)
		}
		out[name] = c.CachedInfo().NumPending
		_ = js.DeleteConsumer(ctx, stream, c.CachedInfo().Name)
	}
	return out, nil
}

// CheckInputsStream returns an error wrapping [ErrInputsChanged] when deployment's inputs
// stream exists and sources its inputs through other transforms than inputs' (another
// input's name or subjects; the streams are not compared, as inputs' Stream may not be known
// yet), nil when it does not exist or matches. It changes nothing, so a revision can be
// refused before the running one is touched.
func CheckInputsStream(ctx context.Context, js jetstream.JetStream, deployment string, inputs []NamedInput) error {
	st, err := js.Stream(ctx, topology.InputsStream(deployment))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natsio: looking up inputs stream %s: %w", topology.InputsStream(deployment), err)
	}
	transforms := func(srcs []*jetstream.StreamSource) []jetstream.SubjectTransformConfig {
		var out []jetstream.SubjectTransformConfig
		for _, s := range srcs {
			out = append(out, s.SubjectTransforms...)
		}
		return out
	}
	old, want := st.CachedInfo().Config.Sources, InputsSources(deployment, inputs)
	if !sameTransforms(transforms(old), transforms(want)) {
		return fmt.Errorf("%w: %s sources %s; this revision's inputs would need %s (the inputs' names, subjects and streams are fixed at the first deploy); deploy under a new name",
			ErrInputsChanged, topology.InputsStream(deployment), describeSources(old), describeSources(want))
	}
	return nil
}
