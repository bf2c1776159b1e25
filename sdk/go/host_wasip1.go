//go:build wasip1

package groupstate

import "unsafe"

// groupBegin is the host's groupstate.group_begin import.
//
//go:wasmimport groupstate group_begin
func groupBegin(index uint32)

// logImport is the host's groupstate.log import.
//
//go:wasmimport groupstate log
func logImport(level int32, ptr unsafe.Pointer, length uint32)

// hostGroupBegin tells the host that the handler is about to run for group index.
func hostGroupBegin(index uint32) { groupBegin(index) }

// hostLog writes msg to the host's log.
func hostLog(level int32, msg string) {
	logImport(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}
