// Package testlong marks long tests, which `go test ./...` skips and .ci/run runs: the
// packages outside runtime/ use it directly (runtime/internal/testutil.Long calls it).
package testlong

import (
	"os"
	"testing"
)

// Env names the environment variable that runs the long tests: failovers on clusters, runs
// of a minute or more, the guides that need a toolchain other than Go's, which `go test
// ./...` (the README's test command) skips so that it stays within the time the README
// gives. .ci/run sets it to 1 and runs them after the others.
const Env = "GROUPSTATE_LONG_TESTS"

// Long marks t a long test: it runs only when Env is 1, and is skipped otherwise with a line
// that says how to run it. Call it first in the test function itself: .ci/long-tests finds
// the long tests by that call (testlong.Long(t) or testutil.Long(t)).
func Long(t testing.TB) {
	t.Helper()
	if os.Getenv(Env) != "1" {
		t.Skipf("a long test: %s=1 runs it (.ci/run does)", Env)
	}
}
