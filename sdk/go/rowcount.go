package groupstate

import (
	"iter"
	"sync"
	"unsafe"

	"github.com/groupstate/groupstate/abi"
)

// RowCount returns the number of rows rows yields. Given the rows of a call of
// [StatefulProcessor.HandleInputRows], it answers from the group's header without decoding
// or visiting a row, as [GroupState.RowCount] does for a handler: a processor that only
// counts its rows should call it rather than range over them, since a range loop over an
// iterator the compiler cannot see costs allocations per call (the loop's body and the
// variables it changes move to the heap), which under WebAssembly is much of what a small
// processor costs. The rows are not decoded, so a row that would not decode into R does not
// fail the call. Any other iterator is ranged over.
func RowCount[R any](rows iter.Seq[R]) int {
	if rows == nil {
		return 0
	}
	if e, ok := rowSeqs.Load(funcPointer(rows)); ok {
		return e.(*v2Module).rowCount()
	}
	n := 0
	for range rows {
		n++
	}
	return n
}

// rowSeqs maps the rows iterator of each processor's runner (made once per runner, see
// newRunner: its func value is the runner's own) to the runner's module, for RowCount.
var rowSeqs sync.Map // unsafe.Pointer (the iterator's func value) -> *v2Module

// funcPointer returns what identifies the func value f: the pointer a func value is.
func funcPointer[R any](f iter.Seq[R]) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&f))
}

// rowCount is the number of rows of the module's current group (0 but in a DATA group).
func (e *v2Module) rowCount() int {
	if e.group.Kind != abi.GroupData {
		return 0
	}
	return int(e.group.Count)
}
