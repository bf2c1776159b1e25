package timeouts

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// eventTimeWant is the part of every event-time error that says what is expected.
const eventTimeWant = `want epoch milliseconds (a JSON number) or an RFC 3339 timestamp string like "2024-01-02T03:04:05Z"`

// ParseEventTime parses a row's event time from tok, the raw bytes of one JSON value
// (surrounding JSON whitespace is ignored). Two forms are accepted:
//
//   - a JSON number of epoch milliseconds, such as 1700000000000; a number with a fraction
//     or an exponent is truncated toward zero (1.9 is 1, -1.9 is -1), and a number outside
//     the int64 range is refused;
//   - a JSON string, possibly with escapes, holding an RFC 3339 timestamp
//     ([time.RFC3339Nano], fractional seconds optional), such as "2024-01-02T03:04:05Z" or
//     "2024-01-02T03:04:05.123+01:00"; sub-millisecond digits are dropped (rounding toward the past).
//
// Anything else (null, a boolean, an object, an array, another string) gives an error
// wrapping [ErrBadEventTime] that says what was found and what is expected.
func ParseEventTime(tok []byte) (int64, error) {
	s := strings.Trim(string(tok), " \t\r\n")
	if s == "" {
		return 0, badEventTime("found nothing")
	}
	switch c := s[0]; {
	case c == '"':
		var str string
		if err := json.Unmarshal([]byte(s), &str); err != nil {
			return 0, badEventTime(fmt.Sprintf("found %s, which is not a valid JSON string", clip(s)))
		}
		return parseTimestamp(str)
	case c == '-' || ('0' <= c && c <= '9'):
		return parseNumber(s)
	case s == "null":
		return 0, badEventTime("found null")
	case s == "true" || s == "false":
		return 0, badEventTime("found the boolean " + s)
	case c == '{':
		return 0, badEventTime("found an object")
	case c == '[':
		return 0, badEventTime("found an array")
	}
	return 0, badEventTime(fmt.Sprintf("found %s, which is not a JSON value", clip(s)))
}

// EventTimeFromValue is [ParseEventTime] for a value decoded by encoding/json: a float64
// or [json.Number] (epoch milliseconds, truncated toward zero), a Go integer, or a string
// (RFC 3339). Other values give an error wrapping [ErrBadEventTime].
func EventTimeFromValue(v any) (int64, error) {
	switch v := v.(type) {
	case json.Number:
		return parseNumber(string(v))
	case float64:
		return floatMs(v)
	case float32:
		return floatMs(float64(v))
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case int32:
		return int64(v), nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, badEventTime(fmt.Sprintf("found the number %d, which is out of range", v))
		}
		return int64(v), nil
	case string:
		return parseTimestamp(v)
	case nil:
		return 0, badEventTime("found null")
	case bool:
		return 0, badEventTime(fmt.Sprintf("found the boolean %t", v))
	case map[string]any:
		return 0, badEventTime("found an object")
	case []any:
		return 0, badEventTime("found an array")
	}
	return 0, badEventTime(fmt.Sprintf("found a value of type %T", v))
}

func badEventTime(found string) error {
	return fmt.Errorf("%w: %s; %s", ErrBadEventTime, found, eventTimeWant)
}

// clip shortens s for an error message.
func clip(s string) string {
	const n = 64
	if len(s) > n {
		s = s[:n] + "..."
	}
	return strconv.Quote(s)
}

func parseTimestamp(s string) (int64, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		var pe *time.ParseError
		if errors.As(err, &pe) && pe.Message != "" {
			// A range error such as ": month out of range" says what is wrong.
			return 0, badEventTime(fmt.Sprintf("found the string %s, which is not an RFC 3339 timestamp (%s)", clip(s), strings.TrimPrefix(pe.Message, ": ")))
		}
		return 0, badEventTime(fmt.Sprintf("found the string %s, which is not an RFC 3339 timestamp", clip(s)))
	}
	return t.UnixMilli(), nil
}

func floatMs(f float64) (int64, error) {
	// -2^63 is exactly representable; 2^63 is the first float64 above MaxInt64.
	if math.IsNaN(f) || math.IsInf(f, 0) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, badEventTime(fmt.Sprintf("found the number %v, which is out of the int64 range of epoch milliseconds", f))
	}
	return int64(f), nil // conversion truncates toward zero
}

// parseNumber parses a JSON number exactly, truncating toward zero, without going
// through float64 (which would lose precision above 2^53) and without big arithmetic
// (which a number like 1e999999999 would make expensive).
func parseNumber(s string) (int64, error) {
	notNumber := func() (int64, error) {
		return 0, badEventTime(fmt.Sprintf("found %s, which is not a JSON number", clip(s)))
	}
	outOfRange := func() (int64, error) {
		return 0, badEventTime(fmt.Sprintf("found the number %s, which is out of the int64 range of epoch milliseconds", clip(s)))
	}
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return notNumber()
	}
	intPart := s[start:i]
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fs {
			return notNumber()
		}
		frac = s[fs:i]
	}
	var exp int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		expNeg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && isDigit(s[i]) {
			if exp < 1<<40 { // saturate: any larger exponent is as good as infinite
				exp = exp*10 + int64(s[i]-'0')
			}
			i++
		}
		if i == es {
			return notNumber()
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(s) {
		return notNumber()
	}

	// The value is 0.DIGITS × 10^point, with DIGITS = intPart frac.
	digits := intPart + frac
	point := int64(len(intPart)) + exp
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
		point--
	}
	if len(digits) == 0 || point <= 0 {
		return 0, nil // zero, or |x| < 1 truncated toward zero
	}
	if point > 19 { // at least 10^19 > MaxInt64
		return outOfRange()
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	if point <= int64(len(digits)) {
		b.WriteString(digits[:point])
	} else {
		b.WriteString(digits)
		b.WriteString(strings.Repeat("0", int(point)-len(digits)))
	}
	v, err := strconv.ParseInt(b.String(), 10, 64)
	if err != nil {
		return outOfRange()
	}
	return v, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
