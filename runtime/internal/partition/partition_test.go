package partition_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/groupstate/groupstate/runtime/internal/partition"
	"github.com/groupstate/groupstate/runtime/internal/rowjson"
)

// fnvMod is the reference: hash/fnv's FNV-1a 32, as the server computes it.
func fnvMod(text string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(text))
	return int(h.Sum32() % uint32(n))
}

// canonical returns the canonical key of the JSON token tok, or fails the test.
func canonical(t testing.TB, tok string) []byte {
	t.Helper()
	k, err := rowjson.AppendCanonicalKey(nil, []byte(tok))
	if err != nil {
		t.Fatalf("canonical key of %s: %v", tok, err)
	}
	return k
}

func TestOf(t *testing.T) {
	tests := []struct {
		tok  string // the key as it appears in a row
		text string // its canonical text
		p16  int    // its partition of 16, as the server computes it
	}{
		{`"a"`, "a", 12},
		{`"\u0061"`, "a", 12},
		{`""`, "", 5},
		{`"user-1"`, "user-1", 4},
		{`"a\"b"`, `a"b`, 8},
		{`"a\\b"`, `a\b`, 6},
		{`"tab\there"`, "tab\there", 9},
		{`"\ud83d\ude00"`, "😀", 8},
		{`"ключ"`, "ключ", 1},
		{`42`, "42", 3},
		{`42.0`, "42", 3},
		{`4.2e1`, "42", 3},
		{`"42"`, "42", 3}, // another key than 42, with the same text, so the same partition
		{`-0`, "0", 15},
		{`1.5`, "1.5", 9},
		{`1e100`, "1e100", 14},
	}
	tr, err := server.NewSubjectTransform("events.*", "events.{{partition(16,1)}}")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.tok, func(t *testing.T) {
			key := canonical(t, tc.tok)
			if got := string(partition.AppendText(nil, key)); got != tc.text {
				t.Fatalf("AppendText(%s) = %q, want %q", key, got, tc.text)
			}
			if got := partition.Of(key, 16); got != tc.p16 {
				t.Fatalf("Of(%s, 16) = %d, want %d", key, got, tc.p16)
			}
			if got := partition.OfText([]byte(tc.text), 16); got != tc.p16 {
				t.Fatalf("OfText(%q, 16) = %d, want %d", tc.text, got, tc.p16)
			}
			if got := fnvMod(tc.text, 16); got != tc.p16 {
				t.Fatalf("hash/fnv: %d, want %d", got, tc.p16)
			}
			if token(tc.text) {
				got := tr.TransformSubject("events." + tc.text)
				if want := "events." + strconv.Itoa(tc.p16); got != want {
					t.Fatalf("the server's transform gives %s, want %s", got, want)
				}
			}
		})
	}
}

// TestOfOnePartition: with n = 1 every key is in partition 0.
func TestOfOnePartition(t *testing.T) {
	for _, k := range []string{`"a"`, `"\u00e9"`, `0`, `-12.5`} {
		if p := partition.Of([]byte(k), 1); p != 0 {
			t.Fatalf("Of(%s, 1) = %d", k, p)
		}
	}
}

// TestOfTextSeveralTokens: partition(n, i, j) hashes the tokens concatenated without a
// separator, so OfText of the concatenation is its partition.
func TestOfTextSeveralTokens(t *testing.T) {
	tr, err := server.NewSubjectTransform("a.*.*", "a.{{partition(7,1,2)}}")
	if err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{"x", "y"}, {"user", "42"}, {"xy", ""}, {"é", "ü"}} {
		if pair[1] == "" {
			continue
		}
		got := tr.TransformSubject("a." + pair[0] + "." + pair[1])
		want := fmt.Sprintf("a.%d", partition.OfText([]byte(pair[0]+pair[1]), 7))
		if got != want {
			t.Fatalf("%v: server %s, OfText %s", pair, got, want)
		}
	}
}

func TestCheckCount(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, false}, {1, true}, {16, true}, {1024, true}, {1025, false}, {-3, false}} {
		err := partition.CheckCount(tc.n)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, partition.ErrCount)) {
			t.Fatalf("CheckCount(%d) = %v", tc.n, err)
		}
	}
}

func TestOfPanicsOnZero(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Of(key, 0) did not panic")
		}
	}()
	partition.Of([]byte(`"a"`), 0)
}

func TestOfAllocatesNothing(t *testing.T) {
	for _, k := range []string{`"user-12345"`, `"a\"b\\c\u0001\ud83d\ude00"`, `123456789`} {
		key := []byte(k)
		if a := testing.AllocsPerRun(100, func() { partition.Of(key, 16) }); a != 0 {
			t.Fatalf("Of(%s) allocates %v times", k, a)
		}
	}
}

// token reports whether text can be a subject token that a stream's partition() sees as
// one token.
func token(text string) bool {
	if text == "" || text == "*" || text == ">" || !json.Valid([]byte(strconv.Quote(text))) {
		return false
	}
	for _, r := range text {
		if r == '.' || unicode.IsSpace(r) || unicode.IsControl(r) || r == 0xFFFD {
			return false
		}
	}
	return true
}

// FuzzOf checks Of against decoding with encoding/json and hashing with hash/fnv, and,
// where the key's text is a subject token, against the server's own transform.
func FuzzOf(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u0061"`, `"a\"b"`, `"\ud83d\ude00"`, `"\ud800"`, `"x\\y\/z"`, `42`, `4.2e1`, `-0.5`, `1e100`, `"ключ"`} {
		f.Add(s, uint16(16))
	}
	tr, err := server.NewSubjectTransform("events.*", "events.{{partition(1024,1)}}")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string, n16 uint16) {
		n := int(n16)%partition.Max + 1
		key, err := rowjson.AppendCanonicalKey(nil, []byte(tok))
		if err != nil || !json.Valid([]byte(tok)) || strings.TrimSpace(tok) != tok || !utf8.ValidString(tok) {
			return // not a token as rowjson.Lookup returns them
		}
		text := string(key)
		if key[0] == '"' {
			if err := json.Unmarshal(key, &text); err != nil {
				t.Fatalf("canonical key %s does not decode: %v", key, err)
			}
			// Every spelling of a string has the partition of its canonical form.
			if a, b := partition.Of([]byte(tok), n), partition.Of(key, n); a != b {
				t.Fatalf("Of(%s) = %d but Of(%s) = %d", tok, a, key, b)
			}
		}
		if got := string(partition.AppendText(nil, key)); got != text {
			t.Fatalf("AppendText(%s) = %q, want %q", key, got, text)
		}
		want := fnvMod(text, n)
		if got := partition.Of(key, n); got != want {
			t.Fatalf("Of(%s, %d) = %d, want %d", key, n, got, want)
		}
		if token(text) {
			got := tr.TransformSubject("events." + text)
			if want := "events." + strconv.Itoa(partition.Of(key, 1024)); got != want {
				t.Fatalf("server transform of %q: %s, want %s", text, got, want)
			}
		}
	})
}

func BenchmarkOf(b *testing.B) {
	for _, k := range []string{`"user-12345"`, `"` + strings.Repeat("x", 64) + `"`, `"a\"b\\c"`, `1234567890`} {
		key := []byte(k)
		b.Run(k[:min(len(k), 12)], func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(key)))
			for b.Loop() {
				partition.Of(key, 16)
			}
		})
	}
}
