// Package rowjson finds fields in JSON rows without decoding them: the grouping key and the
// event time are located by scanning, so the hot path does not build maps or allocate per row.
package rowjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors of [Validate], [Lookup] and [AppendCanonicalKey].
var (
	// ErrInvalidJSON: the row is not a single valid JSON value.
	ErrInvalidJSON = errors.New("rowjson: invalid JSON")
	// ErrNotObject: the row is valid JSON but not an object.
	ErrNotObject = errors.New("rowjson: row is not a JSON object")
	// ErrMissing: the field is absent (or null).
	ErrMissing = errors.New("rowjson: field missing")
	// ErrNotScalar: the key field is not a string or a number.
	ErrNotScalar = errors.New("rowjson: key is not a string or number")
	// ErrNotUTF8: the row holds bytes that are not valid UTF-8.
	ErrNotUTF8 = errors.New("rowjson: row is not valid UTF-8")
)

// Path is a parsed field path: "a.b.c" selects field c of object b of object a.
type Path []string

// ParsePath splits a dotted field path. Empty segments are an error.
func ParsePath(s string) (Path, error) {
	if s == "" {
		return nil, errors.New("rowjson: empty field path")
	}
	p := Path(strings.Split(s, "."))
	for _, seg := range p {
		if seg == "" {
			return nil, errors.New("rowjson: field path " + strconv.Quote(s) + " has an empty segment")
		}
	}
	return p, nil
}

// String returns the dotted form of p.
func (p Path) String() string { return strings.Join(p, ".") }

// Validate reports whether row is one valid UTF-8 JSON object.
func Validate(row []byte) error {
	if !utf8.Valid(row) {
		return ErrNotUTF8
	}
	if !json.Valid(row) {
		return ErrInvalidJSON
	}
	i := skipSpace(row, 0)
	if i >= len(row) || row[i] != '{' {
		return ErrNotObject
	}
	return nil
}

// Lookup returns the raw JSON token of the field at p in row, which must already have passed
// [Validate]. Names match exactly (case-sensitively); a name that occurs twice in an object
// takes its last value; a field whose value is null counts as missing. The token aliases row.
func Lookup(row []byte, p Path) ([]byte, error) {
	v := row[skipSpace(row, 0):]
	for _, seg := range p {
		tok, ok := field(v, seg)
		if !ok {
			return nil, ErrMissing
		}
		v = tok
	}
	if len(v) == 4 && string(v) == "null" {
		return nil, ErrMissing
	}
	return v, nil
}

// AppendCanonicalKey appends the canonical form of a key token to dst: a JSON string is
// written with only the escapes JSON requires (`\"`, `\\` and control characters, as \n, \r,
// \t or \u00XX) and everything else as raw UTF-8, so every spelling of a string ("\u0061",
// "a") is one key; a JSON number is written as an integer when it is one (1.0, 1e3) and in
// shortest float form otherwise. Any other token is [ErrNotScalar].
func AppendCanonicalKey(dst, tok []byte) ([]byte, error) {
	if len(tok) == 0 {
		return dst, ErrMissing
	}
	switch c := tok[0]; {
	case c == '"':
		if bytes.IndexByte(tok, '\\') < 0 {
			return append(dst, tok...), nil
		}
		var s string
		if err := json.Unmarshal(tok, &s); err != nil {
			return dst, ErrInvalidJSON
		}
		return appendCanonicalString(dst, s), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return appendCanonicalNumber(dst, tok)
	}
	return dst, ErrNotScalar
}

// appendCanonicalString writes s as a JSON string with the minimal escapes. A string token
// without backslashes is already in this form, since JSON forbids raw quotes and control
// characters inside strings.
func appendCanonicalString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// appendCanonicalNumber writes the canonical form of a JSON number token, so that tokens of
// the same decimal value are one key whatever their spelling (42 = 42.0 = 4.2e1, and 1e22 =
// 10000000000000000000000), and tokens of different values are different keys however large
// (no rounding to float64). Integers are written as integers up to maxIntDigits digits;
// other numbers of at most 15 significant digits in Go's shortest float form (which they
// round-trip through), longer ones exactly.
func appendCanonicalNumber(dst, tok []byte) ([]byte, error) {
	if isIntLiteral(tok) { // the common case, already canonical (JSON has no leading zeros)
		if string(tok) == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, tok...), nil
	}
	neg, digits, exp, ok := parseDecimal(tok)
	if !ok {
		return dst, ErrNotScalar
	}
	if len(digits) == 0 {
		return append(dst, '0'), nil
	}
	if neg {
		dst = append(dst, '-')
	}
	n := len(digits) + exp // digits before the decimal point
	switch {
	case exp >= 0 && n <= maxIntDigits:
		dst = append(dst, digits...)
		for range exp {
			dst = append(dst, '0')
		}
		return dst, nil
	case exp < 0 && len(digits) <= 15:
		f, err := strconv.ParseFloat(string(tok), 64)
		if err != nil {
			return dst, ErrNotScalar
		}
		return strconv.AppendFloat(dst, math.Abs(f), 'g', -1, 64), nil
	case n > 0 && n <= maxIntDigits: // 123.456..., exactly
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		return append(dst, digits[n:]...), nil
	case n <= 0 && n > -6: // 0.000123..., exactly
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		return append(dst, digits...), nil
	}
	dst = append(dst, digits[0]) // d.ddde±x, exactly
	if len(digits) > 1 {
		dst = append(dst, '.')
		dst = append(dst, digits[1:]...)
	}
	dst = append(dst, 'e')
	return strconv.AppendInt(dst, int64(n-1), 10), nil
}

// maxIntDigits is the longest integer a canonical key writes out in full; larger ones are
// written in exponent form.
const maxIntDigits = 64

// maxExponent bounds the exponent of a number key: beyond it the key is not a scalar this
// runtime compares (its canonical form would be absurdly long, or overflow).
const maxExponent = 100_000

// parseDecimal splits a JSON number token into its sign, its significant digits (no leading
// or trailing zeros; empty for zero) and the power of ten they are multiplied by.
func parseDecimal(tok []byte) (neg bool, digits []byte, exp int, ok bool) {
	i := 0
	if i < len(tok) && tok[i] == '-' {
		neg, i = true, i+1
	}
	start := i
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		i++
	}
	if i == start {
		return false, nil, 0, false
	}
	digits = append(digits, tok[start:i]...)
	if i < len(tok) && tok[i] == '.' {
		i++
		fs := i
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
		}
		if i == fs {
			return false, nil, 0, false
		}
		digits = append(digits, tok[fs:i]...)
		exp = -(i - fs)
	}
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		eneg := false
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			eneg, i = tok[i] == '-', i+1
		}
		es, e := i, 0
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			if e = e*10 + int(tok[i]-'0'); e > maxExponent {
				return false, nil, 0, false
			}
			i++
		}
		if i == es {
			return false, nil, 0, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(tok) {
		return false, nil, 0, false
	}
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	for len(digits) > 0 && digits[len(digits)-1] == '0' {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	return neg, digits, exp, true
}

func isIntLiteral(tok []byte) bool {
	i := 0
	if tok[0] == '-' {
		i = 1
	}
	if i == len(tok) {
		return false
	}
	for ; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return false
		}
	}
	return true
}

// field returns the value token of field name in the object token v. Names match exactly;
// when the name occurs more than once the last occurrence wins, as with encoding/json and
// the SDKs.
func field(v []byte, name string) ([]byte, bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, false
	}
	var found []byte
	i := skipSpace(v, 1)
	for i < len(v) && v[i] == '"' {
		kEnd := skipString(v, i)
		k := v[i+1 : kEnd-1]
		i = skipSpace(v, kEnd)
		i = skipSpace(v, i+1) // ':'
		vEnd := skipValue(v, i)
		if keyEquals(k, name) {
			found = v[i:vEnd]
		}
		i = skipSpace(v, vEnd)
		if i < len(v) && v[i] == ',' {
			i = skipSpace(v, i+1)
		}
	}
	return found, found != nil
}

func keyEquals(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	var s string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	if json.Unmarshal(q, &s) != nil {
		return false
	}
	return s == name
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value starting at b[i]. b must be valid JSON.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default:
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
		}
		return i
	}
}
