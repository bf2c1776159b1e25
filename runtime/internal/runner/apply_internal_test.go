package runner

import (
	"encoding/json"
	"testing"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/registry"
)

// TestRunsDecidesRedeploys: a deploy of the record a runner already runs does nothing, unless
// the runner failed or keeps faulting (then the same-spec redeploy restarts it: a fetch that
// fails forever has no other way out) or the deploy asks for a state reset.
func TestRunsDecidesRedeploys(t *testing.T) {
	rec := registry.Record{Name: "d", Spec: json.RawMessage(`{"name":"d"}`), ModuleDigest: "aa"}
	tests := []struct {
		name   string
		runner *Runner
		rec    registry.Record
		want   bool
	}{
		{"no runner", nil, rec, false},
		{"same record", testRunner(rec, client.Status{State: client.StatusRunning}), rec, true},
		{"recovered (an old error only in LastError)", testRunner(rec, client.Status{State: client.StatusRunning, LastError: "x"}), rec, true},
		{"new module", testRunner(rec, client.Status{}), registry.Record{Name: "d", Spec: rec.Spec, ModuleDigest: "bb"}, false},
		{"new spec", testRunner(rec, client.Status{}), registry.Record{Name: "d", Spec: json.RawMessage(`{"name":"d","x":1}`), ModuleDigest: "aa"}, false},
		{"reset asked", testRunner(rec, client.Status{}), registry.Record{Name: "d", Spec: rec.Spec, ModuleDigest: "aa", ResetState: "t"}, false},
		{"failed", testRunner(rec, client.Status{State: client.StatusFailed, Error: "boom"}), rec, false},
		{"faulting", testRunner(rec, client.Status{State: client.StatusRunning, Error: "fetching input: boom"}), rec, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.runner.Runs(tt.rec); got != tt.want {
				t.Fatalf("runs = %v, want %v", got, tt.want)
			}
		})
	}
}

// testRunner is a runner of rec whose status is st, made for runs alone.
func testRunner(rec registry.Record, st client.Status) *Runner {
	r := &Runner{unit: unit{rec: rec}}
	r.report.reset(st)
	return r
}
