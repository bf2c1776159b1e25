//go:build wasip1

package groupstate

import (
	"unsafe"

	"github.com/groupstate/groupstate/abi"
)

// maxAlloc is the largest input buffer gs_alloc hands out (1 GiB).
const maxAlloc = 1 << 30

var (
	// inputBuf is the buffer gs_alloc returns; the host writes the next input into it.
	inputBuf []byte
	// lastResult keeps the last result buffer referenced until the next call.
	lastResult []byte
)

// gsABIVersion is the gs_abi_version export: 2 when the module registered a processor
// (groupstate.Process, ABI v2), else 1. Package initialization (which registers the handler)
// runs in _initialize, before the host calls it.
//
//go:wasmexport gs_abi_version
func gsABIVersion() uint32 { return defaultModule.ABIVersion() }

// gsAlloc is the gs_alloc export: a buffer of at least size bytes, valid until the next
// gs_alloc, or 0 when size is negative or absurd.
//
//go:wasmexport gs_alloc
func gsAlloc(size int32) uint32 {
	if size < 0 || size > maxAlloc {
		return 0
	}
	n := int(size)
	if n == 0 {
		n = 1
	}
	if cap(inputBuf) < n {
		c := 2 * cap(inputBuf)
		if c < n {
			c = n
		}
		if c > maxAlloc {
			c = n
		}
		inputBuf = make([]byte, c)
	}
	inputBuf = inputBuf[:cap(inputBuf)]
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(inputBuf))))
}

// gsGroupCell is the gs_group_cell export: where the module writes the index of the group
// whose handler runs (abi/README.md 2.1), so that an ABI v1 module announces each group with
// a store instead of a groupstate.group_begin call. The host calls it once per instance.
//
//go:wasmexport gs_group_cell
func gsGroupCell() uint32 { return uint32(uintptr(unsafe.Pointer(&groupCell))) }

// gsInit is the gs_init export.
//
//go:wasmexport gs_init
func gsInit(ptr unsafe.Pointer, length uint32) uint64 {
	return packResult(defaultModule.Init(unsafe.Slice((*byte)(ptr), length)))
}

// gsProcess is the gs_process export.
//
//go:wasmexport gs_process
func gsProcess(ptr unsafe.Pointer, length uint32) uint64 {
	return packResult(defaultModule.Process(unsafe.Slice((*byte)(ptr), length)))
}

// packResult keeps out alive and returns its packed location.
func packResult(out []byte) uint64 {
	lastResult = out
	return abi.PackResult(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), uint32(len(out)))
}
