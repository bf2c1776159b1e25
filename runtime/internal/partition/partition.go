// Package partition maps keys to partitions (key groups): a key's partition is FNV-1a 32 of
// its canonical text mod the number of partitions. The canonical text of a string key is the
// string itself, without quotes and with its escapes decoded; that of a number key is its
// canonical form as [rowjson.AppendCanonicalKey] writes it (42, -7, 1.5, 1e100).
//
// This is the function of the NATS server's subject transform {{partition(n, i)}} (FNV-1a 32
// of the subject token, mod n), so a key that is also a subject token lands in the same
// partition whether the server partitions it (a stream's SubjectTransform) or the runtime
// does. With several wildcard indexes the server hashes the tokens concatenated with no
// separator, and with none, partition(n), the whole subject: [OfText] of that text gives the
// same partition.
//
// Not every key can be a subject token: a token cannot contain '.', whitespace or control
// characters, cannot be empty, and "*" and ">" are wildcards. Number keys with a fraction
// (1.5) contain '.'. Such keys still have a partition here, the same as for any other key;
// they just cannot be partitioned by the server. Conversely a token such as 042 or 4.2e1
// is not the canonical text of the number key 42, so a key field must be compared with its
// token by canonical text ([AppendText]), not as spelled.
//
// Every function here is safe for concurrent use and allocates nothing, except
// [AppendText] when dst must grow.
//
// [rowjson.AppendCanonicalKey]: github.com/groupstate/groupstate/runtime/internal/rowjson.AppendCanonicalKey
package partition

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// Max is the largest number of partitions a deployment may have; the smallest is 1.
const Max = 1024

// ErrCount is returned by [CheckCount] for a number of partitions outside 1..[Max].
var ErrCount = errors.New("partition: the number of partitions must be from 1 to 1024")

// CheckCount returns nil when n is a valid number of partitions (1..[Max]), [ErrCount]
// otherwise.
func CheckCount(n int) error {
	if n < 1 || n > Max {
		return fmt.Errorf("%w, not %d", ErrCount, n)
	}
	return nil
}

// FNV-1a 32 parameters (hash/fnv's New32a, which the server uses).
const (
	offset32 = 2166136261
	prime32  = 16777619
)

// OfText returns the partition, in [0, n), of the canonical text text: FNV-1a 32 of its
// bytes mod n, exactly what the server's {{partition(n, i)}} yields for the subject token
// text. n must be from 1 to
// math.MaxInt32, the server's own bound (a deployment has 1 to [Max], see [CheckCount]);
// OfText panics otherwise.
func OfText(text []byte, n int) int {
	return mod(hashBytes(offset32, text), n)
}

// Of returns the partition, in [0, n), of the canonical JSON key key, as
// [rowjson.AppendCanonicalKey] writes it: a JSON string (quoted, escaped) or a number. It is
// [OfText] of the key's canonical text, decoded on the fly: a string's escapes, any that JSON
// has, are hashed as the UTF-8 they stand for (a lone surrogate as U+FFFD, as encoding/json
// decodes it), so every spelling of one string has one partition. Other bytes are hashed
// as they are (keys are valid UTF-8: rowjson refuses rows that are not), and anything not
// starting with '"' is hashed as it is. n is bounded as for [OfText]; Of panics outside the bounds.
//
// [rowjson.AppendCanonicalKey]: github.com/groupstate/groupstate/runtime/internal/rowjson.AppendCanonicalKey
func Of(key []byte, n int) int {
	body, ok := stringBody(key)
	if !ok {
		return OfText(key, n)
	}
	h := uint32(offset32)
	for {
		i := bytes.IndexByte(body, '\\')
		if i < 0 {
			return mod(hashBytes(h, body), n)
		}
		h = hashBytes(h, body[:i])
		var buf [utf8.UTFMax]byte
		r, w := unescape(body[i:])
		h = hashBytes(h, utf8.AppendRune(buf[:0], r))
		body = body[i+w:]
	}
}

// AppendText appends the canonical text of the canonical JSON key key to dst (the bytes
// [Of] hashes) and returns the extended slice: a string's value without quotes, a number as
// it is. This is what a subject token holding the key must equal.
func AppendText(dst, key []byte) []byte {
	body, ok := stringBody(key)
	if !ok {
		return append(dst, key...)
	}
	for {
		i := bytes.IndexByte(body, '\\')
		if i < 0 {
			return append(dst, body...)
		}
		dst = append(dst, body[:i]...)
		r, w := unescape(body[i:])
		dst = utf8.AppendRune(dst, r)
		body = body[i+w:]
	}
}

// stringBody returns what is between the quotes of a JSON string token.
func stringBody(key []byte) ([]byte, bool) {
	if len(key) < 2 || key[0] != '"' || key[len(key)-1] != '"' {
		return nil, false
	}
	return key[1 : len(key)-1], true
}

// unescape decodes the escape at the start of s (s[0] == '\\') and returns the rune it
// stands for and its width in s. A malformed escape decodes as U+FFFD of width 1, so that
// decoding always moves on.
func unescape(s []byte) (rune, int) {
	if len(s) < 2 {
		return utf8.RuneError, 1
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(s[2:])
		if !ok {
			return utf8.RuneError, 1
		}
		if utf16.IsSurrogate(r) {
			if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
				if lo, ok := hex4(s[8:]); ok {
					if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
						return d, 12
					}
				}
			}
			return utf8.RuneError, 6
		}
		return r, 6
	}
	return utf8.RuneError, 1
}

// hex4 parses the four hex digits at the start of s.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func hashBytes(h uint32, b []byte) uint32 {
	for _, c := range b {
		h ^= uint32(c)
		h *= prime32
	}
	return h
}

func mod(h uint32, n int) int {
	if n < 1 || n > math.MaxInt32 {
		panic(fmt.Sprintf("partition: %d partitions", n))
	}
	return int(h % uint32(n))
}
