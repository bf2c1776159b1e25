package natsio

import (
	"slices"
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
	name, err := EnsureStream(e.ctx, e.js, "ORDERS", "", []string{"orders.>"}, time.Minute)
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
	name, err = EnsureStream(e.ctx, e.js, "", "GS_FALLBACK", []string{"orders.eu"}, 0)
	if err != nil || name != "ORDERS" {
		t.Fatalf("reuse by subject: %q, %v", name, err)
	}
	if got := streamConfig(t, e, "ORDERS").Subjects; !slices.Equal(got, []string{"orders.>"}) {
		t.Fatalf("subject covered by a wildcard was added: %v", got)
	}

	// Empty name and no stream: the fallback is created.
	name, err = EnsureStream(e.ctx, e.js, "", "GS_FALLBACK", []string{"logins.>"}, 0)
	if err != nil || name != "GS_FALLBACK" {
		t.Fatalf("fallback: %q, %v", name, err)
	}

	// Existing stream: missing subjects are added, the window raised.
	name, err = EnsureStream(e.ctx, e.js, "ORDERS", "", []string{"orders.>", "refunds.*"}, 20*time.Minute)
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
	if _, err := EnsureStream(e.ctx, e.js, "ORDERS", "", []string{"refunds.x"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if cfg := streamConfig(t, e, "ORDERS"); cfg.Duplicates != 20*time.Minute || len(cfg.Subjects) != 2 {
		t.Fatalf("after no-op ensure: %v %s", cfg.Subjects, cfg.Duplicates)
	}

	// A pre-existing stream with a small window gets raised.
	if _, err := e.js.CreateStream(e.ctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small"}, Duplicates: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureStream(e.ctx, e.js, "", "X", []string{"small"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if d := streamConfig(t, e, "SMALL").Duplicates; d != MinDuplicateWindow {
		t.Fatalf("SMALL window %s", d)
	}

	// Overlap with another stream is an error.
	if _, err := EnsureStream(e.ctx, e.js, "OTHER", "", []string{"orders.us"}, 0); err == nil {
		t.Fatal("overlapping subjects accepted")
	}
	if _, err := EnsureStream(e.ctx, e.js, "A", "", nil, 0); err == nil {
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

func TestSubjectSubset(t *testing.T) {
	for _, c := range []struct {
		sub, pat string
		want     bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.*", true},
		{"a.b.c", "a.>", true},
		{"a", "a.>", false},
		{"a.*", "a.>", true},
		{"a.>", "a.*", false},
		{"a.>", "a.>", true},
		{"a.b", "a.c", false},
		{"a.b.c", "a.*", false},
		{"*.b", "a.b", false},
	} {
		if got := subjectSubset(c.sub, c.pat); got != c.want {
			t.Errorf("subjectSubset(%q, %q) = %v", c.sub, c.pat, got)
		}
	}
}
