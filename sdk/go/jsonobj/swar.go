package jsonobj

// Eight bytes at a time: the scans for the end of a plain string or name test a word of
// eight bytes with a few arithmetic operations instead of eight loop iterations (under
// WebAssembly every iteration is a jump through Go's dispatch table).

const (
	ones  = 0x0101010101010101 // 0x01 in every byte
	highs = 0x8080808080808080 // 0x80 in every byte
)

// word reads the eight bytes of s at i, little-endian (the caller checks the bounds).
func word[T string | []byte](s T, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// word4 reads the four bytes of s at i, little-endian (the caller checks the bounds).
func word4(s string, i int) uint32 {
	_ = s[i+3]
	return uint32(s[i]) | uint32(s[i+1])<<8 | uint32(s[i+2])<<16 | uint32(s[i+3])<<24
}

// special reports whether a byte of w is a quote, a backslash or below 0x20. The tests are
// exact: (x - ones) &^ x & highs is not 0 exactly when a byte of x is 0, and
// (x - n*ones) &^ x & highs exactly when a byte of x is below n (n <= 0x80).
func special(w uint64) bool { return specialMask(w) != 0 }

// specialMask returns the high bits of the bytes of w that [special] finds, and possibly of
// some bytes after the first of them (a borrow runs upwards): its lowest set bit, and so
// bits.TrailingZeros64(m)/8, is exactly the first such byte, as w is read little-endian.
func specialMask(w uint64) uint64 {
	q := w ^ ('"' * ones)
	b := w ^ ('\\' * ones)
	return ((q-ones)&^q | (b-ones)&^b | (w-0x20*ones)&^w) & highs
}
