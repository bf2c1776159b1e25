//go:build !wasip1

package groupstate

import "github.com/groupstate/groupstate/abi"

// hostGroupBegin does nothing outside WebAssembly.
func hostGroupBegin(index uint32) {}

// setGroupCell does nothing outside WebAssembly.
func setGroupCell(index uint32) {}

// hostLog does nothing outside WebAssembly.
func hostLog(level int32, msg string) {}

// haveStateImport reports whether hostState reaches a host: outside WebAssembly it does not,
// and a processor needs a [StateHost] ([Module.SetStateHost]).
const haveStateImport = false

// hostState is never called outside WebAssembly (see haveStateImport).
func hostState(req, resp []byte) int32 { return abi.StateRefused }
