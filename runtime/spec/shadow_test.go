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

// TestCheckShadowOf: a shadow reads its primary's input under its own name; this version
// refuses shadows of partitioned, replicated and several-input deployments, saying why.
func TestCheckShadowOf(t *testing.T) {
	primary := specFromYAML(t, primarySpec)
	for _, tc := range []struct {
		name, from, to, why string // why: "" for allowed
	}{
		{"another module and config", "module: carts.wasm", "module: v2.wasm\nconfig: {gap: 1h}", ""},
		{"the same name", "name: carts-v2", "name: carts", "a name of its own"},
		{"other subjects", `subjects: ["carts.>"]`, `subjects: ["carts.web"]`, "reads the same input"},
		{"another stream", "stream: CARTS}", "stream: OTHER}", "reads the same input"},
		{"partitions", "key: {field: user}", "key: {field: user}\npartitions: 4", "partitions"},
		{"replication", "key: {field: user}", "key: {field: user}\npartitions: 2\nreplication: changelog", "not supported yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := strings.Replace(strings.Replace(primarySpec, "name: carts", "name: carts-v2", 1), tc.from, tc.to, 1)
			err := specFromYAML(t, y).CheckShadowOf(primary)
			switch {
			case tc.why == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.why != "" && (!errors.Is(err, spec.ErrShadow) || !strings.Contains(err.Error(), tc.why)):
				t.Fatalf("%v, want ErrShadow saying %q", err, tc.why)
			}
		})
	}
}
