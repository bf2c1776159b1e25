package spec

import (
	"fmt"
	"strings"
	"time"
)

// Replication is where a partition's state is kept besides its owner's disk ([Spec.Replication]).
type Replication string

// The values of [Spec.Replication].
const (
	// ReplicationNone keeps state only on the owner's disk (the default): a partition moves
	// to another runtime only with its state lost (deploy --reset-state).
	ReplicationNone Replication = "none"
	// ReplicationChangelog logs every batch's state changes in a JetStream stream before
	// the batch's outputs are published, so another runtime can restore the partition.
	ReplicationChangelog Replication = "changelog"
)

// SnapshotSpec says how often a partition's state is snapshotted to the object store, so a
// restore replays only the changelog after the last snapshot.
type SnapshotSpec struct {
	// Interval defaults to [DefaultSnapshotInterval], at least [MinSnapshotInterval].
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
}

// Bounds and defaults of the scale-out fields.
const (
	// MaxPartitions is the most partitions a deployment may have.
	MaxPartitions = 1024
	// MaxStandbys is the most standbys per partition.
	MaxStandbys = 4
	// DefaultSnapshotInterval is snapshot.interval's default.
	DefaultSnapshotInterval = 5 * time.Minute
	// MinSnapshotInterval is the shortest snapshot.interval.
	MinSnapshotInterval = 10 * time.Second
	// DefaultEventTimeIdle is event_time.idle's default for a deployment split into
	// partitions.
	DefaultEventTimeIdle = time.Minute
)

func (s *Spec) ensureScaleOutDefaults() {
	if s.Partitions == 0 {
		s.Partitions = 1
	}
	if s.Replication == "" {
		s.Replication = ReplicationNone
	}
	if s.Snapshot.Interval == 0 && s.Replication == ReplicationChangelog {
		s.Snapshot.Interval = Duration(DefaultSnapshotInterval)
	}
	if s.EventTime != nil && s.EventTime.Idle == 0 && s.Partitions > 1 {
		s.EventTime.Idle = Duration(DefaultEventTimeIdle)
	}
}

// validateScaleOut adds the problems of the scale-out fields.
func (s *Spec) validateScaleOut(add func(format string, args ...any)) {
	if s.Partitions < 0 || s.Partitions > MaxPartitions {
		add("partitions %d must be 1 to %d", s.Partitions, MaxPartitions)
	}
	switch s.Replication {
	case "", ReplicationNone, ReplicationChangelog:
	default:
		add("replication %q must be %q or %q", s.Replication, ReplicationNone, ReplicationChangelog)
	}
	switch {
	case s.Standbys < 0 || s.Standbys > MaxStandbys:
		add("standbys %d must be 0 to %d", s.Standbys, MaxStandbys)
	case s.Standbys > 0 && s.Replication != ReplicationChangelog:
		add("standbys needs replication: changelog (a standby is a copy kept from the changelog)")
	}
	if s.EventTime != nil && s.EventTime.Idle < 0 {
		add("event_time.idle must be positive")
	}
	if iv := s.Snapshot.Interval; iv != 0 && (iv < 0 || iv.Std() < MinSnapshotInterval) {
		add("snapshot.interval must be at least %s", MinSnapshotInterval)
	}
	if t := s.Key.SubjectToken; t != 0 {
		if t < 0 {
			add("key.subject_token must be a token position from 1")
		}
		for _, in := range s.Input.Subjects {
			if tokens := strings.Split(in, "."); t > 0 && (t > len(tokens) || tokens[t-1] != "*") {
				add("key.subject_token %d: input subject %q has no '*' at token %d (the key must be a wildcard token of every input subject)", t, in, t)
			}
		}
	}
}

// scaleOutNotYetRun is what the service refuses of the scale-out fields, while the runtime
// cannot run them yet (empty: nothing).
func (s *Spec) scaleOutNotYetRun() string {
	var p []string
	if s.Partitions > 1 && s.Replication != ReplicationChangelog {
		p = append(p, fmt.Sprintf("partitions %d without replication: changelog", s.Partitions))
	}
	if len(p) == 0 {
		return ""
	}
	return strings.Join(p, ", ") + ": not run by this version of the runtime yet (docs/spec.md, \"Scale-out\")"
}
