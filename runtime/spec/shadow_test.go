package spec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/spec"
)

const primarySpec = `
name: carts
module: carts.wasm
input: {subjects: ["carts.>"], stream: CARTS}
key: {field: user}
output: {subject: carts.out, stream: CARTS_OUT}
dead_letter: {subject: carts.dlq}
late: {subject: carts.late, stream: CARTS_LATE}
`

// TestAsShadowOf: the primary's subjects get ".shadow" and its streams are left for the
// runtime to choose; subjects and streams of the shadow's own are kept.
func TestAsShadowOf(t *testing.T) {
	primary := specFromYAML(t, primarySpec)
	own := specFromYAML(t, strings.NewReplacer("name: carts", "name: carts-v2", "carts.late, stream: CARTS_LATE", "carts.v2.late, stream: V2_LATE").Replace(primarySpec))
	run := own.AsShadowOf(primary)
	for _, c := range []struct{ what, got, want string }{
		{"output subject", run.Output.Subject, "carts.out.shadow"},
		{"output stream", run.Output.Stream, ""},
		{"dead-letter subject", run.DeadLetter.Subject, "carts.dlq.shadow"},
		{"late subject", run.Late.Subject, "carts.v2.late"},
		{"late stream", run.Late.Stream, "V2_LATE"},
		{"the spec's own output subject", own.Output.Subject, "carts.out"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
		}
	}
	if err := run.Validate(); err != nil {
		t.Errorf("the shadow's spec: %v", err)
	}
}

const partitionedPrimarySpec = `
name: carts
module: carts.wasm
input: {subjects: ["carts.*"]}
key: {field: user, subject_token: 2}
partitions: 4
replication: changelog
output: {subject: carts.out}
`

const inputsPrimarySpec = `
name: carts
module: carts.wasm
inputs:
  - {name: adds, subjects: ["carts.add"], key: {field: user}}
  - {name: pays, subjects: ["pay.>"], key: {field: customer}}
output: {subject: carts.out}
`

// TestCheckShadowOf: a shadow reads its primary's input under its own name, with as many
// partitions split by the same key; refusals say why.
func TestCheckShadowOf(t *testing.T) {
	for _, tc := range []struct {
		name, primary, from, to, why string // why: "" for allowed
	}{
		{"another module and config", primarySpec, "module: carts.wasm", "module: v2.wasm\nconfig: {gap: 1h}", ""},
		{"another key", primarySpec, "key: {field: user}", "key: {field: customer}", ""},
		{"replicated", primarySpec, "key: {field: user}", "key: {field: user}\nreplication: changelog", ""},
		{"the same name", primarySpec, "name: carts-v2", "name: carts", "a name of its own"},
		{"other subjects", primarySpec, `subjects: ["carts.>"]`, `subjects: ["carts.web"]`, "needs the same input"},
		{"another stream", primarySpec, "stream: CARTS}", "stream: OTHER}", "needs the same input"},
		{"partitions of one", primarySpec, "key: {field: user}", "key: {field: user}\npartitions: 4\nreplication: changelog", "as many"},
		{"partitioned", partitionedPrimarySpec, "module: carts.wasm", "module: v2.wasm", ""},
		{"partitioned, fewer partitions", partitionedPrimarySpec, "partitions: 4", "partitions: 2", "as many"},
		{"partitioned, another key field", partitionedPrimarySpec, "key: {field: user, subject_token: 2}", "key: {field: customer, subject_token: 2}", "split like carts's"},
		{"partitioned, split by the router", partitionedPrimarySpec, "key: {field: user, subject_token: 2}", "key: {field: user}", "split like carts's"},
		{"inputs", inputsPrimarySpec, "module: carts.wasm", "module: v2.wasm", ""},
		{"inputs, another key", inputsPrimarySpec, "key: {field: customer}", "key: {field: buyer}", ""},
		{"inputs, other subjects", inputsPrimarySpec, `["pay.>"]`, `["pay.card"]`, "same subjects"},
		{"inputs, renamed", inputsPrimarySpec, "name: pays", "name: payments", "same subjects"},
		{"inputs, another stream", inputsPrimarySpec, `subjects: ["pay.>"],`, `subjects: ["pay.>"], stream: OTHER,`, "same subjects and stream"},
		{"inputs against one", inputsPrimarySpec, "inputs:\n  - {name: adds, subjects: [\"carts.add\"], key: {field: user}}\n  - {name: pays, subjects: [\"pay.>\"], key: {field: customer}}", "input: {subjects: [\"carts.add\"]}\nkey: {field: user}", "several inputs and the other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := specFromYAML(t, tc.primary)
			y := strings.Replace(tc.primary, "name: carts\n", "name: carts-v2\n", 1)
			if !strings.Contains(y, tc.from) {
				t.Fatalf("%q is not in the spec", tc.from)
			}
			err := specFromYAML(t, strings.Replace(y, tc.from, tc.to, 1)).CheckShadowOf(primary)
			switch {
			case tc.why == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.why != "" && (!errors.Is(err, spec.ErrShadow) || !strings.Contains(err.Error(), tc.why)):
				t.Fatalf("%v, want ErrShadow saying %q", err, tc.why)
			}
		})
	}
}

// TestCheckReplayOf: a replay spec may keep the deployment's name and change its config and
// timeouts, not its input; the refusal is ErrReplaySpec.
func TestCheckReplayOf(t *testing.T) {
	deployed := specFromYAML(t, primarySpec)
	if err := specFromYAML(t, strings.Replace(primarySpec, "module: carts.wasm", "module: carts.wasm\nconfig: {gap: 10s}\ntimeout: processing_time", 1)).CheckReplayOf(deployed); err != nil {
		t.Fatalf("the same name, another config and timeout: %v", err)
	}
	err := specFromYAML(t, strings.Replace(primarySpec, `subjects: ["carts.>"]`, `subjects: ["carts.web"]`, 1)).CheckReplayOf(deployed)
	if !errors.Is(err, spec.ErrReplaySpec) || errors.Is(err, spec.ErrShadow) || !strings.Contains(err.Error(), "needs the same input") {
		t.Fatalf("other subjects: %v, want ErrReplaySpec", err)
	}
}
