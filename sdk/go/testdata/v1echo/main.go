// Command v1echo is the Go SDK's ABI v1 fixture: it emits every row as it is. TestWasmFixtures
// builds it to check that an ABI v1 module imports nothing of ABI v2 (groupstate.state).
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o v1echo.wasm ./sdk/go/testdata/v1echo
package main

import groupstate "github.com/groupstate/groupstate/sdk/go"

func init() {
	groupstate.HandleRaw(func(g *groupstate.RawGroup) error {
		for r := range g.Rows() {
			g.Emit(r)
		}
		return nil
	})
}

func main() {}
