package host

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
)

func TestZZLoops(t *testing.T) {
	for _, n := range []int{1000, 2000, 4000} {
		body := bytes.Repeat([]byte{0x03, 0x40, 0x0b}, n)
		m := wasmModule{memory: true, funcs: []wasmFunc{{export: "f", params: []byte{tI32}, body: body}}}
		ins, err := instrument(m.bytes(), LoadLimits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			name string
			w    []byte
		}{{"raw", m.bytes()}, {"ins", ins.wasm}} {
			rt := wazero.NewRuntime(context.Background())
			start := time.Now()
			_, err := rt.CompileModule(context.Background(), v.w)
			fmt.Printf("loops=%d %s bytes=%d: %v %v\n", n, v.name, len(v.w), time.Since(start), err)
			rt.Close(context.Background())
		}
	}
}
