package jsonobj

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestWordScans: the eight-bytes-at-a-time scans (the end of a string, the check of a plain name in Writer.name) agree with the byte-by-byte definitions for
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
				w := NewWriter(nil)
				w.name(string(b))
				if got := string(w.b) == `{"`+string(b)+`":`; got != wantPlain {
					t.Fatalf("name(%q) copied as it is: %v, want %v", b, got, wantPlain)
				}
			}
		}
	}
}

// TestWordScansFrom: plainStringEnd agrees with the byte-by-byte definition from every start,
// with two bytes set among values around the special ones (so a borrow out of one byte meets
// the other), including the last bytes of a buffer, which it reads as a shifted word.
func TestWordScansFrom(t *testing.T) {
	isSpecial := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 }
	values := []byte{0x00, 0x01, 0x1f, 0x20, 0x21, '"', '#', '\\', ']', 0x7f, 0x80, 0x9f, 0xff, 'a'}
	for n := 1; n <= 20; n++ {
		for p1 := range n {
			for p2 := p1; p2 < n; p2++ {
				for _, c1 := range values {
					for _, c2 := range values {
						b := []byte(strings.Repeat("a", n))
						b[p1], b[p2] = c1, c2
						for i := 0; i <= n; i++ {
							want := i
							for want < n && !isSpecial(b[want]) {
								want++
							}
							if got := plainStringEnd(b, i); got != want {
								t.Fatalf("plainStringEnd(%q, %d) = %d, want %d", b, i, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestIntDigits: Int around the length where a uint64 can overflow.
func TestIntDigits(t *testing.T) {
	for _, s := range []string{"9223372036854775807", "9223372036854775808", "-9223372036854775808",
		"-9223372036854775809", "18446744073709551615", "18446744073709551616", "99999999999999999999",
		"100000000000000000000", "-100000000000000000000", "1234567890123456789", "0", "-0"} {
		got, err := Int([]byte(s))
		want, werr := strconv.ParseInt(s, 10, 64)
		if (err == nil) != (werr == nil) || got != want && err == nil {
			t.Errorf("Int(%q) = %d, %v; strconv %d, %v", s, got, err, want, werr)
		}
	}
}

// TestAppendInt: appendInt writes what strconv does, around its small-number fast path and at
// the extremes.
func TestAppendInt(t *testing.T) {
	vals := []int64{-9223372036854775808, 9223372036854775807, -1000, 1000, 12345}
	for v := int64(-150); v <= 150; v++ {
		vals = append(vals, v)
	}
	for _, v := range vals {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendInt(%d) = %q, want %q", v, got, want)
		}
	}
}

// TestWriterNames: names of every length up to 20 are written the same whether the slice has
// room (copied as words) or not (appended), as first and as later members.
func TestWriterNames(t *testing.T) {
	for n := 0; n <= 20; n++ {
		name := "abcdefghijklmnopqrstuvwxyz"[:n]
		for _, room := range []int{0, 64} {
			w := NewWriter(make([]byte, 0, room))
			w.Int(name, 1)
			w.Bool(name, true)
			got, _ := w.End()
			if want := `{"` + name + `":1,"` + name + `":true}`; string(got) != want {
				t.Fatalf("names of %d bytes, room %d: %s, want %s", n, room, got, want)
			}
		}
	}
}
