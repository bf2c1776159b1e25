package timeouts

import (
	"fmt"
	"strings"
	"time"
)

// durationWant is the part of every duration error that says what is expected.
const durationWant = "want a duration like 10s, 250ms or 1m30s (units ns, us, ms, s, m, h)"

// ParseDuration parses a duration as written in deployment specs and configs (the
// watermark delay, a handler's idle timeout): Go duration syntax such as "10s", "1m30s"
// or "250ms", surrounding spaces ignored. A unit is required: a bare number such as "10"
// is refused rather than guessed to be milliseconds or seconds, except "0", which means
// the same in every unit. Zero is allowed; callers that need a positive duration check
// for it. Errors wrap [ErrBadDuration], or [ErrNegativeDuration] for a negative duration.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("%w: empty; %s", ErrBadDuration, durationWant)
	}
	if isBareNumber(t) && strings.TrimLeft(t, "+-") != "0" {
		return 0, fmt.Errorf("%w %s: it has no unit; %s", ErrBadDuration, clip(t), durationWant)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%w %s: %s", ErrBadDuration, clip(t), durationWant)
	}
	if d < 0 {
		return 0, fmt.Errorf("%w %s: %s", ErrNegativeDuration, clip(t), "a duration cannot be negative")
	}
	return d, nil
}

// isBareNumber reports whether s looks like a number without a unit.
func isBareNumber(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isDigit(c) && c != '.' && c != '+' && c != '-' {
			return false
		}
	}
	return true
}
