package natsio

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/subject"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/nats-io/nats.go/jetstream"
)

// MinDuplicateWindow is the smallest duplicate window [EnsureStream] sets on a stream when
// asked for one: the spec's DuplicateWindow.
const MinDuplicateWindow = spec.DuplicateWindow

// Errors of [EnsureStream].
var (
	// ErrNoSubjects: no subject was given.
	ErrNoSubjects = errors.New("natsio: no subjects")
	// ErrAvoidedStream: the stream to use is the one StreamOptions.Avoid names.
	ErrAvoidedStream = errors.New("natsio: refusing to use that stream")
	// ErrForeignStream: the stream would have to change, and it is not the deployment's (see
	// StreamOptions.Owner).
	ErrForeignStream = errors.New("natsio: refusing to change a stream groupstate did not create for this deployment")
)

// OwnerKey is the metadata key of a stream groupstate created for a deployment: its value
// is the deployment's name (StreamOptions.Owner).
const OwnerKey = "groupstate.deployment"

// StreamOptions say which stream [EnsureStream] ensures.
type StreamOptions struct {
	// Name is the stream to use (created if missing); empty: the stream that already captures
	// Subjects[0], else Fallback.
	Name, Fallback string
	// Subjects must all be captured by the stream (at least one).
	Subjects []string
	// Duplicates, when > 0, makes the duplicate window at least max(Duplicates,
	// [MinDuplicateWindow]), capped at the stream's MaxAge; an existing larger window is
	// kept. 0 leaves the window alone (the server default on creation, 2 minutes).
	Duplicates time.Duration
	// MaxAge, when > 0, is the stream's max_age, set on creation and on an existing stream.
	// When 0, CreateMaxAge is the max_age of a stream created here and an existing stream's
	// retention is left alone (it belongs to whoever made it). 0 for both: unlimited.
	MaxAge, CreateMaxAge time.Duration
	// Replicas is the replica count of a stream created here (0: [DefaultReplicas]); an
	// existing stream keeps its own.
	Replicas int
	// Avoid names a stream that must not be used (the input stream, for outputs: a
	// deployment that stored its outputs in its input stream would read them back).
	Avoid string
	// Owner names the deployment the stream is for. A stream created here is marked as its
	// (metadata [OwnerKey]); an existing stream is changed (subjects added, max_age or the
	// duplicate window set) only when it carries that mark or, unmarked, is the one named
	// Fallback (made by an earlier version for the deployment), else [ErrForeignStream] says
	// what would have to change. Empty: no check (streams of groupstate's own).
	Owner string
}

// owns reports whether stream cfg is o.Owner's to change.
func (o StreamOptions) owns(cfg jetstream.StreamConfig) bool {
	if o.Owner == "" {
		return true
	}
	if mark, ok := cfg.Metadata[OwnerKey]; ok {
		return mark == o.Owner
	}
	return cfg.Name == o.Fallback
}

// EnsureStream returns the name of a stream that captures every subject in o.Subjects.
//
// With o.Name set, the stream of that name is created if missing (file storage, limits
// retention) or, if it exists, updated to add the subjects it does not capture yet (a subject
// already matched by one of the stream's wildcards counts as captured). With o.Name empty,
// the stream that already captures Subjects[0] is used (and completed in the same way) when
// there is one, else a stream named o.Fallback is ensured as above. Before anything is
// changed, a stream named o.Avoid is refused with [ErrAvoidedStream].
//
// Errors from the server (for example subjects overlapping another stream) are returned
// wrapped, with the stream name.
func EnsureStream(ctx context.Context, js jetstream.JetStream, o StreamOptions) (string, error) {
	subjects, dup := o.Subjects, o.Duplicates
	if len(subjects) == 0 {
		return "", ErrNoSubjects
	}
	if dup > 0 && dup < MinDuplicateWindow {
		dup = MinDuplicateWindow
	}
	name, err := ResolveStream(ctx, js, o)
	if err != nil {
		return "", err
	}
	if o.Avoid != "" && name == o.Avoid {
		return "", fmt.Errorf("%w: stream %s (which captures %s) is the input stream", ErrAvoidedStream, name, strings.Join(subjects, ", "))
	}
	// Two attempts: a concurrent creator may win the race between our lookup
	// and our create, and then we update its stream instead.
	for attempt := 0; ; attempt++ {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			cfg := jetstream.StreamConfig{
				Name:      name,
				Subjects:  slices.Clone(subjects),
				Storage:   jetstream.FileStorage,
				Retention: jetstream.LimitsPolicy,
				MaxAge:    o.MaxAge,
				Replicas:  ReplicasFor(js, o.Replicas),
			}
			if o.Owner != "" {
				cfg.Metadata = map[string]string{OwnerKey: o.Owner}
			}
			if cfg.MaxAge == 0 {
				cfg.MaxAge = o.CreateMaxAge
			}
			cfg.Duplicates = CapDuplicates(dup, cfg.MaxAge)
			_, err = js.CreateStream(ctx, cfg)
			if err == nil {
				return name, nil
			}
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && attempt == 0 {
				continue
			}
			return "", fmt.Errorf("natsio: creating stream %s for %s: %w", name, strings.Join(subjects, ", "), ExplainReplicas(err, cfg.Replicas))
		}
		if err != nil {
			return "", fmt.Errorf("natsio: looking up stream %s: %w", name, err)
		}
		cfg := st.CachedInfo().Config
		changes := o.changes(&cfg, dup)
		if len(changes) == 0 {
			return name, nil
		}
		if !o.owns(cfg) {
			return "", foreign(name, cfg, changes)
		}
		if o.Owner != "" && cfg.Metadata[OwnerKey] == "" {
			cfg.Metadata = maps.Clone(cfg.Metadata)
			if cfg.Metadata == nil {
				cfg.Metadata = map[string]string{}
			}
			cfg.Metadata[OwnerKey] = o.Owner // made by an earlier version: mark it now
		}
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return "", fmt.Errorf("natsio: updating stream %s (subjects %s): %w", name, strings.Join(cfg.Subjects, ", "), err)
		}
		return name, nil
	}
}

// changes applies to cfg what o needs of an existing stream and says what it changed (none:
// the stream is fine as it is).
func (o StreamOptions) changes(cfg *jetstream.StreamConfig, dup time.Duration) []string {
	var changes []string
	for _, s := range o.Subjects {
		if !subject.Captured(s, cfg.Subjects) {
			cfg.Subjects = append(cfg.Subjects, s)
			changes = append(changes, fmt.Sprintf("capture subject %s", s))
		}
	}
	if o.MaxAge > 0 && cfg.MaxAge != o.MaxAge {
		changes = append(changes, fmt.Sprintf("keep messages for %s (max_age, now %s)", o.MaxAge, ageString(cfg.MaxAge)))
		cfg.MaxAge = o.MaxAge
		cfg.Duplicates = CapDuplicates(cfg.Duplicates, cfg.MaxAge)
	}
	if dup > 0 {
		if want := CapDuplicates(dup, cfg.MaxAge); cfg.Duplicates < want {
			changes = append(changes, fmt.Sprintf("keep a duplicate window of at least %s (now %s; exactly-once publishing needs it)", want, cfg.Duplicates))
			cfg.Duplicates = want
		}
	}
	return changes
}

func ageString(d time.Duration) string {
	if d == 0 {
		return "unlimited"
	}
	return d.String()
}

// foreign is the ErrForeignStream of stream name (configured as cfg), which would need changes.
func foreign(name string, cfg jetstream.StreamConfig, changes []string) error {
	whose := "no groupstate deployment"
	if mark := cfg.Metadata[OwnerKey]; mark != "" {
		whose = "deployment " + mark
	}
	return fmt.Errorf("%w: stream %s (created by %s) would have to %s; change the stream yourself, or name another stream (or none) in the spec",
		ErrForeignStream, name, whose, strings.Join(changes, ", and "))
}

// CheckStream tells, without changing anything, whether [EnsureStream] with o would succeed
// as far as the streams' owners go: nil when the stream is missing (it would be created),
// fine as it is, or the deployment's to change; [ErrForeignStream] or [ErrAvoidedStream]
// saying what is wrong otherwise. Deploy runs it, so that a spec is refused before a runtime
// tries.
func CheckStream(ctx context.Context, js jetstream.JetStream, o StreamOptions) error {
	name, err := ResolveStream(ctx, js, o)
	if err != nil {
		return err
	}
	if o.Avoid != "" && name == o.Avoid {
		return fmt.Errorf("%w: stream %s (which captures %s) is the input stream", ErrAvoidedStream, name, strings.Join(o.Subjects, ", "))
	}
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("natsio: looking up stream %s: %w", name, err)
	}
	cfg := st.CachedInfo().Config
	dup := o.Duplicates
	if dup > 0 && dup < MinDuplicateWindow {
		dup = MinDuplicateWindow
	}
	if changes := o.changes(&cfg, dup); len(changes) > 0 && !o.owns(cfg) {
		return foreign(name, cfg, changes)
	}
	return nil
}

// ResolveStream returns the name of the stream [EnsureStream] with o uses: o.Name, else the
// stream that captures o.Subjects[0], else o.Fallback.
func ResolveStream(ctx context.Context, js jetstream.JetStream, o StreamOptions) (string, error) {
	if len(o.Subjects) == 0 {
		return "", ErrNoSubjects
	}
	if o.Name != "" {
		return o.Name, nil
	}
	found, err := js.StreamNameBySubject(ctx, o.Subjects[0])
	switch {
	case err == nil:
		return found, nil
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return "", fmt.Errorf("natsio: looking up the stream for subject %q: %w", o.Subjects[0], err)
	case o.Fallback == "":
		return "", fmt.Errorf("natsio: no stream captures %q and no fallback stream name was given", o.Subjects[0])
	}
	return o.Fallback, nil
}

// CapDuplicates returns the duplicate window dup capped at maxAge (the server refuses a
// window longer than the stream keeps messages).
func CapDuplicates(dup, maxAge time.Duration) time.Duration {
	if maxAge > 0 && dup > maxAge {
		return maxAge
	}
	return dup
}

// ResolveTimeout bounds the read that resolves a publish whose outcome is unknown (a
// changelog append's), and the deletion of a consumer a reader stopped.
const ResolveTimeout = 5 * time.Second

// StatusHeader is the header of the status messages the server sends (a pull request's
// statuses; "503" no responders, in place of a publish acknowledgement).
const StatusHeader = "Status"

// WrongLastSequence tells whether err is the server's answer to a publish whose expected
// last sequence (of the stream, or of the subject) was not the last: code 10071, 10164 on
// replicated streams (nats.go v1.55.0 has no sentinel for it outside KV).
func WrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
