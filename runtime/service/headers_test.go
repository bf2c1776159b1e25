package service_test

import (
	"testing"

	"github.com/groupstate/groupstate/runtime/service"
)

// TestHeaderNames pins the header names, which consumers of the output and dead-letter
// streams read (and which go doc shows in comments).
func TestHeaderNames(t *testing.T) {
	for got, want := range map[string]string{
		service.HeaderDeployment: "Groupstate-Deployment", service.HeaderKey: "Groupstate-Key",
		service.HeaderBatch: "Groupstate-Batch", service.HeaderReason: "Groupstate-Reason",
		service.HeaderError: "Groupstate-Error", service.HeaderSubject: "Groupstate-Subject",
		service.HeaderSequence: "Groupstate-Sequence", service.HeaderTimeoutCall: "Groupstate-Timeout-Call",
	} {
		if got != want {
			t.Errorf("header %q, want %q", got, want)
		}
	}
}
