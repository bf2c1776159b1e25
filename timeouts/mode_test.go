package timeouts_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/timeouts"
)

func TestModeValuesMatchABI(t *testing.T) {
	// The wire ABI fixes these numbers.
	for _, tc := range []struct {
		m    timeouts.Mode
		want uint32
	}{{timeouts.None, 0}, {timeouts.ProcessingTime, 1}, {timeouts.EventTime, 2}} {
		if uint32(tc.m) != tc.want {
			t.Errorf("%s = %d, want %d", tc.m, uint32(tc.m), tc.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    timeouts.Mode
		wantErr bool
	}{
		{"", timeouts.None, false},
		{"none", timeouts.None, false},
		{"processing_time", timeouts.ProcessingTime, false},
		{"event_time", timeouts.EventTime, false},
		{"EventTime", 0, true},
		{"event-time", 0, true},
		{" none", 0, true},
		{"NoTimeout", 0, true},
		{"processingtime", 0, true},
	} {
		got, err := timeouts.ParseMode(tc.in)
		if tc.wantErr {
			if !errors.Is(err, timeouts.ErrUnknownMode) {
				t.Errorf("ParseMode(%q) error = %v, want ErrUnknownMode", tc.in, err)
				continue
			}
			msg := err.Error()
			for _, part := range []string{tc.in, "none", "processing_time", "event_time"} {
				if !strings.Contains(msg, part) {
					t.Errorf("ParseMode(%q) error %q does not mention %q", tc.in, msg, part)
				}
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestModeString(t *testing.T) {
	for _, tc := range []struct {
		m    timeouts.Mode
		want string
	}{
		{timeouts.None, "none"},
		{timeouts.ProcessingTime, "processing_time"},
		{timeouts.EventTime, "event_time"},
		{timeouts.Mode(7), "Mode(7)"},
	} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("Mode(%d).String() = %q, want %q", uint32(tc.m), got, tc.want)
		}
		if got := tc.m.Valid(); got != (tc.want[0] != 'M') {
			t.Errorf("Mode(%d).Valid() = %v", uint32(tc.m), got)
		}
	}
}

func TestModeText(t *testing.T) {
	for _, m := range []timeouts.Mode{timeouts.None, timeouts.ProcessingTime, timeouts.EventTime} {
		b, err := m.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back timeouts.Mode = 99
		if err := back.UnmarshalText(b); err != nil || back != m {
			t.Errorf("round trip of %s: got %v, %v", m, back, err)
		}
	}
	if _, err := timeouts.Mode(3).MarshalText(); !errors.Is(err, timeouts.ErrUnknownMode) {
		t.Errorf("MarshalText(Mode(3)) error = %v, want ErrUnknownMode", err)
	}
	m := timeouts.EventTime
	if err := m.UnmarshalText([]byte("bogus")); !errors.Is(err, timeouts.ErrUnknownMode) || m != timeouts.EventTime {
		t.Errorf("UnmarshalText(bogus) = %v, mode %s; want ErrUnknownMode and the mode unchanged", err, m)
	}
}
