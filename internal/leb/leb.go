// Package leb writes the LEB128 integers of the WebAssembly binary format, for the runtime's
// instrumenter, the hand-assembled test modules and the Python runtime module's sources slot
// (internal/pyslot).
package leb

// AppendU32 appends v as an unsigned LEB128 integer.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// AppendS64 appends v as a signed LEB128 integer.
func AppendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
