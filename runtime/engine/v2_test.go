package engine_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// v2Cases lists testdata/v2's scenarios (each names its spec on its first line).
func v2Cases(t *testing.T) []scenarioCase {
	files, err := filepath.Glob("testdata/v2/*.jsonl")
	require(t, err)
	var cases []scenarioCase
	for _, f := range files {
		first, _, _ := strings.Cut(string(readFile(t, f)), "\n")
		sp, ok := strings.CutPrefix(first, "# spec: ")
		if !ok {
			t.Fatalf("%s: first line must be \"# spec: FILE\"", f)
		}
		cases = append(cases, scenarioCase{filepath.Base(f), filepath.Join("testdata/v2", sp), f})
	}
	return cases
}

// TestV2Scenarios runs the ABI v2 scenarios of testdata/v2 with the v2probe module, as they
// are and with a restart before every batch (state, timers and TTL survive restarts).
func TestV2Scenarios(t *testing.T) {
	for _, c := range v2Cases(t) {
		t.Run(c.name, func(t *testing.T) {
			steps := parseSteps(t, c.file)
			runScenario(t, c, steps)
			runScenario(t, c, withRestarts(steps))
		})
	}
}
