// Package testutil holds the helpers groupstate's tests share: a require in the style of
// wazero's, polling with a deadline instead of sleeping, a quiet logger and file reading.
package testutil

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/groupstate/groupstate/internal/testcache"
)

// Require fails the test at once when err is not nil; msgAndArgs, when given, say what was
// being done.
func Require(t testing.TB, err error, msgAndArgs ...any) {
	t.Helper()
	if err != nil {
		if len(msgAndArgs) > 0 {
			t.Fatalf("%v: %v", msgAndArgs, err)
		}
		t.Fatal(err)
	}
}

// PollDeadline is how long [Eventually] waits by default.
const PollDeadline = 20 * time.Second

// pollInterval is how often [Eventually] checks.
const pollInterval = 10 * time.Millisecond

// Eventually polls cond until it holds, failing the test when it still does not after
// [PollDeadline]. what says what is awaited, for the failure message.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, PollDeadline, what, cond)
}

// EventuallyWithin is [Eventually] with its own deadline.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(pollInterval)
	}
}

// DiscardLogger drops logs; set GROUPSTATE_TEST_LOG=1 to see them.
func DiscardLogger() *slog.Logger {
	if os.Getenv("GROUPSTATE_TEST_LOG") != "" {
		return slog.Default()
	}
	return slog.New(slog.DiscardHandler)
}

// ReadFile returns the file's contents or fails the test.
func ReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	Require(t, err)
	return b
}

// CompileCacheDir is the compilation cache (engine.Options.CacheDir) the tests share
// (testcache.Dir), so that each committed module compiles once rather than in every test. A
// test of the cache itself uses its own directory.
func CompileCacheDir() string { return testcache.Dir() }
