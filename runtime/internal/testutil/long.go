package testutil

import (
	"testing"

	"github.com/groupstate/groupstate/internal/testlong"
)

// LongTestsEnv names the environment variable that runs the long tests (see testlong.Env):
// failovers on clusters and other runs of a minute or more, which `go test ./...` (the
// README's test command) skips so that it stays within the time the README gives. .ci/run
// sets it to 1 and runs them after the others.
const LongTestsEnv = testlong.Env

// Long marks t a long test (testlong.Long): it runs only when LongTestsEnv is 1, and is
// skipped otherwise with a line that says how to run it. Call it first in the test function
// itself: .ci/run finds the long tests by that call.
func Long(t testing.TB) {
	t.Helper()
	testlong.Long(t)
}
