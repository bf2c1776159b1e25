package spec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/timeouts"
)

// specFromYAML parses a spec written in a test.
func specFromYAML(t testing.TB, y string) *spec.Spec {
	t.Helper()
	s, err := spec.ParseSpec([]byte(strings.TrimSpace(y)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseSpecDefaults(t *testing.T) {
	s := specFromYAML(t, `
name: logincount
module: logincount.wasm
input:
  subjects: ["logins.>"]
key:
  field: user_id
output:
  subject: logincount.out
`)
	if s.Timeout != timeouts.None || s.OnError != spec.OnErrorDeadLetter || s.DeadLetter.Subject != "logincount.dlq" {
		t.Fatalf("defaults: timeout %q on_error %q dead_letter %q", s.Timeout, s.OnError, s.DeadLetter.Subject)
	}
	if s.Trigger.Interval.Std() != spec.DefaultTriggerInterval || s.Trigger.MaxRows != spec.DefaultMaxRows || s.Trigger.MaxBytes != spec.DefaultMaxBytes {
		t.Fatalf("trigger defaults: %+v", s.Trigger)
	}
	if s.Limits.Memory != spec.DefaultMemory || s.Limits.CallTimeout.Std() != spec.DefaultCallTimeout || s.Limits.MaxRowBytes != spec.DefaultMaxRowBytes ||
		s.Limits.RetryTimeout.Std() != time.Minute {
		t.Fatalf("limit defaults: %+v", s.Limits)
	}
	if string(s.ConfigJSON()) != "{}" {
		t.Fatalf("config %s", s.ConfigJSON())
	}
}

// TestRetryTimeoutDefault: limits.retry_timeout defaults to a multiple of call_timeout.
func TestRetryTimeoutDefault(t *testing.T) {
	s := specFromYAML(t, "name: a\nkey: {field: k}\nlimits: {call_timeout: 300ms}\n")
	if got := s.Limits.RetryTimeout.Std(); got != spec.DefaultRetryTimeoutCalls*300*time.Millisecond {
		t.Fatalf("retry_timeout %s, want %d x call_timeout", got, spec.DefaultRetryTimeoutCalls)
	}
	s = specFromYAML(t, "name: a\nkey: {field: k}\nlimits: {call_timeout: 300ms, retry_timeout: 300ms}\n")
	if got := s.Limits.RetryTimeout.Std(); got != 300*time.Millisecond {
		t.Fatalf("retry_timeout %s, want 300ms as set", got)
	}
}

// TestSpecUpperBounds: the largest values of the bounded fields are accepted.
func TestSpecUpperBounds(t *testing.T) {
	s := specFromYAML(t, `
name: big
key: {field: k}
trigger: {max_rows: 1000000, max_bytes: 256MiB}
limits: {instances: 64}
`)
	if s.Trigger.MaxRows != spec.MaxTriggerRows || s.Trigger.MaxBytes != spec.MaxTriggerBytes || s.Limits.Instances != spec.MaxInstances {
		t.Fatalf("trigger %+v, limits %+v", s.Trigger, s.Limits)
	}
}

func TestParseSpecFields(t *testing.T) {
	s := specFromYAML(t, `
name: sessions
module: x.wasm
key: {field: user.id}
event_time: {field: ts, watermark_delay: 1m30s}
timeout: event_time
output: {subject: s.out, stream: S_OUT}
dead_letter: {subject: s.bad, stream: S_BAD}
on_error: fail
limits: {memory: 32MiB, call_timeout: 250ms, max_row_bytes: 4KiB, instances: 3}
config:
  gap: 5s
  nested: {a: [1, 2]}
`)
	if s.EventTime.WatermarkDelay.Std() != 90*time.Second || s.Limits.Memory != 32<<20 || s.Limits.MaxRowBytes != 4096 || s.Limits.Instances != 3 {
		t.Fatalf("%+v %+v", s.EventTime, s.Limits)
	}
	if got := string(s.ConfigJSON()); got != `{"gap":"5s","nested":{"a":[1,2]}}` {
		t.Fatalf("config %s", got)
	}
}

func TestParseSpecErrors(t *testing.T) {
	base := "name: ok\nkey: {field: k}\n"
	tests := []struct{ yaml, want string }{
		{"key: {field: k}\n", "name is required"},
		{"name: Has_Upper\nkey: {field: k}\n", `name "Has_Upper" must be 1 to 63 characters of [a-z0-9-]`},
		{"name: ok\n", "key.field is required"},
		{"name: ok\nkey: {field: a..b}\n", `key.field "a..b" is not a valid field path`},
		{base + "timeout: sometimes\n", `timeout: timeouts: unknown timeout mode "sometimes"`},
		{base + "timeout: event_time\n", "timeout: event_time needs event_time.field and event_time.watermark_delay"},
		{base + "on_error: ignore\n", `on_error "ignore" must be "dead_letter" or "fail"`},
		{base + "event_time: {watermark_delay: 10s}\n", "event_time.field is required"},
		{base + "event_time: {field: ts, watermark_delay: 10}\n", "no unit"},
		{base + "limits: {memory: lots}\n", `"lots" is not a size`},
		{base + "outptu: {subject: x}\n", "field outptu not found"},
		{base + "trigger: {max_rows: 1000001}\n", "trigger.max_rows 1000001 is above the limit of 1000000 rows a batch"},
		{base + "trigger: {max_bytes: 257MiB}\n", "trigger.max_bytes 269484032 is above the limit of 268435456 bytes (256 MiB) a batch"},
		{base + "trigger: {max_bytes: lots}\n", `"lots" is not a size`},
		{base + "limits: {instances: 65}\n", "limits.instances 65 is above the limit of 64"},
		{base + "limits: {call_timeout: 2s, retry_timeout: 1s}\n", "limits.retry_timeout 1s must be at least limits.call_timeout 2s"},
		{base + "event_time: {field: ts, watermark_delay: 1s, max_ahead: -1h}\n", "a duration cannot be negative"},
		{"name: [\n", "invalid deployment spec"},
	}
	for _, tc := range tests {
		_, err := spec.ParseSpec([]byte(tc.yaml))
		if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSpec(%q):\n  err  %v\n  want ErrInvalidSpec containing %q", tc.yaml, err, tc.want)
		}
	}
}

// TestParseSpecReportsEveryProblem: one error lists all problems, so a user fixes them in one
// round.
func TestParseSpecReportsEveryProblem(t *testing.T) {
	_, err := spec.ParseSpec([]byte("name: BAD\ntimeout: never\non_error: shrug\nevent_time: {watermark_delay: 1s}\n"))
	for _, want := range []string{"name", "key.field", "timeout", "event_time.field", "on_error"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte("name: a\nkey: {field: k}\ntimeout: processing_time\nconfig: {x: 1}\n"))
	f.Add([]byte("name: a\nkey: {field: k}\nevent_time: {field: ts, watermark_delay: 1s}\ntimeout: event_time\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := spec.ParseSpec(b); err == nil {
			_ = s.ConfigJSON()
		}
	})
}

// TestValidateForServiceRefusesFeedbackLoops: a subject the deployment publishes to that an
// input subject matches would be read back as input (one bad row became thousands of dead
// letters a second). Each is refused with both subjects named; so are invalid subjects and
// an output stream that is the input stream.
func TestValidateForServiceRefusesFeedbackLoops(t *testing.T) {
	base := "key: {field: k}\noutput: {subject: orders-out}\n"
	tests := []struct{ yaml, want string }{
		{"name: orders\ninput: {subjects: [\"orders.>\"]}\n" + base,
			`dead_letter.subject "orders.dlq" is matched by input subject "orders.>"`},
		{"name: x\ninput: {subjects: [\"orders.*\"]}\nkey: {field: k}\noutput: {subject: orders.out}\n",
			`output.subject "orders.out" is matched by input subject "orders.*"`},
		{"name: x\ninput: {subjects: [\"in\", \"orders-out\"]}\n" + base,
			`output.subject "orders-out" is matched by input subject "orders-out"`},
		{"name: x\ninput: {subjects: [in.a]}\n" + base + "late: {subject: in.a}\n",
			`late.subject "in.a" is matched by input subject "in.a"`},
		{"name: x\ninput: {subjects: [in]}\nkey: {field: k}\noutput: {subject: out.>}\n",
			`output.subject "out.>" is not a subject to publish to`},
		{"name: x\ninput: {subjects: [in..a]}\n" + base, `input.subjects: "in..a" is not a valid subject`},
		{"name: x\ninput: {subjects: [in.>.a]}\n" + base, `input.subjects: "in.>.a" is not a valid subject`},
		{"name: x\ninput: {subjects: [in], stream: IN}\nkey: {field: k}\noutput: {subject: out, stream: IN}\n",
			`output.stream "IN" is the input stream`},
		{"name: x\ninput: {subjects: [in], max_age: 1m}\n" + base, "input.max_age must be at least 10m0s"},
	}
	for _, tc := range tests {
		s, err := spec.ParseSpec([]byte(tc.yaml))
		if err == nil {
			err = s.ValidateForService()
		}
		if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("spec %q:\n  err  %v\n  want ErrInvalidSpec containing %q", tc.yaml, err, tc.want)
		}
	}
	ok := specFromYAML(t, "name: orders\ninput: {subjects: [\"orders.in.>\"], max_age: 24h}\nkey: {field: k}\noutput: {subject: orders.out, max_age: 10m}\n")
	if err := ok.ValidateForService(); err != nil {
		t.Fatalf("subjects outside the input subjects: %v", err)
	}
	if ok.Input.MaxAge.Std() != 24*time.Hour || ok.Output.MaxAge.Std() != spec.DuplicateWindow {
		t.Fatalf("max_age: %+v %+v", ok.Input, ok.Output)
	}
}

// TestSpecRefusesReservedSubjects: no subject field may reach a namespace NATS or groupstate
// keep for themselves (the registry's KV subjects, JetStream's API, replies, groupstate's own
// streams and control plane); each refusal names the field and the subject.
func TestSpecRefusesReservedSubjects(t *testing.T) {
	base := "key: {field: k}\n"
	tests := []struct{ yaml, want string }{
		{"name: x\ninput: {subjects: [in]}\n" + base + "output: {subject: \"$KV.groupstate-deployments.pwned\", max_age: 10m}\n",
			`output.subject: "$KV.groupstate-deployments.pwned" is reserved`},
		{"name: x\ninput: {subjects: [in]}\n" + base + "output: {subject: out}\ndead_letter: {subject: _INBOX.x}\n",
			`dead_letter.subject: "_INBOX.x" is reserved`},
		{"name: x\ninput: {subjects: [in]}\n" + base + "output: {subject: out}\nlate: {subject: gs.changelog.y.0}\n",
			`late.subject: "gs.changelog.y.0" is reserved`},
		{"name: x\ninput: {subjects: [in, \"groupstate.api.>\"]}\n" + base + "output: {subject: out}\n",
			`input.subjects: "groupstate.api.>" is reserved`},
		{"name: x\ninput: {subjects: [\">\"]}\n" + base + "output: {subject: out}\n",
			`input.subjects: ">" is reserved`},
		{"name: x\ninput: {subjects: [\"*.logins\"]}\n" + base + "output: {subject: out}\n",
			`input.subjects: "*.logins" is reserved`},
		{"name: x\ninputs:\n- {name: a, subjects: [a], key: {field: k}}\n- {name: b, subjects: [\"$JS.API.>\"], key: {field: k}}\noutput: {subject: out}\n",
			`inputs[b].subjects: "$JS.API.>" is reserved`},
	}
	for _, tc := range tests {
		s, err := spec.ParseSpec([]byte(tc.yaml))
		if err == nil {
			err = s.ValidateForService()
		}
		if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("spec %q:\n  err  %v\n  want ErrInvalidSpec containing %q", tc.yaml, err, tc.want)
		}
	}
	ok := specFromYAML(t, "name: x\ninput: {subjects: [\"logins.>\", \"gsx.in\"]}\nkey: {field: k}\noutput: {subject: out.groupstate}\n")
	if err := ok.ValidateForService(); err != nil {
		t.Errorf("a spec whose subjects only resemble reserved ones is refused: %v", err)
	}
}
