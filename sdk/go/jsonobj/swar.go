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

// specialMask returns the high bits of the bytes of w that are a quote, a backslash or below
// 0x20, and possibly of some bytes after the first of them (a borrow runs upwards): it is not
// 0 exactly when w has such a byte, and its lowest set bit, so bits.TrailingZeros64(m)/8, is
// exactly the first of them, w being read little-endian. The tests: (x - ones) &^ x & highs
// marks a byte of x that is 0, and (x - n*ones) &^ x & highs a byte below n (n <= 0x80).
func specialMask(w uint64) uint64 {
	q := w ^ ('"' * ones)
	b := w ^ ('\\' * ones)
	return ((q-ones)&^q | (b-ones)&^b | (w-0x20*ones)&^w) & highs
}
