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
	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/subject"
	"github.com/groupstate/groupstate/runtime/internal/topology"
)

// A deployment whose key is also a token of its input subjects (key.subject_token) is split
// into partitions by the NATS server, with no router: its partitioned stream
// ([PartitionedStream]) sources the input stream through one subject transform per input
// subject ([PartitionTransforms]), which puts each row on
//
//	gs.kg.<deployment>.<p>.<the subject it was published on>
//
// p being {{partition(P,k)}} of the key's token, the function [partition.Of] computes. The
// input stream is left as it is, and every partition's consumer filters
// [PartitionFilter]; [InputSubject] gives a row back the subject it was published on. The
// server remembers how far it sourced (per source, in the stream), so a row is copied once
// however often the stream's leader changes. See RATIONALE.md, "The server splits the input".

// Errors of the server-partitioned stream.
var (
	// ErrSubjectToken is returned by [PartitionTransforms] (and
	// [EnsureSourcedPartitionedStream]) for input subjects the server cannot partition by the
	// token: no '*' at the token, overlapping subjects, or an invalid count of partitions.
	ErrSubjectToken = errors.New("natsio: input subjects cannot be partitioned by the subject token")
	// ErrPartitionMode is returned when the partitioned stream exists but was made for the
	// other way of partitioning (by the router, or by the server from key.subject_token):
	// switching between them is not supported.
	ErrPartitionMode = errors.New("natsio: the partitioned stream partitions the other way")
	// ErrSourceChanged is returned by [EnsureSourcedPartitionedStream] when the existing
	// stream sources the input through other transforms (other input subjects, token or
	// number of partitions): the server would take the changed source for a new one and copy
	// the input again from its start.
	ErrSourceChanged = errors.New("natsio: the partitioned stream sources the input differently")
)

// SourcedOptions configure [EnsureSourcedPartitionedStream].
type SourcedOptions struct {
	// Deployment names the deployment. Required.
	Deployment string
	// InputStream is the stream the partitioned stream sources. Required.
	InputStream string
	// InputSubjects are the deployment's input subjects, each with a '*' at Token.
	InputSubjects []string
	// Token is the position (from 1) of the key's token in every input subject.
	Token int
	// Partitions is the number of partitions, from 1 to [partition.Max].
	Partitions int
	// Replicas is the replica count of a stream created here (0: [natsio.DefaultReplicas]); an
	// existing stream keeps its own.
	Replicas int
	// MaxAge is the stream's max_age (0: none).
	MaxAge time.Duration
}

// PartitionTransforms returns the subject transforms that map each of subjects (in order) to
// "gs.kg.<deployment>.{{partition(partitions,k)}}.<subject>", k being the wildcard index of
// token (from 1) among the subject's '*' wildcards, and every wildcard of the subject kept
// ({{wildcard(i)}}, and a '>' tail as it is). It returns an error wrapping [ErrSubjectToken]
// when a subject is not a valid pattern or has no '*' at token, when two subjects overlap
// (one matches all the other does: the server refuses overlapping source filters), or when
// partitions is out of range.
func PartitionTransforms(deployment string, subjects []string, token, partitions int) ([]jetstream.SubjectTransformConfig, error) {
	if err := partition.CheckCount(partitions); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSubjectToken, err)
	}
	if len(subjects) == 0 {
		return nil, fmt.Errorf("%w: no input subjects", ErrSubjectToken)
	}
	out := make([]jetstream.SubjectTransformConfig, 0, len(subjects))
	for i, s := range subjects {
		if err := subject.CheckPattern(s); err != nil {
			return nil, fmt.Errorf("%w: input subject %q %v", ErrSubjectToken, s, err)
		}
		for _, o := range subjects[:i] {
			if subject.Subset(s, o) || subject.Subset(o, s) {
				return nil, fmt.Errorf("%w: input subjects %q and %q overlap (the server refuses overlapping source filters)", ErrSubjectToken, o, s)
			}
		}
		tokens := strings.Split(s, ".")
		if token < 1 || token > len(tokens) || tokens[token-1] != "*" {
			return nil, fmt.Errorf("%w: input subject %q has no '*' at token %d", ErrSubjectToken, s, token)
		}
		var dest strings.Builder
		dest.WriteString(topology.PartitionPrefix(deployment))
		k, wild := 0, 0
		rest := make([]string, len(tokens))
		for j, t := range tokens {
			rest[j] = t
			if t == "*" {
				wild++
				rest[j] = "{{wildcard(" + strconv.Itoa(wild) + ")}}"
				if j == token-1 {
					k = wild
				}
			}
		}
		fmt.Fprintf(&dest, "{{partition(%d,%d)}}.%s", partitions, k, strings.Join(rest, "."))
		out = append(out, jetstream.SubjectTransformConfig{Source: s, Destination: dest.String()})
	}
	return out, nil
}

// InputSubject is the subject m was published on in deployment's input, m being a message
// of deployment's partitioned stream: the subject's tail after "gs.kg.<deployment>.<p>."
// (the server partitioned it), else its [RoutedSubjectHeader] (the router did). A message of
// any other subject is its own.
func InputSubject(deployment string, m *Msg) string {
	s := m.Subject
	rest, ok := strings.CutPrefix(s, topology.PartitionPrefix(deployment))
	if !ok || rest == "" {
		return s
	}
	if _, orig, ok := strings.Cut(rest, "."); ok {
		return orig
	}
	return m.Header.Get(RoutedSubjectHeader)
}

// EnsureSourcedPartitionedStream creates or updates the partitioned stream of a deployment
// that the server partitions ([PartitionedStream]): no subjects of its own, one source (the
// input stream, through [PartitionTransforms]), file storage, limits retention, discard old,
// max_age o.MaxAge, and o.Replicas copies when it creates the stream. An existing stream
// keeps its replicas and storage and gets the max_age and discard policy; one made for the
// router is refused with [ErrPartitionMode], one sourcing the input otherwise with
// [ErrSourceChanged] (the same input subjects in another order are no change). A source the server cannot set up (the input stream missing, say)
// does not fail the call: the stream's source info reports it.
func EnsureSourcedPartitionedStream(ctx context.Context, js jetstream.JetStream, o SourcedOptions) error {
	if o.Deployment == "" || o.InputStream == "" {
		return fmt.Errorf("%w: no deployment or no input stream", ErrSubjectToken)
	}
	trs, err := PartitionTransforms(o.Deployment, o.InputSubjects, o.Token, o.Partitions)
	if err != nil {
		return err
	}
	name := topology.PartitionedStream(o.Deployment)
	src := &jetstream.StreamSource{Name: o.InputStream, SubjectTransforms: trs}
	cfg := jetstream.StreamConfig{
		Name:        name,
		Description: "groupstate partitioned input of " + o.Deployment + " (sourced, split by the server: key.subject_token)",
		Sources:     []*jetstream.StreamSource{src},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      o.MaxAge,
		Replicas:    natsio.ReplicasFor(js, o.Replicas),
	}
	return ensurePartitioned(ctx, js, cfg, func(old *jetstream.StreamConfig) (bool, error) {
		if len(old.Subjects) > 0 || len(old.Sources) == 0 {
			return false, fmt.Errorf("%w: %s is written by the input router (the deployment was first deployed without key.subject_token); deploy under a new name", ErrPartitionMode, name)
		}
		if len(old.Sources) != 1 || old.Sources[0].Name != src.Name || !sameTransforms(old.Sources[0].SubjectTransforms, trs) {
			return false, fmt.Errorf("%w: %s sources %s, not %s through %v (input subjects, key.subject_token and partitions are fixed at the first deploy); deploy under a new name",
				ErrSourceChanged, name, describeSources(old.Sources), src.Name, trs)
		}
		if old.MaxAge == o.MaxAge && old.Discard == jetstream.DiscardOld {
			return false, nil
		}
		old.MaxAge, old.Discard = o.MaxAge, jetstream.DiscardOld
		old.Duplicates = natsio.CapDuplicates(old.Duplicates, o.MaxAge)
		return true, nil
	})
}

// sameTransforms tells whether a and b hold the same transforms, in any order (the input
// subjects in another order partition alike: the stream keeps its own).
func sameTransforms(a, b []jetstream.SubjectTransformConfig) bool {
	bySource := func(x, y jetstream.SubjectTransformConfig) int { return strings.Compare(x.Source, y.Source) }
	return slices.Equal(slices.SortedFunc(slices.Values(a), bySource), slices.SortedFunc(slices.Values(b), bySource))
}

// describeSources is the stream names and transforms of srcs, for an error.
func describeSources(srcs []*jetstream.StreamSource) string {
	var b strings.Builder
	for i, s := range srcs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s through %v", s.Name, s.SubjectTransforms)
	}
	return b.String()
}

// ensurePartitioned creates the partitioned stream cfg, or, when it exists, lets fit check
// its configuration and change it (true: update the stream to it).
func ensurePartitioned(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, fit func(old *jetstream.StreamConfig) (bool, error)) error {
	return ensureOwnStream(ctx, js, "partitioned stream", cfg, fit)
}

// ensureOwnStream creates a stream groupstate makes for itself (what names it in errors: a
// partitioned stream, an inputs stream), or, when it exists, lets fit check its
// configuration and change it (true: update the stream to it).
func ensureOwnStream(ctx context.Context, js jetstream.JetStream, what string, cfg jetstream.StreamConfig, fit func(old *jetstream.StreamConfig) (bool, error)) error {
	name := cfg.Name
	for attempt := 0; ; attempt++ {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = js.CreateStream(ctx, cfg)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && attempt == 0 {
				continue // a concurrent creator won: update its stream
			}
			if err != nil {
				return fmt.Errorf("natsio: creating %s %s: %w", what, name, natsio.ExplainReplicas(err, cfg.Replicas))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("natsio: looking up %s %s: %w", what, name, err)
		}
		old := st.CachedInfo().Config
		update, err := fit(&old)
		if err != nil || !update {
			return err
		}
		if _, err := js.UpdateStream(ctx, old); err != nil {
			return fmt.Errorf("natsio: updating %s %s: %w", what, name, err)
		}
		return nil
	}
}
