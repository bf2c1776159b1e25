// Command counter counts each key's rows and emits, for every row, the key and the row's
// number among the key's rows: {"key": K, "n": 1}, then 2, ... It is the handler of the
// exactly-once checks (scripts/cluster-acceptance): a key's outputs are exactly 1..c, c its
// rows, or a row was lost or repeated.
//
// It uses the raw layer: nothing is decoded per row.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o counter.wasm .
package main

import (
	"fmt"
	"strconv"

	groupstate "github.com/groupstate/groupstate/sdk/go"
)

func init() { groupstate.HandleRaw(handle) }

func handle(g *groupstate.RawGroup) error {
	st := g.State()
	var n int64
	if v, ok := st.GetOption(); ok {
		// The state is {"n":N}: N starts after the 5 bytes of {"n":.
		if len(v) < 6 {
			return errBadState(v)
		}
		var err error
		if n, err = strconv.ParseInt(string(v[5:len(v)-1]), 10, 64); err != nil {
			return errBadState(v)
		}
	}
	out := make([]byte, 0, 64)
	for range g.Rows() {
		n++
		out = append(out[:0], `{"key":`...)
		out = append(out, g.Key().JSON()...)
		out = strconv.AppendInt(append(out, `,"n":`...), n, 10)
		g.Emit(append(out, '}'))
	}
	return st.Update(append(strconv.AppendInt([]byte(`{"n":`), n, 10), '}'))
}

// errBadState is the error of a state that is not {"n":N}.
func errBadState(v []byte) error { return fmt.Errorf("counter: state %q is not {\"n\":N}", v) }

func main() {}
