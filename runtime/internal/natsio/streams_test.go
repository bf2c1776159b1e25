package natsio

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func streamConfig(t *testing.T, e *env, name string) jetstream.StreamConfig {
	t.Helper()
	st, err := e.js.Stream(e.ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return st.CachedInfo().Config
}

func TestEnsureStream(t *testing.T) {
	e := newEnv(t)

	// Create with a name.
	name, err := EnsureStream(e.ctx, e.js, StreamOptions{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if name != "ORDERS" {
		t.Fatalf("name %q", name)
	}
	cfg := streamConfig(t, e, "ORDERS")
	if cfg.Storage != jetstream.FileStorage || !slices.Equal(cfg.Subjects, []string{"orders.>"}) {
		t.Fatalf("config %+v", cfg)
	}
	if cfg.Duplicates < MinDuplicateWindow {
		t.Fatalf("duplicate window %s, want >= %s", cfg.Duplicates, MinDuplicateWindow)
	}

	// Empty name: reuse the stream that captures the subject.
	name, err = EnsureStream(e.ctx, e.js, StreamOptions{Fallback: "GS_FALLBACK", Subjects: []string{"orders.eu"}})
	if err != nil || name != "ORDERS" {
		t.Fatalf("reuse by subject: %q, %v", name, err)
	}
	if got := streamConfig(t, e, "ORDERS").Subjects; !slices.Equal(got, []string{"orders.>"}) {
		t.Fatalf("subject covered by a wildcard was added: %v", got)
	}

	// Empty name and no stream: the fallback is created.
	name, err = EnsureStream(e.ctx, e.js, StreamOptions{Fallback: "GS_FALLBACK", Subjects: []string{"logins.>"}})
	if err != nil || name != "GS_FALLBACK" {
		t.Fatalf("fallback: %q, %v", name, err)
	}

	// Existing stream: missing subjects are added, the window raised.
	name, err = EnsureStream(e.ctx, e.js, StreamOptions{Name: "ORDERS", Subjects: []string{"orders.>", "refunds.*"}, Duplicates: 20 * time.Minute})
	if err != nil || name != "ORDERS" {
		t.Fatalf("add subject: %q, %v", name, err)
	}
	cfg = streamConfig(t, e, "ORDERS")
	if !slices.Equal(cfg.Subjects, []string{"orders.>", "refunds.*"}) {
		t.Fatalf("subjects %v", cfg.Subjects)
	}
	if cfg.Duplicates != 20*time.Minute {
		t.Fatalf("duplicate window %s, want 20m", cfg.Duplicates)
	}
	// A smaller window does not lower it.
	if _, err := EnsureStream(e.ctx, e.js, StreamOptions{Name: "ORDERS", Subjects: []string{"refunds.x"}, Duplicates: time.Second}); err != nil {
		t.Fatal(err)
	}
	if cfg := streamConfig(t, e, "ORDERS"); cfg.Duplicates != 20*time.Minute || len(cfg.Subjects) != 2 {
		t.Fatalf("after no-op ensure: %v %s", cfg.Subjects, cfg.Duplicates)
	}

	// A pre-existing stream with a small window gets raised.
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small"}, Duplicates: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureStream(e.ctx, e.js, StreamOptions{Fallback: "X", Subjects: []string{"small"}, Duplicates: time.Second}); err != nil {
		t.Fatal(err)
	}
	if d := streamConfig(t, e, "SMALL").Duplicates; d != MinDuplicateWindow {
		t.Fatalf("SMALL window %s", d)
	}

	// Overlap with another stream is an error.
	if _, err := EnsureStream(e.ctx, e.js, StreamOptions{Name: "OTHER", Subjects: []string{"orders.us"}}); err == nil {
		t.Fatal("overlapping subjects accepted")
	}
	if _, err := EnsureStream(e.ctx, e.js, StreamOptions{Name: "A", Subjects: nil}); err == nil {
		t.Fatal("no subjects accepted")
	}
}

func TestStreamName(t *testing.T) {
	for in, want := range map[string]string{
		"login-count_in": "GS_LOGIN-COUNT_IN",
		"a.b c>*":        "GS_A_B_C__",
		"dlq":            "GS_DLQ",
	} {
		if got := StreamName(in); got != want {
			t.Errorf("StreamName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEnsureStreamAvoid: the stream that Avoid names is refused before anything of it is
// changed, whether it is named or adopted because it captures the subject.
func TestEnsureStreamAvoid(t *testing.T) {
	e := newEnv(t)
	if _, err := EnsureStream(e.ctx, e.js, StreamOptions{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	before := streamConfig(t, e, "ORDERS")
	for _, o := range []StreamOptions{
		{Fallback: "GS_OUT", Subjects: []string{"orders.out"}, Duplicates: time.Minute, Avoid: "ORDERS"},
		{Name: "ORDERS", Subjects: []string{"other.out"}, Avoid: "ORDERS"},
	} {
		if _, err := EnsureStream(e.ctx, e.js, o); !errors.Is(err, ErrAvoidedStream) {
			t.Fatalf("EnsureStream(%+v) = %v, want ErrAvoidedStream", o, err)
		}
	}
	if after := streamConfig(t, e, "ORDERS"); after.Duplicates != before.Duplicates || !slices.Equal(after.Subjects, before.Subjects) {
		t.Fatalf("the avoided stream changed: %+v -> %+v", before, after)
	}
}

// TestEnsureStreamMaxAge: a stream created here gets CreateMaxAge; an existing stream keeps
// its retention unless MaxAge is set; the duplicate window never exceeds max_age.
func TestEnsureStreamMaxAge(t *testing.T) {
	e := newEnv(t)
	if _, err := EnsureStream(e.ctx, e.js, StreamOptions{Name: "NEW", Subjects: []string{"new"}, Duplicates: time.Minute, CreateMaxAge: 48 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if cfg := streamConfig(t, e, "NEW"); cfg.MaxAge != 48*time.Hour || cfg.Duplicates != MinDuplicateWindow {
		t.Fatalf("created: max_age %s duplicates %s", cfg.MaxAge, cfg.Duplicates)
	}
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "THEIRS", Subjects: []string{"theirs"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureStream(e.ctx, e.js, StreamOptions{Name: "THEIRS", Subjects: []string{"theirs"}, CreateMaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if cfg := streamConfig(t, e, "THEIRS"); cfg.MaxAge != 0 {
		t.Fatalf("an existing stream's retention changed to %s", cfg.MaxAge)
	}
	if _, err := EnsureStream(e.ctx, e.js, StreamOptions{Name: "THEIRS", Subjects: []string{"theirs"}, Duplicates: time.Hour, MaxAge: 15 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if cfg := streamConfig(t, e, "THEIRS"); cfg.MaxAge != 15*time.Minute || cfg.Duplicates != 15*time.Minute {
		t.Fatalf("explicit max_age: max_age %s duplicates %s", cfg.MaxAge, cfg.Duplicates)
	}
}

// TestEnsureStreamOwner: a stream created for a deployment is marked as its; an existing
// stream is changed only by its own deployment (or, unmarked, when it has the deployment's
// default name, which an earlier version made), and anything else is refused saying what
// would have to change, by EnsureStream and by CheckStream alike, without changing it.
func TestEnsureStreamOwner(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx
	// Another team's stream, with its own retention.
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, MaxAge: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		o    StreamOptions
		want string // "" : allowed
	}{
		{"uses it as it is", StreamOptions{Subjects: []string{"orders.eu"}, Owner: "d"}, ""},
		{"would shorten its retention", StreamOptions{Subjects: []string{"orders.eu"}, MaxAge: 10 * time.Minute, Owner: "d"},
			"stream ORDERS (created by no groupstate deployment) would have to keep messages for 10m0s (max_age, now 24h0m0s)"},
		{"would widen its duplicate window", StreamOptions{Subjects: []string{"orders.out"}, Duplicates: time.Hour, Owner: "d"},
			"keep a duplicate window of at least 1h0m0s"},
		{"would add a subject", StreamOptions{Name: "ORDERS", Subjects: []string{"refunds.>"}, Owner: "d"}, "capture subject refunds.>"},
		{"unchecked without an owner", StreamOptions{Name: "ORDERS", Subjects: []string{"orders.>"}, MaxAge: 24 * time.Hour}, ""},
	} {
		before := streamConfig(t, e, "ORDERS")
		checkErr := CheckStream(ctx, e.js, c.o)
		_, err := EnsureStream(ctx, e.js, c.o)
		for what, err := range map[string]error{"CheckStream": checkErr, "EnsureStream": err} {
			if c.want == "" && err != nil {
				t.Errorf("%s: %s: %v", c.name, what, err)
			}
			if c.want != "" && (!errors.Is(err, ErrForeignStream) || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("%s: %s = %v, want ErrForeignStream saying %q", c.name, what, err, c.want)
			}
		}
		if after := streamConfig(t, e, "ORDERS"); c.want != "" && (after.MaxAge != before.MaxAge || len(after.Subjects) != len(before.Subjects) || after.Duplicates != before.Duplicates) {
			t.Errorf("%s: the foreign stream changed: %+v, was %+v", c.name, after, before)
		}
	}

	// Created here: marked, and its deployment may change it; another may not.
	if _, err := EnsureStream(ctx, e.js, StreamOptions{Fallback: "GS_D_OUT", Subjects: []string{"d.out"}, Owner: "d"}); err != nil {
		t.Fatal(err)
	}
	if cfg := streamConfig(t, e, "GS_D_OUT"); cfg.Metadata[OwnerKey] != "d" {
		t.Fatalf("created stream not marked: %v", cfg.Metadata)
	}
	if _, err := EnsureStream(ctx, e.js, StreamOptions{Name: "GS_D_OUT", Subjects: []string{"d.out"}, MaxAge: time.Hour, Owner: "d"}); err != nil {
		t.Fatalf("the owner changes its stream: %v", err)
	}
	err := CheckStream(ctx, e.js, StreamOptions{Name: "GS_D_OUT", Subjects: []string{"x.out"}, Owner: "x"})
	if !errors.Is(err, ErrForeignStream) || !strings.Contains(err.Error(), "created by deployment d") {
		t.Fatalf("another deployment's stream: %v", err)
	}

	// Made by an earlier version (unmarked) under the deployment's default name: still its,
	// and marked once changed.
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "GS_OLD_OUT", Subjects: []string{"old.out"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureStream(ctx, e.js, StreamOptions{Fallback: "GS_OLD_OUT", Subjects: []string{"old.out"}, MaxAge: time.Hour, Owner: "old"}); err != nil {
		t.Fatalf("an earlier version's stream: %v", err)
	}
	if cfg := streamConfig(t, e, "GS_OLD_OUT"); cfg.Metadata[OwnerKey] != "old" || cfg.MaxAge != time.Hour {
		t.Fatalf("the earlier version's stream: %+v", cfg)
	}
}
