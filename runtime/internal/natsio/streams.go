package natsio

import (
	"context"
	"errors"
	"fmt"
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
)

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
	subjects, dup, name := o.Subjects, o.Duplicates, o.Name
	if len(subjects) == 0 {
		return "", ErrNoSubjects
	}
	if dup > 0 && dup < MinDuplicateWindow {
		dup = MinDuplicateWindow
	}
	if name == "" {
		found, err := js.StreamNameBySubject(ctx, subjects[0])
		switch {
		case err == nil:
			name = found
		case errors.Is(err, jetstream.ErrStreamNotFound):
			name = o.Fallback
		default:
			return "", fmt.Errorf("natsio: looking up the stream for subject %q: %w", subjects[0], err)
		}
		if name == "" {
			return "", fmt.Errorf("natsio: no stream captures %q and no fallback stream name was given", subjects[0])
		}
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
		changed := false
		for _, s := range subjects {
			if !subject.Captured(s, cfg.Subjects) {
				cfg.Subjects = append(cfg.Subjects, s)
				changed = true
			}
		}
		if o.MaxAge > 0 && cfg.MaxAge != o.MaxAge {
			cfg.MaxAge = o.MaxAge
			cfg.Duplicates = CapDuplicates(cfg.Duplicates, cfg.MaxAge)
			changed = true
		}
		if dup > 0 {
			if want := CapDuplicates(dup, cfg.MaxAge); cfg.Duplicates < want {
				cfg.Duplicates = want
				changed = true
			}
		}
		if !changed {
			return name, nil
		}
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return "", fmt.Errorf("natsio: updating stream %s (subjects %s): %w", name, strings.Join(cfg.Subjects, ", "), err)
		}
		return name, nil
	}
}

// CapDuplicates returns the duplicate window dup capped at maxAge (the server refuses a
// window longer than the stream keeps messages).
func CapDuplicates(dup, maxAge time.Duration) time.Duration {
	if maxAge > 0 && dup > maxAge {
		return maxAge
	}
	return dup
}

// StreamName derives a valid stream name from a deployment name and suffix:
// "GS_" followed by s upper-cased, every character other than [A-Z0-9_-]
// replaced by '_'. StreamName("login-count_in") is "GS_LOGIN-COUNT_IN".
func StreamName(s string) string {
	var b strings.Builder
	b.Grow(3 + len(s))
	b.WriteString("GS_")
	for _, r := range strings.ToUpper(s) {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
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
