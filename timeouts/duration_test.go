package timeouts_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/groupstate/groupstate/timeouts"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"10s", 10 * time.Second},
		{"1m30s", 90 * time.Second},
		{"250ms", 250 * time.Millisecond},
		{"1h", time.Hour},
		{"1.5s", 1500 * time.Millisecond},
		{"0s", 0},
		{"0", 0},
		{"+0", 0},
		{"-0s", 0},
		{" 10s ", 10 * time.Second},
		{"+5s", 5 * time.Second},
		{"10us", 10 * time.Microsecond},
		{"10µs", 10 * time.Microsecond},
	} {
		got, err := timeouts.ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     error
		mentions string
	}{
		{"", timeouts.ErrBadDuration, "empty"},
		{"   ", timeouts.ErrBadDuration, "empty"},
		{"10", timeouts.ErrBadDuration, "no unit"},
		{"10000", timeouts.ErrBadDuration, "no unit"},
		{"1.5", timeouts.ErrBadDuration, "no unit"},
		{"-10", timeouts.ErrBadDuration, "no unit"},
		{"10 s", timeouts.ErrBadDuration, `"10 s"`},
		{"10 seconds", timeouts.ErrBadDuration, `"10 seconds"`},
		{"ten", timeouts.ErrBadDuration, `"ten"`},
		{"10d", timeouts.ErrBadDuration, `"10d"`},
		{"s", timeouts.ErrBadDuration, `"s"`},
		{"9999999999h", timeouts.ErrBadDuration, `"9999999999h"`},
		{"-5s", timeouts.ErrNegativeDuration, "negative"},
		{"-1ns", timeouts.ErrNegativeDuration, "negative"},
	} {
		got, err := timeouts.ParseDuration(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.mentions) {
			t.Errorf("ParseDuration(%q) error %q does not mention %q", tc.in, msg, tc.mentions)
		}
		if tc.want == timeouts.ErrBadDuration && !strings.Contains(err.Error(), "want a duration like 10s") {
			t.Errorf("ParseDuration(%q) error %q does not say what is wanted", tc.in, err)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"10s", "1m30s", "250ms", "0", "10", "-5s", "", "1.5h", "9999999999h", "µs", "1e3s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := timeouts.ParseDuration(s)
		if err != nil {
			if !errors.Is(err, timeouts.ErrBadDuration) && !errors.Is(err, timeouts.ErrNegativeDuration) {
				t.Fatalf("ParseDuration(%q) error %v wraps no sentinel", s, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
	})
}
