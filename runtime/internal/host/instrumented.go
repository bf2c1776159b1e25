package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// Keeping instrumented modules.
//
// Instrumenting a module (interrupt.go) reads and rewrites every instruction of its code: for
// a Go module (2.3 MB of code) about a third of what a start from a warm compilation cache
// costs (RATIONALE.md, "A warm start skips the instrumenter"). Its output depends only on the
// module's bytes, the load limits and the instrumenter, so a host whose Config names an
// InstrumentedDir keeps it there, and a later host, in this process or another, reads it
// back instead. An entry is named by a digest of all three; its content carries that digest
// again and a checksum, so a torn, truncated or misplaced file is ignored (and written
// again), never used. The directory is as trusted as the compilation cache beside it, whose
// files are machine code.

// instrumentedMagic starts every entry. Change it (or anything instrumenterFingerprint
// covers) when the instrumenter's output changes, so that older entries are not used.
const instrumentedMagic = "gsins\x00\x00\x01"

// instrumentations counts the modules instrumentKept instrumented in this process (the
// tests' view of whether an entry was used).
var instrumentations atomic.Int64

// crcTable is the Castagnoli polynomial, which the CPU computes.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// instrumentedKey names the instrumented module of a module of digest under lim: the
// instrumenter's fingerprint, the digest, and every limit (withDefaults, so that a zero
// field and its default name the same entry).
func instrumentedKey(digest [sha256.Size]byte, lim LoadLimits) [sha256.Size]byte {
	lim = lim.withDefaults()
	h := sha256.New()
	h.Write([]byte(instrumentedMagic))
	fp := instrumenterFingerprint()
	h.Write(fp[:])
	h.Write(digest[:])
	fmt.Fprintf(h, "%+v", lim) // every field, whatever fields LoadLimits gains
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

// instrumenterFingerprint is a digest of what the instrumenter makes of a small module that
// has each thing it rewrites (a loop, calls, a start function, globals, exports, a table), so
// that a change to the code it inserts changes every entry's name even when
// instrumentedMagic was not changed with it.
var instrumenterFingerprint = sync.OnceValue(func() [sha256.Size]byte {
	ins, err := instrument(fingerprintModule, LoadLimits{})
	if err != nil {
		panic("host: the instrumenter refuses its own fingerprint module: " + err.Error())
	}
	return sha256.Sum256(append(ins.wasm, byte(boolByte(ins.hasStart))))
})

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// fingerprintModule is a module with a type () -> (), a table, a memory, a global, an export,
// a start function that loops and calls the other function, which calls nothing.
var fingerprintModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
	0x03, 0x03, 0x02, 0x00, 0x00, // functions: 0, 1 of type 0
	0x04, 0x04, 0x01, 0x70, 0x00, 0x01, // table: funcref, min 1
	0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1
	0x06, 0x06, 0x01, 0x7f, 0x01, 0x41, 0x00, 0x0b, // global: mut i32 = 0
	0x07, 0x05, 0x01, 0x01, 0x66, 0x00, 0x01, // export "f": function 1
	0x08, 0x01, 0x00, // start: function 0
	0x0a, 0x10, 0x02, // code: two bodies
	0x0b, 0x00, 0x03, 0x40, 0x10, 0x01, 0x41, 0x00, 0x0d, 0x00, 0x0b, 0x0b, // loop { call 1; br_if 0 (0) }
	0x02, 0x00, 0x0b, // nothing
}

// instrumentKept returns the instrumented module of wasm (of digest) under lim, read from dir
// when an earlier host left it there, else instrumented and left there. An empty dir keeps
// nothing. Failing to read or write the directory only costs the instrumentation.
func instrumentKept(dir string, digest [sha256.Size]byte, wasm []byte, lim LoadLimits) (instrumented, error) {
	if dir == "" {
		instrumentations.Add(1)
		return instrument(wasm, lim)
	}
	key := instrumentedKey(digest, lim)
	path := filepath.Join(dir, hex.EncodeToString(key[:]))
	if ins, ok := readInstrumented(path, key); ok {
		return ins, nil
	}
	instrumentations.Add(1)
	ins, err := instrument(wasm, lim)
	if err != nil {
		return ins, err
	}
	writeInstrumented(dir, path, key, ins)
	return ins, nil
}

// The layout of an entry: instrumentedMagic, the key, a flags byte (1: hasStart), the CRC-32C
// of the module, its length (u64), then the instrumented module.
const instrumentedHeader = len(instrumentedMagic) + sha256.Size + 1 + 4 + 8

// readInstrumented reads the entry at path, if it is whole and is key's.
func readInstrumented(path string, key [sha256.Size]byte) (instrumented, bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < instrumentedHeader || string(b[:len(instrumentedMagic)]) != instrumentedMagic {
		return instrumented{}, false
	}
	h := b[len(instrumentedMagic):]
	if !bytes.Equal(h[:sha256.Size], key[:]) {
		return instrumented{}, false
	}
	h = h[sha256.Size:]
	flags, sum, n := h[0], binary.LittleEndian.Uint32(h[1:]), binary.LittleEndian.Uint64(h[5:])
	wasm := b[instrumentedHeader:]
	if flags > 1 || uint64(len(wasm)) != n || crc32.Checksum(wasm, crcTable) != sum {
		return instrumented{}, false
	}
	return instrumented{wasm: wasm, hasStart: flags == 1}, true
}

// writeInstrumented writes ins as key's entry at path, in dir: to a temporary file renamed
// into place, so that a reader sees the whole entry or none (processes share the directory).
func writeInstrumented(dir, path string, key [sha256.Size]byte, ins instrumented) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	b := make([]byte, 0, instrumentedHeader)
	b = append(b, instrumentedMagic...)
	b = append(b, key[:]...)
	b = append(b, boolByte(ins.hasStart))
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(ins.wasm, crcTable))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(ins.wasm)))
	_, err = f.Write(b)
	if err == nil {
		_, err = f.Write(ins.wasm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
}
