package testutil

import (
	"testing"
)

// TestLong: a long test is skipped without LongTestsEnv=1 and runs with it.
func TestLong(t *testing.T) {
	for _, tc := range []struct {
		env     string
		skipped bool
	}{{"", true}, {"0", true}, {"true", true}, {"1", false}} {
		t.Setenv(LongTestsEnv, tc.env)
		ran := false
		t.Run("env="+tc.env, func(t *testing.T) {
			Long(t)
			ran = true
		})
		if ran == tc.skipped {
			t.Errorf("%s=%q: ran %v, want skipped %v", LongTestsEnv, tc.env, ran, tc.skipped)
		}
	}
}
