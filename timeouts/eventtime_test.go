package timeouts_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/timeouts"
)

func TestParseEventTime(t *testing.T) {
	for _, tc := range []struct {
		tok  string
		want int64
	}{
		// Numbers: epoch milliseconds.
		{`1700000000000`, 1700000000000},
		{`0`, 0},
		{`-0`, 0},
		{`-1500`, -1500},
		{` 42 `, 42},
		{"\n\t42\r\n", 42},
		{`9223372036854775807`, math.MaxInt64},
		{`-9223372036854775808`, math.MinInt64},
		// Fractions and exponents truncate toward zero, exactly.
		{`1700000000000.999`, 1700000000000},
		{`1.9`, 1},
		{`-1.9`, -1},
		{`0.5`, 0},
		{`-0.5`, 0},
		{`1.7e12`, 1700000000000},
		{`1.7E+12`, 1700000000000},
		{`17000000000000e-1`, 1700000000000},
		{`123456789e-3`, 123456},
		{`-123456789e-3`, -123456},
		{`1e-400`, 0},
		{`0e400`, 0},
		{`0.000e999999999999999999999999`, 0},
		{`9223372036854775807.999`, math.MaxInt64},
		{`-9223372036854775808.999`, math.MinInt64},
		{`9.223372036854775807e18`, math.MaxInt64},
		{`0.0`, 0},
		// Strings: RFC 3339.
		{`"1970-01-01T00:00:00Z"`, 0},
		{`"2024-01-02T03:04:05Z"`, 1704164645000},
		{`"2024-01-02T03:04:05.123Z"`, 1704164645123},
		{`"2024-01-02T03:04:05.123999999Z"`, 1704164645123},
		{`"2024-01-02T04:04:05+01:00"`, 1704164645000},
		{`"2024-01-02T03:04:05.5-00:30"`, 1704166445500},
		{`"1969-12-31T23:59:59.9995Z"`, -1},            // truncates toward the past
		{`"2024-01-02T03:04:05\u005a"`, 1704164645000}, // \u005a is Z
		{`"2024\u002d01-02T03:04:05Z"`, 1704164645000},
		{`"2024-01-02T03:04:05\u002B00:00"`, 1704164645000},
		{` "2024-01-02T03:04:05Z" `, 1704164645000},
	} {
		got, err := timeouts.ParseEventTime([]byte(tc.tok))
		if err != nil || got != tc.want {
			t.Errorf("ParseEventTime(%s) = %d, %v; want %d", tc.tok, got, err, tc.want)
		}
	}
}

func TestParseEventTimeErrors(t *testing.T) {
	for _, tc := range []struct {
		tok      string
		mentions string // part of the message saying what was found
	}{
		{`true`, "boolean true"},
		{`false`, "boolean false"},
		{`null`, "null"},
		{`"yesterday"`, `"yesterday"`},
		{`""`, `""`},
		{`"1700000000000"`, `"1700000000000"`},
		{`"2024-01-02"`, `"2024-01-02"`},
		{`"2024-13-02T03:04:05Z"`, "month out of range"},
		{`"2024-01-02 03:04:05Z"`, "not an RFC 3339"},
		{`1e400`, "out of the int64 range"},
		{`-1e400`, "out of the int64 range"},
		{`1e999999999999999999999999999`, "out of the int64 range"},
		{`9223372036854775808`, "out of the int64 range"},
		{`-9223372036854775809`, "out of the int64 range"},
		{`12345678901234567890123`, "out of the int64 range"},
		{`NaN`, "not a JSON value"},
		{`Infinity`, "not a JSON value"},
		{`-Infinity`, "not a JSON number"},
		{`+1`, "not a JSON value"},
		{`01`, "not a JSON number"},
		{`1.`, "not a JSON number"},
		{`.5`, "not a JSON value"},
		{`1e`, "not a JSON number"},
		{`1e+`, "not a JSON number"},
		{`-`, "not a JSON number"},
		{`0x10`, "not a JSON number"},
		{`1 2`, "not a JSON number"},
		{`{"ms": 1}`, "object"},
		{`[1]`, "array"},
		{``, "nothing"},
		{`   `, "nothing"},
		{`"unterminated`, "not a valid JSON string"},
		{`"bad \x escape"`, "not a valid JSON string"},
		{`"a" "b"`, "not a valid JSON string"},
		{`nul`, "not a JSON value"},
	} {
		got, err := timeouts.ParseEventTime([]byte(tc.tok))
		if !errors.Is(err, timeouts.ErrBadEventTime) {
			t.Errorf("ParseEventTime(%s) = %d, %v; want ErrBadEventTime", tc.tok, got, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.mentions) || !strings.Contains(msg, "want epoch milliseconds") {
			t.Errorf("ParseEventTime(%s) error %q does not say %q and what is wanted", tc.tok, msg, tc.mentions)
		}
	}
}

func TestParseEventTimeLongInputIsClipped(t *testing.T) {
	_, err := timeouts.ParseEventTime([]byte(`"` + strings.Repeat("x", 10000) + `"`))
	if !errors.Is(err, timeouts.ErrBadEventTime) || len(err.Error()) > 400 {
		t.Fatalf("error = %.500v", err)
	}
}

func TestEventTimeFromValue(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int64
	}{
		{float64(1700000000000), 1700000000000},
		{1.9, 1},
		{-1.9, -1},
		{float32(2.5), 2},
		{json.Number("1700000000000.5"), 1700000000000},
		{json.Number("9223372036854775807"), math.MaxInt64},
		{int(5), 5},
		{int32(-5), -5},
		{int64(math.MinInt64), math.MinInt64},
		{uint64(7), 7},
		{"2024-01-02T03:04:05Z", 1704164645000},
		{float64(math.MinInt64), math.MinInt64},
	} {
		got, err := timeouts.EventTimeFromValue(tc.v)
		if err != nil || got != tc.want {
			t.Errorf("EventTimeFromValue(%T %v) = %d, %v; want %d", tc.v, tc.v, got, err, tc.want)
		}
	}
	for _, v := range []any{
		nil, true, "yesterday", math.NaN(), math.Inf(1), math.Inf(-1),
		float64(math.MaxInt64), 1e19, -1e19, json.Number("1e400"), json.Number("abc"),
		uint64(math.MaxUint64), map[string]any{}, []any{1}, struct{}{},
	} {
		if got, err := timeouts.EventTimeFromValue(v); !errors.Is(err, timeouts.ErrBadEventTime) {
			t.Errorf("EventTimeFromValue(%T %v) = %d, %v; want ErrBadEventTime", v, v, got, err)
		}
	}
}

// TestParseEventTimeMatchesJSON checks the exact number parser against encoding/json
// decoding into int64 wherever the latter succeeds.
func TestParseEventTimeMatchesJSON(t *testing.T) {
	for _, tok := range []string{"0", "1", "-1", "123456789012", "9223372036854775807", "-9223372036854775808", "1000000"} {
		var want int64
		if err := json.Unmarshal([]byte(tok), &want); err != nil {
			t.Fatal(err)
		}
		got, err := timeouts.ParseEventTime([]byte(tok))
		if err != nil || got != want {
			t.Errorf("ParseEventTime(%s) = %d, %v; encoding/json gives %d", tok, got, err, want)
		}
	}
}

func FuzzParseEventTime(f *testing.F) {
	for _, s := range []string{
		`1700000000000`, `-1.9`, `1e400`, `1e-400`, `9223372036854775807.9`, `"2024-01-02T03:04:05Z"`,
		`"2024-01-02T03:04:05\u005a"`, `"yesterday"`, `true`, `null`, `{}`, `[`, ``, `"`, `-`, `0e99999999999999999999`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, tok []byte) {
		ms, err := timeouts.ParseEventTime(tok)
		if err != nil {
			if !errors.Is(err, timeouts.ErrBadEventTime) {
				t.Fatalf("ParseEventTime(%q) error %v does not wrap ErrBadEventTime", tok, err)
			}
			return
		}
		// A plain JSON integer that encoding/json decodes must agree.
		var want int64
		if json.Unmarshal(tok, &want) == nil && want != ms {
			t.Fatalf("ParseEventTime(%q) = %d, encoding/json gives %d", tok, ms, want)
		}
	})
}
