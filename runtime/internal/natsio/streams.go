package natsio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MinDuplicateWindow is the smallest duplicate window [EnsureStream] sets on a
// stream when asked for one: outputs re-delivered after a crash are dropped by
// the stream as long as the restart happens within this window.
const MinDuplicateWindow = 10 * time.Minute

// ErrNoSubjects is returned by [EnsureStream] when no subject is given.
var ErrNoSubjects = errors.New("natsio: no subjects")

// EnsureStream returns the name of a stream that captures every subject in subjects.
//
// With name set, the stream of that name is created if missing (file storage,
// limits retention) or, if it exists, updated to add the subjects it does not
// capture yet (a subject already matched by one of the stream's wildcards counts
// as captured). With name empty, the stream that already captures subjects[0]
// is used (and completed in the same way) when there is one, else a stream
// named fallback is ensured as above.
//
// When dup > 0 the stream's duplicate window is made at least
// max(dup, [MinDuplicateWindow]) (capped at the stream's MaxAge, when it has
// one); an existing larger window is kept. With dup == 0 the window is left
// alone (the server default on creation, 2 minutes).
//
// Errors from the server (for example subjects overlapping another stream)
// are returned wrapped, with the stream name.
func EnsureStream(ctx context.Context, js jetstream.JetStream, name, fallback string, subjects []string, dup time.Duration) (string, error) {
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
			name = fallback
		default:
			return "", fmt.Errorf("natsio: looking up the stream for subject %q: %w", subjects[0], err)
		}
		if name == "" {
			return "", fmt.Errorf("natsio: no stream captures %q and no fallback stream name was given", subjects[0])
		}
	}
	// Two attempts: a concurrent creator may win the race between our lookup
	// and our create, and then we update its stream instead.
	for attempt := 0; ; attempt++ {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			cfg := jetstream.StreamConfig{
				Name:       name,
				Subjects:   slices.Clone(subjects),
				Storage:    jetstream.FileStorage,
				Retention:  jetstream.LimitsPolicy,
				Duplicates: dup,
			}
			_, err = js.CreateStream(ctx, cfg)
			if err == nil {
				return name, nil
			}
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && attempt == 0 {
				continue
			}
			return "", fmt.Errorf("natsio: creating stream %s for %s: %w", name, strings.Join(subjects, ", "), err)
		}
		if err != nil {
			return "", fmt.Errorf("natsio: looking up stream %s: %w", name, err)
		}
		cfg := st.CachedInfo().Config
		changed := false
		for _, s := range subjects {
			if !subjectCaptured(s, cfg.Subjects) {
				cfg.Subjects = append(cfg.Subjects, s)
				changed = true
			}
		}
		if dup > 0 {
			want := dup
			if cfg.MaxAge > 0 && want > cfg.MaxAge {
				want = cfg.MaxAge
			}
			if cfg.Duplicates < want {
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

// subjectCaptured reports whether subject is matched by one of patterns.
func subjectCaptured(subject string, patterns []string) bool {
	for _, p := range patterns {
		if subjectSubset(subject, p) {
			return true
		}
	}
	return false
}

// subjectSubset reports whether every subject matched by sub is matched by
// pattern ("a.b" ⊆ "a.*" ⊆ "a.>").
func subjectSubset(sub, pattern string) bool {
	st := strings.Split(sub, ".")
	pt := strings.Split(pattern, ".")
	for i, p := range pt {
		if p == ">" {
			return len(st) > i
		}
		if i >= len(st) {
			return false
		}
		s := st[i]
		switch {
		case p == "*":
			if s == ">" {
				return false
			}
		case s != p:
			return false
		}
	}
	return len(st) == len(pt)
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
