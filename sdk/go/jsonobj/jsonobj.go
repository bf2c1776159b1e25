// Package jsonobj reads and writes JSON objects without reflection, for handlers whose rows,
// state and outputs are small objects of known fields. It exists because encoding/json's
// reflection dominates the cost of a Go handler, and costs several times more under
// WebAssembly than natively; a type that decodes itself with [Each] and encodes itself with a
// [Writer] (see the Go SDK's JSONAppender) skips it entirely and allocates nothing per row.
//
// Reading is lenient where it is safe and strict where it matters: [Each] checks the syntax of
// everything it walks over (names, strings, numbers, literals and the nesting of objects and
// arrays), so a malformed document is an error rather than a wrong value, but it does not
// check that strings are valid UTF-8 (the groupstate host has checked every input row before
// a handler sees it).
//
// Writing produces compact JSON: names and strings are escaped as JSON requires (quote,
// backslash and control characters; invalid UTF-8 becomes U+FFFD), numbers are written the
// way strconv formats them.
package jsonobj

import (
	"errors"
	"math/bits"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrSyntax is wrapped by every error about malformed JSON.
var ErrSyntax = errors.New("jsonobj: invalid JSON")

// ErrType is wrapped by the errors of [Int], [Float], [Bool] and [String] when a value is
// well-formed JSON of another type (or an integer out of range).
var ErrType = errors.New("jsonobj: wrong type")

// syntaxError describes malformed JSON at an offset.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string {
	return "jsonobj: invalid JSON at offset " + strconv.Itoa(e.off) + ": " + e.msg
}

func (e *syntaxError) Unwrap() error { return ErrSyntax }

// Each calls f once per member of the JSON object obj, in document order, with the member's
// name (unescaped) and its value as raw JSON (one complete token or nested document, without
// surrounding whitespace). Both alias obj unless the name has escapes; neither may be kept
// past f's return without copying. Each returns f's first error, or an error wrapping
// [ErrSyntax] when obj is not one JSON object (whitespace around it is allowed). Duplicate
// names are passed as they come.
func Each(obj []byte, f func(name, value []byte) error) error {
	s := scanner{b: obj}
	s.ws()
	if !s.eat('{') {
		return s.fail("want an object")
	}
	s.ws()
	if s.eat('}') {
		return s.end()
	}
	var nameBuf []byte
	b := s.b
	for {
		s.ws()
		if s.i >= len(b) || b[s.i] != '"' {
			return s.fail("want a member name")
		}
		// The common cases are scanned here rather than through scanner methods: a member
		// name without escapes, and a value that is a string without escapes or a number.
		// Function calls are what a WebAssembly build of Go pays most for.
		start := s.i
		// plainStringEnd's word loop written out (too large to inline): a call less per name
		// when the quote is in the words before the buffer's last eight bytes.
		j := start + 1
		for {
			if len(b)-j < 8 {
				j = plainStringEnd(b, j)
				break
			}
			if m := specialMask(word(b, j)); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		var name []byte
		if j < len(b) && b[j] == '"' {
			name, s.i = b[start+1:j], j+1
		} else {
			if _, err := s.str(); err != nil {
				return err
			}
			var err error
			if nameBuf, err = appendUnquoted(nameBuf[:0], b[start:s.i]); err != nil {
				return err
			}
			name = nameBuf
		}
		s.ws()
		if !s.eat(':') {
			return s.fail("want ':' after a member name")
		}
		s.ws()
		vstart := s.i
		switch {
		case s.i < len(b) && b[s.i] == '"':
			j := s.i + 1 // as for the name
			for {
				if len(b)-j < 8 {
					j = plainStringEnd(b, j)
					break
				}
				if m := specialMask(word(b, j)); m != 0 {
					j += bits.TrailingZeros64(m) >> 3
					break
				}
				j += 8
			}
			if j < len(b) && b[j] == '"' {
				s.i = j + 1
			} else if _, err := s.str(); err != nil {
				return err
			}
		case s.i < len(b) && (b[s.i] == '-' || (b[s.i] >= '0' && b[s.i] <= '9')):
			// A plain integer (no leading zero, no fraction, no exponent) is scanned here;
			// anything else by number, which checks the whole grammar.
			j := s.i
			if b[j] == '-' {
				j++
			}
			k := j
			for k < len(b) && b[k] >= '0' && b[k] <= '9' {
				k++
			}
			if k > j && (k-j == 1 || b[j] != '0') && (k == len(b) || (b[k] != '.' && b[k] != 'e' && b[k] != 'E')) {
				s.i = k
			} else if err := s.number(); err != nil {
				return err
			}
		default:
			if err := s.value(0); err != nil {
				return err
			}
		}
		if err := f(name, b[vstart:s.i]); err != nil {
			return err
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			return s.end()
		}
		return s.fail("want ',' or '}' after a member")
	}
}

// plainStringEnd returns the index of the first quote, backslash or control character at or
// after i in b (len(b) if none): where a string's plain run ends.
//
// No byte loop: a word with a special byte gives its position at once (specialMask), and the
// last fewer than eight bytes are read as the buffer's last word shifted down, whose zero
// bytes shifted in count as special and so stop the scan at len(b).
func plainStringEnd(b []byte, i int) int {
	for len(b)-i >= 8 {
		if m := specialMask(word(b, i)); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	n := len(b)
	if i >= n {
		return n
	}
	if n >= 8 {
		// n-8 < i < n: the top (i-(n-8))*8 bits of the shifted word are zero bytes.
		return i + bits.TrailingZeros64(specialMask(word(b, n-8)>>(uint(i-(n-8))*8)))>>3
	}
	for i < n && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	return i
}

// maxDepth bounds the nesting [Each] walks through, so hostile input cannot exhaust the stack.
const maxDepth = 1000

// scanner walks a JSON document.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(msg string) error { return &syntaxError{msg: msg, off: s.i} }

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end checks that only whitespace follows the object.
func (s *scanner) end() error {
	s.ws()
	if s.i != len(s.b) {
		return s.fail("data after the object")
	}
	return nil
}

// value skips one JSON value.
func (s *scanner) value(depth int) error {
	if s.i >= len(s.b) {
		return s.fail("want a value")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, err := s.str()
		return err
	case c == '{' || c == '[':
		return s.nested(depth)
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.fail("want a value")
}

// nested skips an object or array.
func (s *scanner) nested(depth int) error {
	if depth >= maxDepth {
		return s.fail("nested too deep")
	}
	open := s.b[s.i]
	close := byte('}')
	if open == '[' {
		close = ']'
	}
	s.i++
	s.ws()
	if s.eat(close) {
		return nil
	}
	for {
		s.ws()
		if open == '{' {
			if s.i >= len(s.b) || s.b[s.i] != '"' {
				return s.fail("want a member name")
			}
			if _, err := s.str(); err != nil {
				return err
			}
			s.ws()
			if !s.eat(':') {
				return s.fail("want ':' after a member name")
			}
			s.ws()
		}
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat(close) {
			return nil
		}
		return s.fail("want ',' or '" + string(close) + "'")
	}
}

// str skips a string starting at its opening quote and reports whether it has escapes.
func (s *scanner) str() (escaped bool, err error) {
	s.i++ // opening quote
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return escaped, nil
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return false, s.fail("unterminated string")
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false, s.fail("short \\u escape")
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if hexVal(h) < 0 {
						return false, s.fail("bad \\u escape")
					}
				}
				s.i += 6
			default:
				return false, s.fail("bad escape")
			}
		case c < 0x20:
			return false, s.fail("control character in a string")
		default:
			s.i++
		}
	}
	return false, s.fail("unterminated string")
}

// number skips a number, checking JSON's grammar.
func (s *scanner) number() error {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return s.fail("bad number")
	}
	if s.eat('.') {
		if s.digits() == 0 {
			return s.fail("bad number")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if !s.eat('+') {
			s.eat('-')
		}
		if s.digits() == 0 {
			return s.fail("bad number")
		}
	}
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) literal(lit string) error {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return s.fail("bad literal")
	}
	s.i += len(lit)
	return nil
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// appendUnquoted appends the unescaped content of the JSON string literal q to dst.
func appendUnquoted(dst, q []byte) ([]byte, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return dst, &syntaxError{msg: "want a string", off: 0}
	}
	q = q[1 : len(q)-1]
	for i := 0; i < len(q); {
		c := q[i]
		if c != '\\' {
			if c < 0x20 {
				return dst, &syntaxError{msg: "control character in a string", off: i + 1}
			}
			dst = append(dst, c)
			i++
			continue
		}
		if i+1 >= len(q) {
			return dst, &syntaxError{msg: "bad escape", off: i + 1}
		}
		switch e := q[i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(q[i+2:])
			if !ok {
				return dst, &syntaxError{msg: "bad \\u escape", off: i + 1}
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// A high surrogate followed by a low one is one character; anything else is
				// U+FFFD, as encoding/json does.
				if r2, ok := lowSurrogate(q[i:]); ok {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						dst = utf8.AppendRune(dst, dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, &syntaxError{msg: "bad escape", off: i + 1}
		}
		i += 2
	}
	return dst, nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		v := hexVal(c)
		if v < 0 {
			return 0, false
		}
		r = r<<4 | v
	}
	return r, true
}

func lowSurrogate(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	r, ok := hex4(b[2:])
	return r, ok && r >= 0xdc00 && r < 0xe000
}
