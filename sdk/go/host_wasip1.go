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

// groupCell is the module's group cell (abi.ExportGroupCell): the index of the group whose
// handler runs, which the host reads when the module logs or writes to stdout or stderr.
var groupCell uint32

// setGroupCell says that the handler is about to run for group index (noGroup: none), by
// writing the group cell: a store, where group_begin is a host call.
func setGroupCell(index uint32) { groupCell = index }

// hostLog writes msg to the host's log.
func hostLog(level int32, msg string) {
	logImport(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

// stateImport is the host's groupstate.state import (ABI v2, abi/README.md section 9.5). Only
// the ABI v2 code calls it, and that code is reachable only from [RegisterProcessor]: the
// linker drops this import (and group_begin) from every module that does not register a
// processor, so an ABI v1 module imports at most log (TestWasmFixtures checks both kinds).
//
//go:wasmimport groupstate state
func stateImport(reqPtr unsafe.Pointer, reqLen uint32, respPtr unsafe.Pointer, respCap uint32) int32

// haveStateImport reports whether hostState reaches a host.
const haveStateImport = true

// hostState sends the op list req to the host and returns the size of its answers, written to
// resp when they fit (see [abi.ImportState]).
func hostState(req, resp []byte) int32 {
	return stateImport(unsafe.Pointer(unsafe.SliceData(req)), uint32(len(req)),
		unsafe.Pointer(unsafe.SliceData(resp)), uint32(len(resp)))
}
