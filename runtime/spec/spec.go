// Package spec is the deployment spec of groupstate: the YAML document that names a
// deployment's module, input subjects, key, event time, timeout mode, outputs and limits
// (docs/spec.md is the field reference). [ParseSpec] and [LoadSpec] read and validate one; every
// default is declared here, once.
package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/groupstate/groupstate/runtime/internal/subject"
	"github.com/groupstate/groupstate/timeouts"
)

// ErrInvalidSpec is wrapped by every spec validation error.
var ErrInvalidSpec = errors.New("spec: invalid deployment spec")

// Spec is a deployment spec. Field names and meanings are a contract; docs/spec.md is the
// field reference with defaults. A Spec is a plain value: not safe for concurrent mutation,
// safe to share once parsed.
type Spec struct {
	// Name identifies the deployment: [a-z0-9-]+, at most 63 characters.
	Name string `yaml:"name" json:"name"`
	// Module is the path of the .wasm file, relative to the spec file.
	Module string `yaml:"module" json:"module"`
	// Input selects the rows (of a deployment with one input; see Inputs).
	Input InputSpec `yaml:"input" json:"input"`
	// Key selects the grouping key (of a deployment with one input).
	Key KeySpec `yaml:"key" json:"key"`
	// EventTime, when set, names the event-time column and the watermark delay (of a
	// deployment with one input).
	EventTime *EventTimeSpec `yaml:"event_time,omitempty" json:"event_time,omitempty"`
	// Inputs, when set, are the deployment's named inputs, each with its own subjects, key and
	// event time, in place of Input, Key and EventTime (see [NamedInput] and
	// [Spec.InputList]). At most [MaxInputs].
	Inputs []NamedInput `yaml:"inputs,omitempty" json:"inputs,omitempty"`
	// WatermarkPolicy is how the watermarks of several inputs make the deployment's: min
	// (the default) or max.
	WatermarkPolicy WatermarkPolicy `yaml:"watermark_policy,omitempty" json:"watermark_policy,omitempty"`
	// Timeout is the timeout mode: none (default), processing_time or event_time.
	Timeout timeouts.Mode `yaml:"timeout" json:"timeout"`
	// Output is where emitted rows go.
	Output OutputSpec `yaml:"output" json:"output"`
	// OnError is what a failing call for one key does: dead_letter (default) or fail.
	OnError OnError `yaml:"on_error" json:"on_error"`
	// DeadLetter is where rows that cannot be processed go; default subject <name>.dlq.
	DeadLetter SinkSpec `yaml:"dead_letter" json:"dead_letter"`
	// Late, when its subject is set, receives late rows dropped under event-time timeouts.
	Late SinkSpec `yaml:"late" json:"late"`
	// Trigger cuts micro-batches.
	Trigger TriggerSpec `yaml:"trigger" json:"trigger"`
	// Limits bound the module.
	Limits LimitsSpec `yaml:"limits" json:"limits"`
	// Config is handed to the module at start as a JSON object.
	Config map[string]any `yaml:"config" json:"config,omitempty"`

	// Partitions is the number of key groups the deployment's keys are split into, the unit
	// that runtimes own and that moves between them: 1 to [MaxPartitions], default 1. It is
	// fixed at the first deploy (a key's partition depends on it; see docs/spec.md).
	Partitions int `yaml:"partitions,omitempty" json:"partitions,omitempty"`
	// Replication is where a partition's state is kept besides its owner's disk: none
	// (default) or changelog (every batch's state changes logged in JetStream, so another
	// runtime can take the partition over).
	Replication Replication `yaml:"replication,omitempty" json:"replication,omitempty"`
	// Standbys is the number of warm copies of each partition on other runtimes (replication:
	// changelog only). Default 0, at most [MaxStandbys].
	Standbys int `yaml:"standbys,omitempty" json:"standbys,omitempty"`
	// Snapshot says how often a partition's state is snapshotted (replication: changelog).
	Snapshot SnapshotSpec `yaml:"snapshot,omitempty" json:"snapshot,omitzero"`
}

// InputSpec names the input subjects and, optionally, the stream that captures them.
type InputSpec struct {
	Subjects []string `yaml:"subjects" json:"subjects"`
	Stream   string   `yaml:"stream,omitempty" json:"stream,omitempty"`
	// MaxAge is how long the stream keeps messages. Unset: a stream groupstate creates keeps
	// them for [DefaultStreamMaxAge], and an existing stream's retention is left alone; set:
	// the stream, created or existing, keeps them this long.
	MaxAge Duration `yaml:"max_age,omitempty" json:"max_age,omitempty"`
}

// KeySpec names the grouping key's field (a dotted JSON path; string or number values).
type KeySpec struct {
	Field string `yaml:"field" json:"field"`
	// SubjectToken, when set, says the key is also token SubjectToken (from 1) of every input
	// subject, which must be a '*' wildcard there in each input subject: with Partitions above
	// 1 the NATS server then splits the rows into partitions itself (no router), and a row
	// whose key field is another partition's key is dead-lettered; with one partition it
	// changes nothing. Default 0: the key is read from the row only.
	SubjectToken int `yaml:"subject_token,omitempty" json:"subject_token,omitempty"`
}

// EventTimeSpec names the event-time field (epoch milliseconds or RFC 3339) and the delay the
// watermark trails the largest event time seen.
type EventTimeSpec struct {
	Field          string   `yaml:"field" json:"field"`
	WatermarkDelay Duration `yaml:"watermark_delay" json:"watermark_delay"`
	// MaxAhead, when set, bounds how far a row's event time may be ahead of the batch's
	// processing time: a row further ahead is dead-lettered (reason event_time_ahead) and
	// does not move the watermark, which would otherwise stay ahead for good (say, after a
	// producer wrote microseconds where milliseconds are meant). Default: unset, no bound.
	MaxAhead Duration `yaml:"max_ahead,omitempty" json:"max_ahead,omitempty"`
	// Idle, for a deployment split into partitions, is how long a partition may go without
	// rows before the others leave it out of their watermark (docs/semantics.md, "Event time
	// across partitions"): an idle partition no longer holds the watermark back. Default
	// [DefaultEventTimeIdle] when partitions > 1 (unset otherwise: one partition has no
	// others); it must be positive.
	Idle Duration `yaml:"idle,omitempty" json:"idle,omitempty"`
}

// OutputSpec names the output subject and, optionally, the stream that keeps it.
type OutputSpec struct {
	Subject string `yaml:"subject" json:"subject"`
	Stream  string `yaml:"stream,omitempty" json:"stream,omitempty"`
	// MaxAge is how long the stream keeps messages. Unset: a stream groupstate creates keeps
	// them for [DefaultStreamMaxAge], and an existing stream's retention is left alone; set:
	// the stream, created or existing, keeps them this long.
	MaxAge Duration `yaml:"max_age,omitempty" json:"max_age,omitempty"`
}

// SinkSpec names a subject and optionally its stream.
type SinkSpec struct {
	Subject string `yaml:"subject,omitempty" json:"subject,omitempty"`
	Stream  string `yaml:"stream,omitempty" json:"stream,omitempty"`
	// MaxAge is how long the stream keeps messages. Unset: a stream groupstate creates keeps
	// them for [DefaultStreamMaxAge], and an existing stream's retention is left alone; set:
	// the stream, created or existing, keeps them this long.
	MaxAge Duration `yaml:"max_age,omitempty" json:"max_age,omitempty"`
}

// TriggerSpec cuts micro-batches. A batch takes the rows available when it starts, up to
// MaxRows rows and MaxBytes bytes; when none are, it waits up to Interval for the first one.
// Under processing-time timeouts a batch runs at least every Interval, with or without rows.
type TriggerSpec struct {
	// Interval defaults to 10ms.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	// MaxRows is the most rows a batch takes. Default [DefaultMaxRows] (10000), at most
	// [MaxTriggerRows] (1000000).
	MaxRows int `yaml:"max_rows,omitempty" json:"max_rows,omitempty"`
	// MaxBytes is the most input bytes (the rows' data) a batch takes; a batch of one row may
	// be larger, so that no row is too large to be taken. Default [DefaultMaxBytes] (16MiB),
	// at most [MaxTriggerBytes] (256MiB). A batch's rows, the dead letters that copy them and
	// the keys' states are held in memory and written in one Pebble batch, which these bound.
	MaxBytes ByteSize `yaml:"max_bytes,omitempty" json:"max_bytes,omitempty"`
}

// LimitsSpec bounds a deployment's module. Zero values take the defaults.
type LimitsSpec struct {
	// Memory caps each instance's linear memory. Default 256MiB.
	Memory ByteSize `yaml:"memory,omitempty" json:"memory,omitempty"`
	// CallTimeout bounds one guest call. Default 5s.
	CallTimeout Duration `yaml:"call_timeout,omitempty" json:"call_timeout,omitempty"`
	// RetryTimeout bounds the retries of one commit of a batch whose failures cannot be pinned
	// on a key. When a guest call fails as a whole (a trap, the call time limit), the host
	// pins the failure: a module that says which key it runs (every SDK of this repository
	// does) has the key that was running retried alone, and the keys before and after it
	// together; a key that fails alone is dead-lettered, the others proceed, and these
	// retries are not bounded by RetryTimeout (each settles a key). A module that does not say
	// has its keys retried alone, one by one, from the first failure on within RetryTimeout:
	// when it is spent, the retry running is interrupted and the keys not yet retried fail
	// (under on_error: dead_letter their rows are dead-lettered with reason handler_error,
	// saying they were not retried). Default [DefaultRetryTimeoutCalls] (12) times
	// CallTimeout, 1m with its default; at least CallTimeout.
	RetryTimeout Duration `yaml:"retry_timeout,omitempty" json:"retry_timeout,omitempty"`
	// MaxOutputBytes caps what one guest call may return. Default 64MiB.
	MaxOutputBytes ByteSize `yaml:"max_output_bytes,omitempty" json:"max_output_bytes,omitempty"`
	// MaxRowBytes caps one input row; larger rows are dead-lettered. Default 1MiB.
	MaxRowBytes ByteSize `yaml:"max_row_bytes,omitempty" json:"max_row_bytes,omitempty"`
	// Instances is how many module instances run guest calls in parallel. Default: the
	// number of CPUs; at most [MaxInstances] (64). The partitions of a deployment that one
	// runtime runs share one module and its instances: the bound is theirs together.
	Instances int `yaml:"instances,omitempty" json:"instances,omitempty"`
}

// OnError is what a failing call for one key does (docs/semantics.md, "Beyond Spark: per-key failures").
type OnError string

// The policies of [Spec.OnError].
const (
	// OnErrorDeadLetter sends the key's rows and the error to the dead-letter subject, keeps
	// the key's state as it was before the call, and lets the other keys proceed.
	OnErrorDeadLetter OnError = "dead_letter"
	// OnErrorFail fails the batch: nothing of it commits and the deployment stops.
	OnErrorFail OnError = "fail"
)

// Defaults of the fields left unset (see [Spec.EnsureDefaults]).
const (
	DefaultTriggerInterval = 10 * time.Millisecond
	DefaultMaxRows         = 10000
	DefaultMaxBytes        = 16 << 20
	DefaultMemory          = 256 << 20
	DefaultCallTimeout     = 5 * time.Second
	// DefaultRetryTimeoutCalls is limits.retry_timeout's default in call timeouts. Pinning a
	// looping key costs a call timeout for its own call, and one more for each further
	// looping key of the same call (the call of the keys after it fails again), so 12 pin
	// about six in one commit, with room for the retries that succeed: a minute with the
	// default call_timeout.
	DefaultRetryTimeoutCalls = 12
	DefaultMaxOutputBytes    = 64 << 20
	DefaultMaxRowBytes       = 1 << 20
	// DefaultStreamMaxAge is how long the streams groupstate creates (input, output,
	// dead-letter, late) keep messages when the spec sets no max_age: a week.
	DefaultStreamMaxAge = 7 * 24 * time.Hour
)

// Upper bounds of fields (Validate refuses larger values).
const (
	// MaxTriggerRows bounds trigger.max_rows: a batch's rows, groups and results are held in
	// memory and its commit is one Pebble batch.
	MaxTriggerRows = 1_000_000
	// MaxTriggerBytes bounds trigger.max_bytes (256 MiB), well below Pebble's 4 GiB limit of
	// a batch even when every row is dead-lettered (copied into the outbox).
	MaxTriggerBytes = 256 << 20
	// MaxInstances bounds limits.instances: each instance holds up to limits.memory.
	MaxInstances = 64
)

// DuplicateWindow is the duplicate window of the streams groupstate publishes to: a
// redelivery of the outbox after a crash within it is dropped by the stream (exactly once
// for stream consumers). It is also the smallest max_age a spec may set.
const DuplicateWindow = 10 * time.Minute

var nameRE = regexp.MustCompile(`^[a-z0-9-]+$`)

// ParseSpec parses and validates a spec. Unknown fields are errors, so a typo does not go
// unnoticed.
func ParseSpec(data []byte) (*Spec, error) {
	data, modeProblem := takeBadTimeout(data)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSpec, err)
	}
	s.EnsureDefaults()
	if err := s.validate(modeProblem); err != nil {
		return nil, err
	}
	return &s, nil
}

// takeBadTimeout finds a top-level timeout that is not a mode. Decoding it into
// [timeouts.Mode] would stop the decoder at once, and the spec's other problems would go
// unreported; so it is reported as a problem of its own and the document is decoded with the
// default mode in its place. Anything else is returned as it is.
func takeBadTimeout(data []byte) ([]byte, string) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return data, "" // the decoder reports it
	}
	m := doc.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		if m[i].Value != "timeout" || m[i+1].Kind != yaml.ScalarNode {
			continue
		}
		_, err := timeouts.ParseMode(m[i+1].Value)
		if err == nil {
			return data, ""
		}
		m[i+1].Value = timeouts.None.String()
		fixed, merr := yaml.Marshal(&doc)
		if merr != nil {
			return data, ""
		}
		return fixed, "timeout: " + err.Error()
	}
	return data, ""
}

// LoadSpec reads and parses the spec at path. It resolves Module relative to the spec's
// directory (unless absolute) and returns that path too.
func LoadSpec(path string) (*Spec, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	s, err := ParseSpec(data)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	mod := s.Module
	if mod != "" && !filepath.IsAbs(mod) {
		mod = filepath.Join(filepath.Dir(path), mod)
	}
	return s, mod, nil
}

// EnsureDefaults fills in the defaults of every unset field.
func (s *Spec) EnsureDefaults() {
	if s.OnError == "" {
		s.OnError = OnErrorDeadLetter
	}
	if s.WatermarkPolicy == "" && len(s.Inputs) > 0 {
		s.WatermarkPolicy = WatermarkMin
	}
	if s.DeadLetter.Subject == "" && s.Name != "" {
		s.DeadLetter.Subject = s.Name + ".dlq"
	}
	if s.Trigger.Interval == 0 {
		s.Trigger.Interval = Duration(DefaultTriggerInterval)
	}
	if s.Trigger.MaxRows == 0 {
		s.Trigger.MaxRows = DefaultMaxRows
	}
	if s.Trigger.MaxBytes == 0 {
		s.Trigger.MaxBytes = DefaultMaxBytes
	}
	l := &s.Limits
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.CallTimeout == 0 {
		l.CallTimeout = Duration(DefaultCallTimeout)
	}
	if l.RetryTimeout == 0 {
		l.RetryTimeout = DefaultRetryTimeoutCalls * l.CallTimeout
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.MaxRowBytes == 0 {
		l.MaxRowBytes = DefaultMaxRowBytes
	}
	s.ensureScaleOutDefaults()
}

// Validate reports every problem of the spec in one error wrapping [ErrInvalidSpec].
func (s *Spec) Validate() error { return s.validate("") }

// validate is Validate with a problem found while decoding (none when empty) listed first.
func (s *Spec) validate(decodeProblem string) error {
	var p []string
	if decodeProblem != "" {
		p = append(p, decodeProblem)
	}
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	switch {
	case s.Name == "":
		add("name is required")
	case len(s.Name) > 63 || !nameRE.MatchString(s.Name):
		add("name %q must be 1 to 63 characters of [a-z0-9-]", s.Name)
	}
	if len(s.Inputs) > 0 {
		s.validateInputs(add)
	} else {
		validateKey("key", s.Key, add)
		validateEventTime("event_time", s.EventTime, add)
		for _, in := range s.Input.Subjects {
			if err := subject.CheckPattern(in); err != nil {
				add("input.subjects: %q is not a valid subject: it %v", in, err)
			} else {
				refuseReserved("input.subjects", in, add)
			}
		}
	}
	s.validatePolicy(add)
	if !s.Timeout.Valid() {
		add("timeout: unknown timeout mode %s", s.Timeout)
	}
	if s.Timeout == timeouts.EventTime && !s.HasEventTime() {
		add("timeout: event_time needs event_time.field and event_time.watermark_delay")
	}
	if s.OnError != OnErrorDeadLetter && s.OnError != OnErrorFail {
		add("on_error %q must be %q or %q", s.OnError, OnErrorDeadLetter, OnErrorFail)
	}
	for _, out := range s.published() {
		if err := subject.CheckLiteral(out.subject); out.subject != "" && err != nil {
			add("%s %q is not a subject to publish to: it %v", out.field, out.subject, err)
		} else if out.subject != "" {
			refuseReserved(out.field, out.subject, add)
		}
	}
	for _, a := range []struct {
		field string
		age   Duration
	}{{"input.max_age", s.Input.MaxAge}, {"output.max_age", s.Output.MaxAge}, {"dead_letter.max_age", s.DeadLetter.MaxAge}, {"late.max_age", s.Late.MaxAge}} {
		if a.age < 0 || (a.age > 0 && a.age.Std() < DuplicateWindow) {
			add("%s must be at least %s (or unset)", a.field, time.Duration(DuplicateWindow))
		}
	}
	if s.Trigger.Interval < 0 || s.Trigger.MaxRows < 0 {
		add("trigger.interval and trigger.max_rows must not be negative")
	}
	if s.Trigger.MaxRows > MaxTriggerRows {
		add("trigger.max_rows %d is above the limit of %d rows a batch", s.Trigger.MaxRows, MaxTriggerRows)
	}
	if s.Trigger.MaxBytes > MaxTriggerBytes {
		add("trigger.max_bytes %d is above the limit of %d bytes (256 MiB) a batch", s.Trigger.MaxBytes, MaxTriggerBytes)
	}
	if s.Limits.RetryTimeout < s.Limits.CallTimeout {
		add("limits.retry_timeout %s must be at least limits.call_timeout %s (a retry may take that long)", s.Limits.RetryTimeout.Std(), s.Limits.CallTimeout.Std())
	}
	if s.Limits.Instances < 0 {
		add("limits.instances must not be negative")
	}
	if s.Limits.Instances > MaxInstances {
		add("limits.instances %d is above the limit of %d", s.Limits.Instances, MaxInstances)
	}
	s.validateScaleOut(add)
	if s.Config != nil {
		if _, err := json.Marshal(s.Config); err != nil {
			add("config cannot be represented as JSON: %v", err)
		}
	}
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidSpec, strings.Join(p, "; "))
}

// ValidateForService is Validate plus what only the NATS service needs: input subjects and
// an output subject, every subject valid, and no subject the deployment publishes to (output,
// dead-letter, late) matched by an input subject: the deployment would read its own messages
// back, and one bad row would become a storm. (Scenario files run without NATS, so their
// specs may leave subjects out.)
func (s *Spec) ValidateForService() error {
	var p []string
	if err := s.Validate(); err != nil {
		return err
	}
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	inputs := s.InputList()
	for _, in := range inputs {
		if len(in.Subjects) > 0 {
			continue
		}
		if s.HasInputs() {
			add("inputs[%s].subjects is required: the subjects to read rows from", in.Name)
		} else {
			add("input.subjects is required: the subjects to read rows from")
		}
	}
	if s.Output.Subject == "" {
		add("output.subject is required: where emitted rows are published")
	}
	for _, out := range s.published() {
		if out.subject == "" || subject.CheckLiteral(out.subject) != nil {
			continue // Validate reported it
		}
		for _, input := range inputs {
			for _, in := range input.Subjects {
				if subject.Subset(out.subject, in) {
					add("%s %q is matched by input subject %q: the deployment would read what it publishes as input (a feedback loop); choose a subject outside the input subjects", out.field, out.subject, in)
				}
			}
		}
	}
	if msg := s.scaleOutNotYetRun(); msg != "" {
		add("%s", msg)
	}
	for _, st := range []struct{ field, name string }{{"output.stream", s.Output.Stream}, {"dead_letter.stream", s.DeadLetter.Stream}, {"late.stream", s.Late.Stream}} {
		for _, in := range inputs {
			if st.name != "" && st.name == in.Stream {
				add("%s %q is the input stream: outputs must not be stored where input is read", st.field, st.name)
			}
		}
	}
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidSpec, strings.Join(p, "; "))
}

// refuseReserved adds a problem when the valid subject or pattern sub, of the spec's field,
// can reach a namespace NATS or groupstate keep for themselves (see subject.Reserved): a
// deployment that publishes to "$KV.groupstate-deployments.x", or whose input stream
// captures "gs.>", would write into the registry or another deployment's streams.
func refuseReserved(field, sub string, add func(format string, args ...any)) {
	if why, ok := subject.Reserved(sub); ok {
		add("%s: %q is reserved: %s; NATS and groupstate keep subjects starting with %s for themselves",
			field, sub, why, quoteAll(subject.ReservedPrefixes))
	}
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// published lists the subjects the deployment publishes to, with their field names.
func (s *Spec) published() []struct{ field, subject string } {
	return []struct{ field, subject string }{
		{"output.subject", s.Output.Subject},
		{"dead_letter.subject", s.DeadLetter.Subject},
		{"late.subject", s.Late.Subject},
	}
}

// ConfigJSON returns Config as a JSON object ("{}" when empty).
func (s *Spec) ConfigJSON() []byte {
	if len(s.Config) == 0 {
		return []byte("{}")
	}
	b, err := json.Marshal(s.Config)
	if err != nil {
		return []byte("{}")
	}
	return b
}
