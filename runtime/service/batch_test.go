package service_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestBatchesCutByBytes: fetched input larger than trigger.max_bytes is run as several
// batches (the engine refuses a larger batch), so big rows never stall a deployment.
func TestBatchesCutByBytes(t *testing.T) {
	env := startNATS(t)
	env.startService(t.TempDir(), nil)
	env.deploy(strings.Replace(logincountSpec, "timeout: processing_time\n", "timeout: processing_time\ntrigger: {max_bytes: 1KiB}\n", 1), logincountWasm(t))
	env.waitRunning("logincount")
	pad := strings.Repeat("x", 300)
	var rows []string
	for i := range 30 {
		rows = append(rows, fmt.Sprintf(`{"user_id": "u%d", "pad": %q}`, i%3, pad))
	}
	env.publish("logins.web", rows...)
	env.waitTotals(map[string]int{"u0": 10, "u1": 10, "u2": 10})
}
