package jsonobj

import (
	"math"
	"strconv"
)

// typeError describes a well-formed value of the wrong type.
type typeError struct {
	want  string
	value []byte
}

func (e *typeError) Error() string {
	v := e.value
	if len(v) > 40 {
		v = append(v[:37:37], "..."...)
	}
	return "jsonobj: want " + e.want + ", got " + string(v)
}

func (e *typeError) Unwrap() error { return ErrType }

// check checks that v is exactly one JSON value of the kind starting with one of first.
func check(v []byte, want string, first func(byte) bool) error {
	if len(v) == 0 {
		return &syntaxError{msg: "empty value"}
	}
	s := scanner{b: v}
	if err := s.value(0); err != nil {
		return err
	}
	if s.i != len(v) {
		return &syntaxError{msg: "data after the value", off: s.i}
	}
	if !first(v[0]) {
		return &typeError{want: want, value: v}
	}
	return nil
}

func isNumberStart(c byte) bool { return c == '-' || (c >= '0' && c <= '9') }

// Int returns the JSON number v as an int64. Like encoding/json decoding into an int64, it
// takes integer literals only: a fraction or an exponent, a value out of range, or another
// type is an error wrapping [ErrType].
func Int(v []byte) (int64, error) {
	// One pass for the common case, a plain integer in range; anything else is classified by
	// the full check below.
	i, neg := 0, false
	if len(v) > 0 && v[0] == '-' {
		i, neg = 1, true
	}
	start := i
	var n uint64
	for ; i < len(v) && v[i]-'0' < 10; i++ {
		n = n*10 + uint64(v[i]-'0')
	}
	digits := i - start
	// Up to 19 digits fit in a uint64 (its largest value has 20): only a longer number can
	// have wrapped n, and any such number (without a leading zero) is out of int64's range.
	overflow := digits > 19
	if i == len(v) && digits > 0 && (digits == 1 || v[start] != '0') {
		switch {
		case overflow:
		case !neg && n <= math.MaxInt64:
			return int64(n), nil
		case neg && n <= 1<<63:
			return -int64(n-1) - 1, nil
		}
		return 0, &typeError{want: "an integer in range", value: v}
	}
	if err := check(v, "an integer", isNumberStart); err != nil {
		return 0, err
	}
	return 0, &typeError{want: "an integer", value: v}
}

// Float returns the JSON number v as a float64 (the nearest one, as strconv.ParseFloat
// rounds). Another type, or a number out of float64's range, is an error wrapping [ErrType].
func Float(v []byte) (float64, error) {
	// A plain integer of up to 15 digits is exactly a float64: no need for the parser.
	if i := len(v); i > 0 && i <= 15 && (v[0] != '0' || i == 1) {
		var n int64
		for _, c := range v {
			if c < '0' || c > '9' {
				n = -1
				break
			}
			n = n*10 + int64(c-'0')
		}
		if n >= 0 {
			return float64(n), nil
		}
	}
	if err := check(v, "a number", isNumberStart); err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, &typeError{want: "a number in range", value: v}
	}
	return f, nil
}

// Bool returns the JSON literal true or false. Another value is an error wrapping [ErrType].
func Bool(v []byte) (bool, error) {
	if err := check(v, "a boolean", func(c byte) bool { return c == 't' || c == 'f' }); err != nil {
		return false, err
	}
	return v[0] == 't', nil
}

// String returns the JSON string v, unescaped. Another type is an error wrapping [ErrType].
// [AppendString] does the same without allocating a string.
func String(v []byte) (string, error) {
	b, err := AppendString(nil, v)
	return string(b), err
}

// AppendString appends the unescaped content of the JSON string v to dst. Another type is an
// error wrapping [ErrType].
func AppendString(dst, v []byte) ([]byte, error) {
	if err := check(v, "a string", func(c byte) bool { return c == '"' }); err != nil {
		return dst, err
	}
	return appendUnquoted(dst, v)
}

// IsNull reports whether v is the JSON literal null.
func IsNull(v []byte) bool { return string(v) == "null" }
