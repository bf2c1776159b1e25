package jsonobj

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// ErrUnsupportedValue is returned by [Writer.End] when a float member was NaN or infinite,
// which JSON cannot represent.
var ErrUnsupportedValue = errors.New("jsonobj: NaN and infinities are not JSON numbers")

// Writer writes one JSON object, member by member, appending to a byte slice. The zero Writer
// is not ready: start one with [NewWriter]. A Writer is a small value meant to live on the
// stack of the function encoding an object; it allocates only when the slice must grow.
//
//	w := jsonobj.NewWriter(dst)
//	w.Int("start", s.Start)
//	w.Raw("user_id", key.JSON())
//	return w.End()
type Writer struct {
	b       []byte
	members int
	err     error
}

// NewWriter starts an object appended to dst (which may be nil).
func NewWriter(dst []byte) Writer { return Writer{b: append(dst, '{')} }

// A plain name (printable ASCII without quote or backslash: every name a Go program writes as
// a literal, in practice) is copied as it is; the check is written out here rather than
// called, as under WebAssembly a call costs more than a short name's check.
func (w *Writer) name(name string) {
	b := w.b
	if w.members > 0 {
		b = append(b, ',')
	}
	w.members++
	plain := true
	n := len(name)
	if n >= 8 {
		// Whole words, the last one ending at the end of the name (overlapping the one before
		// it unless n is a multiple of 8): no byte loop.
		for i := 0; ; i += 8 {
			if i > n-8 {
				i = n - 8
			}
			if x := word(name, i); specialMask(x)|x&highs != 0 {
				plain = false
				break
			}
			if i == n-8 {
				break
			}
		}
	} else {
		for i := 0; i < n; i++ {
			if c := name[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
				plain = false
				break
			}
		}
	}
	if plain {
		// A name of 4 to 16 bytes (most) is copied as two overlapping words, stores in place
		// rather than a call of memmove, when the slice has room.
		if l := len(b); n >= 4 && n <= 16 && cap(b)-l >= n+3 {
			b = b[:l+n+3]
			b[l] = '"'
			if n >= 8 {
				binary.LittleEndian.PutUint64(b[l+1:], word(name, 0))
				binary.LittleEndian.PutUint64(b[l+1+n-8:], word(name, n-8))
			} else {
				binary.LittleEndian.PutUint32(b[l+1:], word4(name, 0))
				binary.LittleEndian.PutUint32(b[l+1+n-4:], word4(name, n-4))
			}
			b[l+1+n], b[l+2+n] = '"', ':'
			w.b = b
			return
		}
		b = append(b, '"')
		b = append(b, name...)
		w.b = append(b, '"', ':')
		return
	}
	b = appendQuoted(b, name)
	w.b = append(b, ':')
}

// Raw writes a member whose value is already JSON (for example a nested object from another
// Writer, or a key's JSON). The value is copied as it is, unchecked.
func (w *Writer) Raw(name string, json []byte) {
	w.name(name)
	w.b = append(w.b, json...)
}

// Int writes an integer member.
func (w *Writer) Int(name string, v int64) {
	w.name(name)
	if uint64(v) < 100 { // appendInt's fast path, here: one call less for small counts
		if v < 10 {
			w.b = append(w.b, byte('0'+v))
		} else {
			w.b = append(w.b, byte('0'+v/10), byte('0'+v%10))
		}
		return
	}
	w.b = appendInt(w.b, v)
}

// appendInt is strconv.AppendInt(dst, v, 10) in one function (calls are costly under
// WebAssembly).
func appendInt(dst []byte, v int64) []byte {
	if uint64(v) < 100 { // small counts, the common case: no loop, no copy
		if v < 10 {
			return append(dst, byte('0'+v))
		}
		return append(dst, byte('0'+v/10), byte('0'+v%10))
	}
	var buf [20]byte
	i := len(buf)
	u := uint64(v)
	if v < 0 {
		u = -u
	}
	for u >= 10 {
		i--
		buf[i] = byte('0' + u%10)
		u /= 10
	}
	i--
	buf[i] = byte('0' + u)
	if v < 0 {
		dst = append(dst, '-')
	}
	return append(dst, buf[i:]...)
}

// Float writes a number member the way encoding/json formats a float64 (shortest
// representation, exponent form below 1e-6 and from 1e21). NaN and infinities make
// [Writer.End] fail with [ErrUnsupportedValue].
func (w *Writer) Float(name string, v float64) {
	w.name(name)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		w.err = ErrUnsupportedValue
		w.b = append(w.b, "null"...)
		return
	}
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		w.b = strconv.AppendFloat(w.b, v, 'e', -1, 64)
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1] // e-07 is written e-7
			w.b = w.b[:n-1]
		}
		return
	}
	w.b = strconv.AppendFloat(w.b, v, 'f', -1, 64)
}

// Bool writes a boolean member.
func (w *Writer) Bool(name string, v bool) {
	w.name(name)
	w.b = strconv.AppendBool(w.b, v)
}

// String writes a string member, escaped (invalid UTF-8 becomes U+FFFD).
func (w *Writer) String(name, v string) {
	w.name(name)
	w.b = appendQuoted(w.b, v)
}

// Null writes a null member.
func (w *Writer) Null(name string) {
	w.name(name)
	w.b = append(w.b, "null"...)
}

// End closes the object and returns the slice it was appended to, with the first error of
// the members (only a NaN or infinite float can fail).
func (w *Writer) End() ([]byte, error) {
	w.b = append(w.b, '}')
	return w.b, w.err
}

const hexDigits = "0123456789abcdef"

// appendQuoted appends s as a JSON string, escaping only what JSON requires.
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
