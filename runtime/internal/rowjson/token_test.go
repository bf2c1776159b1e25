package rowjson_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/rowjson"
	"github.com/groupstate/groupstate/timeouts"
)

// TestPlainInt: the engine's fast path for integer event times reads exactly what
// timeouts.ParseEventTime reads, and leaves every other form to it.
func TestPlainInt(t *testing.T) {
	toks := []string{
		"0", "-0", "1", "-1", "42", "1700000000000", "-1700000000000",
		"999999999999999999", "-999999999999999999", // 18 digits: the longest taken
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", // left to the parser
		"00", "01", "-01", "1.5", "1e3", "1E3", "-", "", " 1", "1 ", "+1", "0x10", `"1"`, "1.0",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		toks = append(toks, strconv.FormatInt(r.Int64N(math.MaxInt64)-math.MaxInt64/2, 10))
	}
	for _, tok := range toks {
		got, ok := rowjson.PlainInt([]byte(tok))
		if !ok {
			continue
		}
		want, err := timeouts.ParseEventTime([]byte(tok))
		if err != nil || want != got {
			t.Errorf("PlainInt(%q) = %d; ParseEventTime = %d, %v", tok, got, want, err)
		}
	}
	for tok, wantOK := range map[string]bool{"1700000000000": true, "-5": true, "0": true, "1.5": false, "01": false, "1e3": false, "9223372036854775807": false, "": false, "-": false} {
		if _, ok := rowjson.PlainInt([]byte(tok)); ok != wantOK {
			t.Errorf("PlainInt(%q) ok = %v, want %v", tok, ok, wantOK)
		}
	}
}

// TestKind: what a refused key is called in its dead letter.
func TestKind(t *testing.T) {
	for tok, want := range map[string]string{
		`{"a":1}`: "an object", `[1]`: "an array", `true`: "a boolean", `false`: "a boolean", `1e999999`: "a number with an exponent out of range",
	} {
		if _, err := rowjson.AppendCanonicalKey(nil, []byte(tok)); err == nil {
			t.Errorf("AppendCanonicalKey(%s) took it", tok)
		}
		if got := rowjson.Kind([]byte(tok)); got != want {
			t.Errorf("Kind(%s) = %q, want %q", tok, got, want)
		}
	}
}
