package client

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestStatusStale: a status of a live state whose update time is older than StaleAfter reads
// stale, whatever it says; the stored state stays in the JSON, beside "stale": true.
func TestStatusStale(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name      string
		st        Status
		stale     bool
		shown     string
		partition bool
	}{
		{"fresh running", Status{State: StatusRunning, UpdatedAt: now.Add(-time.Second)}, false, "running", false},
		{"running at the threshold", Status{State: StatusRunning, UpdatedAt: now.Add(-StaleAfter)}, false, "running", false},
		{"running just past it", Status{State: StatusRunning, UpdatedAt: now.Add(-StaleAfter - time.Second)}, true, "stale (last update 16s ago)", false},
		{"running long ago", Status{State: StatusRunning, UpdatedAt: now.Add(-10 * time.Minute)}, true, "stale (last update 10m0s ago)", false},
		{"drained long ago", Status{State: StatusDrained, UpdatedAt: now.Add(-time.Minute)}, true, "stale (last update 1m0s ago)", false},
		{"stopped long ago: a last word", Status{State: StatusStopped, UpdatedAt: now.Add(-time.Hour)}, false, "stopped", false},
		{"failed long ago", Status{State: StatusFailed, UpdatedAt: now.Add(-time.Hour)}, false, "failed", false},
		{"orphaned long ago", Status{State: StatusOrphaned, UpdatedAt: now.Add(-time.Hour)}, false, "orphaned", false},
		{"never updated", Status{State: "pending"}, false, "pending", false},
		{"clock ahead of the reader", Status{State: StatusRunning, UpdatedAt: now.Add(time.Minute)}, false, "running", false},
		{"one partition stale", Status{State: StatusRunning, UpdatedAt: now, oldestLive: now.Add(-20 * time.Second)}, true, "stale (last update 20s ago)", true},
		{"every partition fresh", Status{State: StatusRunning, UpdatedAt: now, oldestLive: now.Add(-2 * time.Second)}, false, "running", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			st.MarkStale(now)
			if st.Stale != tc.stale {
				t.Fatalf("Stale = %v, want %v", st.Stale, tc.stale)
			}
			if got := st.ShownState(now); got != tc.shown {
				t.Fatalf("ShownState = %q, want %q", got, tc.shown)
			}
			doc, err := json.Marshal(&st)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(doc), `"state":"`+tc.st.State+`"`) {
				t.Fatalf("JSON lost the stored state: %s", doc)
			}
			if got := strings.Contains(string(doc), `"stale":true`); got != tc.stale {
				t.Fatalf("JSON stale field present = %v, want %v: %s", got, tc.stale, doc)
			}
		})
	}
}
