package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/internal/toolchain"
)

// The tests that build WebAssembly with a toolchain other than Go's (clang, rustc, asc) skip
// when it is missing, so that the README's test command passes on a machine with only Go, as
// Go's own tests skip for a missing tool (internal/testenv.MustHaveExecPath). CI must not pass
// by skipping: .ci/run installs the toolchains and then sets requireToolchainsEnv, which turns
// those skips into failures.
//
// Only this package's tests need a toolchain (the engine's conformance tests read the
// committed modules), so the helpers live here.
const (
	// requireToolchainsEnv, when true (1), makes a missing toolchain fail the test.
	requireToolchainsEnv = toolchain.RequireEnv
	// installToolchains installs every toolchain the tests use, on Debian.
	installToolchains = "bash .ci/install-toolchains"
)

// toolchainMissing ends t because a toolchain it needs is missing, as the message says: with
// a skip that names the install command, or, when GROUPSTATE_REQUIRE_TOOLCHAINS is true, a
// failure. A value that is not a boolean fails, so that a typo cannot turn CI's failures into
// skips.
func toolchainMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	v := os.Getenv(requireToolchainsEnv)
	require, err := toolchain.Required()
	switch {
	case err != nil:
		t.Fatalf("%v; %s; '%s' installs it", err, msg, installToolchains)
	case v == "":
		t.Skipf("%s; '%s' installs it (and %s=1 makes this a failure)", msg, installToolchains, requireToolchainsEnv)
	case !require:
		t.Skipf("%s; '%s' installs it (%s=%s)", msg, installToolchains, requireToolchainsEnv, v)
	}
	t.Fatalf("%s; '%s' installs it (%s=%s: a missing toolchain is a failure)", msg, installToolchains, requireToolchainsEnv, v)
}

// mustHaveExecPath returns the path of the executable file (looked up in PATH unless it has a
// slash) and ends t with toolchainMissing when there is none.
func mustHaveExecPath(t testing.TB, file string) string {
	t.Helper()
	path, err := exec.LookPath(file)
	if err != nil {
		toolchainMissing(t, "%s is not installed (%v)", file, err)
	}
	return path
}

// TestToolchainMissing runs a test for a toolchain no machine has in a child process of this
// test binary, under each value of GROUPSTATE_REQUIRE_TOOLCHAINS: unset, empty or false it
// skips naming the install command; true it fails; a value that is no boolean fails.
func TestToolchainMissing(t *testing.T) {
	if os.Getenv("GROUPSTATE_TOOLCHAIN_CHILD") == "1" {
		mustHaveExecPath(t, "groupstate-no-such-compiler")
		t.Fatal("mustHaveExecPath returned for a tool that is not installed")
	}
	tests := []struct {
		env  []string // GROUPSTATE_REQUIRE_TOOLCHAINS, or none
		fail bool
		want string
	}{
		{nil, false, "--- SKIP: TestToolchainMissing"},
		{[]string{requireToolchainsEnv + "="}, false, "--- SKIP: TestToolchainMissing"},
		{[]string{requireToolchainsEnv + "=0"}, false, "--- SKIP: TestToolchainMissing"},
		{[]string{requireToolchainsEnv + "=1"}, true, "a missing toolchain is a failure"},
		{[]string{requireToolchainsEnv + "=true"}, true, "a missing toolchain is a failure"},
		{[]string{requireToolchainsEnv + "=yes"}, true, `GROUPSTATE_REQUIRE_TOOLCHAINS="yes" is not 1 or 0`},
	}
	for _, tc := range tests {
		cmd := exec.Command(os.Args[0], "-test.run=^TestToolchainMissing$", "-test.v")
		cmd.Env = append(append(envWithout(requireToolchainsEnv), "GROUPSTATE_TOOLCHAIN_CHILD=1"), tc.env...)
		out, err := cmd.CombinedOutput()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		if failed := err != nil; failed != tc.fail {
			t.Errorf("%v: failed %v, want %v\n%s", tc.env, failed, tc.fail, out)
		}
		for _, want := range []string{tc.want, "groupstate-no-such-compiler is not installed", "'bash .ci/install-toolchains' installs it"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%v: the output lacks %q:\n%s", tc.env, want, out)
			}
		}
	}
}

// envWithout is the environment without the variable name.
func envWithout(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			env = append(env, kv)
		}
	}
	return env
}
