package spec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/spec"
)

func TestScaleOutFields(t *testing.T) {
	s, err := spec.ParseSpec([]byte(`
name: counts
input: {subjects: ["logins.*"]}
key: {field: user_id, subject_token: 2}
partitions: 16
replication: changelog
standbys: 1
snapshot: {interval: 1m}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Partitions != 16 || s.Replication != spec.ReplicationChangelog || s.Standbys != 1 || s.Key.SubjectToken != 2 || s.Snapshot.Interval.Std().String() != "1m0s" {
		t.Fatalf("%+v", s)
	}
	d, err := spec.ParseSpec([]byte("name: counts\nkey: {field: k}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Partitions != 1 || d.Replication != spec.ReplicationNone || d.Standbys != 0 || d.Snapshot.Interval != 0 {
		t.Fatalf("defaults: partitions %d, replication %q, standbys %d, snapshot %v", d.Partitions, d.Replication, d.Standbys, d.Snapshot.Interval)
	}
	if c, _ := spec.ParseSpec([]byte("name: counts\nkey: {field: k}\nreplication: changelog\n")); c.Snapshot.Interval.Std() != spec.DefaultSnapshotInterval {
		t.Fatalf("snapshot.interval default under changelog: %v", c.Snapshot.Interval)
	}
	for _, tc := range []struct {
		extra string
		want  time.Duration
	}{
		{"partitions: 4\n", spec.DefaultEventTimeIdle},
		{"partitions: 4\nevent_time: {field: ts, watermark_delay: 1s, idle: 5s}\n", 5 * time.Second},
		{"", 0}, // one partition: no others to be idle for, and nothing added to its spec
	} {
		y := "name: counts\nkey: {field: k}\nreplication: changelog\n" + tc.extra
		if !strings.Contains(y, "event_time") {
			y += "event_time: {field: ts, watermark_delay: 1s}\n"
		}
		c, err := spec.ParseSpec([]byte(y))
		if err != nil || c.EventTime.Idle.Std() != tc.want {
			t.Fatalf("%q: event_time.idle %v (%v), want %v", tc.extra, c.EventTime.Idle, err, tc.want)
		}
	}
}

func TestScaleOutFieldErrors(t *testing.T) {
	const base = "name: x\nkey: {field: k}\n"
	tests := []struct{ yaml, want string }{
		{base + "partitions: 0\n", ""},
		{base + "partitions: 1025\n", "partitions 1025 must be 1 to 1024"},
		{base + "partitions: -2\n", "partitions -2 must be 1 to 1024"},
		{base + "replication: raft\n", `replication "raft" must be "none" or "changelog"`},
		{base + "standbys: 1\n", "standbys needs replication: changelog"},
		{base + "replication: changelog\nstandbys: 5\n", "standbys 5 must be 0 to 4"},
		{base + "replication: changelog\nsnapshot: {interval: 1s}\n", "snapshot.interval must be at least 10s"},
		{"name: x\ninput: {subjects: [\"a.*\", \"b.c\"]}\nkey: {field: k, subject_token: 2}\n", `key.subject_token 2: input subject "b.c" has no '*' at token 2`},
		{"name: x\ninput: {subjects: [\"a.>\"]}\nkey: {field: k, subject_token: 2}\n", `input subject "a.>" has no '*' at token 2`},
		{base + "partitions: 4\nreplication: changelog\nevent_time: {field: ts, watermark_delay: 1s, idle: -1s}\n", "a duration cannot be negative"},
		{base + "partitions: 4\nreplication: changelog\nevent_time: {field: ts, watermark_delay: 1s, idle: 1ms}\n", ""},
		{"name: x\ninput: {subjects: [\"a.*\"]}\nkey: {field: k, subject_token: 3}\n", `input subject "a.*" has no '*' at token 3`},
	}
	s, err := spec.ParseSpec([]byte(base + "partitions: 4\nreplication: changelog\nevent_time: {field: ts, watermark_delay: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.EventTime.Idle = -1 // a spec built in Go: the YAML decoder refuses negative durations itself
	if err := s.Validate(); !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), "event_time.idle must be positive") {
		t.Errorf("a negative event_time.idle: %v", err)
	}
	for _, tt := range tests {
		_, err := spec.ParseSpec([]byte(tt.yaml))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.yaml, err)
		case tt.want != "" && (!errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: error %v, want one containing %q", tt.yaml, err, tt.want)
		}
	}
}

// TestScaleOutNotYetRunByTheService: the service refuses what it cannot run yet, saying so,
// rather than running a partitioned or replicated spec as if it were neither.
//
// key.subject_token runs: with partitions above 1 the server splits the input; with one
// partition it changes nothing (the rows are read from the input as without it).
func TestScaleOutNotYetRunByTheService(t *testing.T) {
	const base = "name: x\ninput: {subjects: [in]}\nkey: {field: k}\noutput: {subject: out}\n"
	const byToken = "name: x\ninput: {subjects: [\"logins.*\", \"signups.*.>\"]}\nkey: {field: k, subject_token: 2}\noutput: {subject: out}\n"
	for _, tc := range []struct {
		extra, refused string // refused "": runs
	}{
		{byToken + "partitions: 4\nreplication: changelog\n", ""},
		{byToken, ""},
		{byToken + "replication: changelog\n", ""},
		{byToken + "partitions: 4\n", "partitions 4 without replication: changelog: not run"},
		{"replication: changelog\n", ""},
		{"partitions: 4\nreplication: changelog\n", ""},
		{"partitions: 4\nreplication: changelog\nstandbys: 1\n", ""},
		{"replication: changelog\nstandbys: 2\n", ""},
		{"partitions: 4\n", "partitions 4 without replication: changelog: not run"},
		{"partitions: 4\nreplication: changelog\nevent_time: {field: ts, watermark_delay: 1s}\ntimeout: event_time\n", ""},
		{"partitions: 4\nreplication: changelog\nevent_time: {field: ts, watermark_delay: 1s, idle: 30s}\n", ""},
	} {
		y := tc.extra
		if !strings.HasPrefix(y, "name:") {
			y = base + y
		}
		s, err := spec.ParseSpec([]byte(y))
		if err != nil {
			t.Fatalf("%q: %v", tc.extra, err)
		}
		err = s.ValidateForService()
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%q refused: %v", tc.extra, err)
		case tc.refused != "" && (!errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%q: err = %v, want one saying %q", tc.extra, err, tc.refused)
		}
	}
}
