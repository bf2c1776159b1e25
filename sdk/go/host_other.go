//go:build !wasip1

package groupstate

// hostGroupBegin does nothing outside WebAssembly.
func hostGroupBegin(index uint32) {}

// hostLog does nothing outside WebAssembly.
func hostLog(level int32, msg string) {}
