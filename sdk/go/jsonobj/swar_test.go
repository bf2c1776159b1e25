package jsonobj

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestWordScans: the eight-bytes-at-a-time scans agree with the byte-by-byte definitions for
// every byte value at every position of strings of 1 to 24 bytes.
func TestWordScans(t *testing.T) {
	isSpecial := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	for n := 1; n <= 24; n++ {
		for pos := range n {
			for c := range 256 {
				b := []byte(strings.Repeat("a", n))
				b[pos] = byte(c)
				wantEnd := n
				if isSpecial(byte(c)) {
					wantEnd = pos
				}
				if got := plainStringEnd(b, 0); got != wantEnd {
					t.Fatalf("plainStringEnd(%q) = %d, want %d", b, got, wantEnd)
				}
				wantPlain := !isSpecial(byte(c)) && c < utf8.RuneSelf
				if got := plainName(string(b)); got != wantPlain {
					t.Fatalf("plainName(%q) = %v, want %v", b, got, wantPlain)
				}
			}
		}
	}
}
