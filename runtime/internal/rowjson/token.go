package rowjson

// PlainInt parses tok when it is a plain JSON integer of at most 18 digits (no fraction, no
// exponent, no leading zero), the usual form of an epoch-milliseconds event time, which
// always fits an int64 and which timeouts.ParseEventTime reads as the same number. It spares
// that general parser, which allocates, for every row; anything else returns false.
func PlainInt(tok []byte) (int64, bool) {
	digits := tok
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) < len(tok) {
		v = -v
	}
	return v, true
}

// KindNumberOutOfRange is what [Kind] calls a number token: numbers are keys unless their
// exponent is beyond what a key may have (such as 1e999999).
const KindNumberOutOfRange = "a number with an exponent out of range"

// Kind names what the token tok (non-empty, as [Lookup] returns) is, for the error of a key
// that [AppendCanonicalKey] refused: "an object", "an array", "a boolean",
// [KindNumberOutOfRange], or "not a scalar" for anything else.
func Kind(tok []byte) string {
	switch tok[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return KindNumberOutOfRange
	}
	return "not a scalar"
}
