package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/timeouts"
)

// ErrInvalidSpec is wrapped by every spec validation error.
var ErrInvalidSpec = errors.New("runtime: invalid deployment spec")

// Spec is a deployment spec, the YAML document of DESIGN section 4. Field names and meanings
// are a contract; see docs/spec.md (field reference with defaults).
type Spec struct {
	// Name identifies the deployment: [a-z0-9-]+, at most 63 characters.
	Name string `yaml:"name" json:"name"`
	// Module is the path of the .wasm file, relative to the spec file.
	Module string `yaml:"module" json:"module"`
	// Input selects the rows.
	Input InputSpec `yaml:"input" json:"input"`
	// Key selects the grouping key.
	Key KeySpec `yaml:"key" json:"key"`
	// EventTime, when set, names the event-time column and the watermark delay.
	EventTime *EventTimeSpec `yaml:"event_time,omitempty" json:"event_time,omitempty"`
	// Timeout is none (default), processing_time or event_time.
	Timeout string `yaml:"timeout" json:"timeout"`
	// Output is where emitted rows go.
	Output OutputSpec `yaml:"output" json:"output"`
	// OnError is what a failing call for one key does: dead_letter (default) or fail.
	OnError string `yaml:"on_error" json:"on_error"`
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
}

// InputSpec names the input subjects and, optionally, the stream that captures them.
type InputSpec struct {
	Subjects []string `yaml:"subjects" json:"subjects"`
	Stream   string   `yaml:"stream,omitempty" json:"stream,omitempty"`
}

// KeySpec names the grouping key's field (a dotted JSON path; string or number values).
type KeySpec struct {
	Field string `yaml:"field" json:"field"`
}

// EventTimeSpec names the event-time field (epoch milliseconds or RFC 3339) and the delay the
// watermark trails the largest event time seen.
type EventTimeSpec struct {
	Field          string   `yaml:"field" json:"field"`
	WatermarkDelay Duration `yaml:"watermark_delay" json:"watermark_delay"`
}

// OutputSpec names the output subject and, optionally, the stream that keeps it.
type OutputSpec struct {
	Subject string `yaml:"subject" json:"subject"`
	Stream  string `yaml:"stream,omitempty" json:"stream,omitempty"`
}

// SinkSpec names a subject and optionally its stream.
type SinkSpec struct {
	Subject string `yaml:"subject,omitempty" json:"subject,omitempty"`
	Stream  string `yaml:"stream,omitempty" json:"stream,omitempty"`
}

// TriggerSpec cuts micro-batches. A batch takes the rows available when it starts, up to
// MaxRows; when none are, it waits up to Interval for the first one. Under processing-time
// timeouts a batch runs at least every Interval, with or without rows.
type TriggerSpec struct {
	// Interval defaults to 10ms.
	Interval Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	// MaxRows defaults to 10000.
	MaxRows int `yaml:"max_rows,omitempty" json:"max_rows,omitempty"`
}

// LimitsSpec bounds a deployment's module. Zero values take the defaults.
type LimitsSpec struct {
	// Memory caps each instance's linear memory. Default 256MiB.
	Memory ByteSize `yaml:"memory,omitempty" json:"memory,omitempty"`
	// CallTimeout bounds one guest call. Default 5s.
	CallTimeout Duration `yaml:"call_timeout,omitempty" json:"call_timeout,omitempty"`
	// MaxOutputBytes caps what one guest call may return. Default 64MiB.
	MaxOutputBytes ByteSize `yaml:"max_output_bytes,omitempty" json:"max_output_bytes,omitempty"`
	// MaxRowBytes caps one input row; larger rows are dead-lettered. Default 1MiB.
	MaxRowBytes ByteSize `yaml:"max_row_bytes,omitempty" json:"max_row_bytes,omitempty"`
	// Instances is how many module instances run guest calls in parallel. Default: the
	// number of CPUs.
	Instances int `yaml:"instances,omitempty" json:"instances,omitempty"`
}

// Policies of OnError.
const (
	OnErrorDeadLetter = "dead_letter"
	OnErrorFail       = "fail"
)

// Defaults.
const (
	DefaultTriggerInterval = 10 * time.Millisecond
	DefaultMaxRows         = 10000
	DefaultMemory          = 256 << 20
	DefaultCallTimeout     = 5 * time.Second
	DefaultMaxOutputBytes  = 64 << 20
	DefaultMaxRowBytes     = 1 << 20
)

var nameRE = regexp.MustCompile(`^[a-z0-9-]+$`)

// ParseSpec parses and validates a spec. Unknown fields are errors, so a typo does not go
// unnoticed.
func ParseSpec(data []byte) (*Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Spec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSpec, err)
	}
	s.EnsureDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
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
	if s.Timeout == "" {
		s.Timeout = timeouts.None.String()
	}
	if s.OnError == "" {
		s.OnError = OnErrorDeadLetter
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
	l := &s.Limits
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.CallTimeout == 0 {
		l.CallTimeout = Duration(DefaultCallTimeout)
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if l.MaxRowBytes == 0 {
		l.MaxRowBytes = DefaultMaxRowBytes
	}
}

// Validate reports every problem of the spec in one error wrapping [ErrInvalidSpec].
func (s *Spec) Validate() error {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	switch {
	case s.Name == "":
		add("name is required")
	case len(s.Name) > 63 || !nameRE.MatchString(s.Name):
		add("name %q must be 1 to 63 characters of [a-z0-9-]", s.Name)
	}
	if s.Key.Field == "" {
		add("key.field is required")
	} else if _, err := rowjson.ParsePath(s.Key.Field); err != nil {
		add("key.field %q is not a valid field path", s.Key.Field)
	}
	mode, err := timeouts.ParseMode(s.Timeout)
	if err != nil {
		add("timeout: %v", err)
	}
	if s.EventTime != nil {
		if s.EventTime.Field == "" {
			add("event_time.field is required when event_time is set")
		} else if _, err := rowjson.ParsePath(s.EventTime.Field); err != nil {
			add("event_time.field %q is not a valid field path", s.EventTime.Field)
		}
		if s.EventTime.WatermarkDelay < 0 {
			add("event_time.watermark_delay must not be negative")
		}
	}
	if err == nil && mode == timeouts.EventTime && s.EventTime == nil {
		add("timeout: event_time needs event_time.field and event_time.watermark_delay")
	}
	if s.OnError != OnErrorDeadLetter && s.OnError != OnErrorFail {
		add("on_error %q must be %q or %q", s.OnError, OnErrorDeadLetter, OnErrorFail)
	}
	for _, subj := range s.Input.Subjects {
		if subj == "" || strings.ContainsAny(subj, " \t\r\n") {
			add("input.subjects: %q is not a valid subject", subj)
		}
	}
	if s.Trigger.Interval < 0 || s.Trigger.MaxRows < 0 {
		add("trigger.interval and trigger.max_rows must not be negative")
	}
	if s.Limits.Instances < 0 {
		add("limits.instances must not be negative")
	}
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
// an output subject. (Scenario files run without NATS, so their specs may leave them out.)
func (s *Spec) ValidateForService() error {
	var p []string
	if err := s.Validate(); err != nil {
		return err
	}
	if len(s.Input.Subjects) == 0 {
		p = append(p, "input.subjects is required: the subjects to read rows from")
	}
	if s.Output.Subject == "" {
		p = append(p, "output.subject is required: where emitted rows are published")
	}
	if len(p) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrInvalidSpec, strings.Join(p, "; "))
}

// Mode returns the spec's timeout mode (valid specs only).
func (s *Spec) Mode() timeouts.Mode {
	m, _ := timeouts.ParseMode(s.Timeout)
	return m
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

// Duration is a time.Duration written as a Go duration string ("10s", "1m30s") in YAML and
// JSON.
type Duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := timeouts.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := timeouts.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// ByteSize is a size in bytes written as a number or with a unit: "64MiB", "512KiB", "1GB".
type ByteSize uint64

// ParseByteSize parses sizes such as "1048576", "512KiB", "64MiB", "1GiB", "10MB".
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   uint64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000_000}, {"GB", 1000_000_000}, {"B", 1}}
	mult := uint64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n > (1<<63)/mult {
		return 0, fmt.Errorf("%q is not a size (want a number of bytes, or a number with KiB, MiB, GiB, KB, MB or GB)", s)
	}
	return ByteSize(n * mult), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*b = v
	return nil
}
