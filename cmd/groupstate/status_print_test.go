package main

import (
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
)

// TestPrintStatusStale: `status` prints a stale status as stale with its age, whatever its
// stored state says, and a fresh one as it is.
func TestPrintStatusStale(t *testing.T) {
	tests := []struct {
		name string
		age  time.Duration
		want string
	}{
		{"fresh", time.Second, "state:               running\n"},
		{"stale", 2 * time.Minute, "state:               stale (last update 2m0s ago)\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &client.Status{Name: "x", State: client.StatusRunning, UpdatedAt: time.Now().Add(-tc.age)}
			st.MarkStale(time.Now())
			var b strings.Builder
			printStatus(&b, st)
			if !strings.Contains(b.String(), tc.want) {
				t.Fatalf("printed:\n%s\nwant a line %q", b.String(), tc.want)
			}
		})
	}
}
