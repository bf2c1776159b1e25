// Package testcache names the compilation cache groupstate's tests share.
package testcache

import (
	"os"
	"path/filepath"
)

// Dir is the compilation cache (engine.Options.CacheDir) the tests share, in and across test
// processes and runs, so that each committed module compiles once rather than in every test
// (a Go module takes seconds to compile). wazero keys what it keeps by the module's digest,
// its own version and the CPU's features, and writes each entry atomically, so processes may
// share it. A test of the cache itself, or of a slow compilation, uses its own directory.
func Dir() string {
	return filepath.Join(os.TempDir(), "groupstate-test-cache")
}
