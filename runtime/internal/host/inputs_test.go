package host

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// initEchoModule is a module of ABI version v whose gs_alloc always returns offset 1024 and
// whose gs_init succeeds (its result is zero bytes of memory at 256: status 0, no message and,
// for v2, no variables), so the init buffer the host wrote stays at 1024 to be read back.
func initEchoModule(v int32) []byte {
	resultLen := int64(8)
	if v == 2 {
		resultLen = 12
	}
	m := stubModule(v)
	for i := range m.funcs {
		switch m.funcs[i].export {
		case "gs_alloc":
			m.funcs[i].body = i32Const(1024)
		case "gs_init":
			m.funcs[i].body = i64Const(256<<32 | resultLen)
		}
	}
	if v == 2 {
		m.imports = append(m.imports, wasmImport{module: abi.ImportModule, name: abi.ImportGroupBegin, params: []byte{tI32}})
	}
	return m.bytes()
}

// TestInitBufferInputs: the init buffer each module version receives. A v1 module never gets
// HAS_INPUTS nor the input names: its init buffer is byte for byte the one of a deployment
// without inputs. A v2 module gets the flag and the names when the deployment has inputs
// (abi/README.md 9.3a), and exactly the v1 layout with version 2 otherwise.
func TestInitBufferInputs(t *testing.T) {
	plain := abi.Init{ABIVersion: abi.Version, Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark, Name: []byte("adjoin"), Config: []byte(`{"within":"1h"}`)}
	withInputs := plain
	withInputs.Flags |= abi.InitHasInputs
	withInputs.Inputs = [][]byte{[]byte("impressions"), []byte("clicks")}
	v2 := func(in abi.Init) abi.Init { in.ABIVersion = abi.Version2; return in }
	for _, tc := range []struct {
		name    string
		version int32
		init    abi.Init
		want    []byte
	}{
		{"v1 without inputs", 1, plain, abi.AppendInit(nil, plain)},
		{"v1 with inputs: unchanged", 1, withInputs, abi.AppendInit(nil, plain)},
		{"v2 without inputs", 2, plain, abi.AppendInit(nil, v2(plain))},
		{"v2 with inputs", 2, withInputs, abi.AppendInit(nil, v2(withInputs))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(initEchoModule(tc.version))
			cfg.Init = tc.init
			h, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			in := <-h.pool
			defer func() { h.pool <- in }()
			got, ok := in.mem.Read(1024, uint32(len(tc.want)+8))
			if !ok {
				t.Fatal("memory read")
			}
			// The buffer is followed by untouched (zero) memory: nothing more was written.
			if !bytes.Equal(got[:len(tc.want)], tc.want) || !bytes.Equal(got[len(tc.want):], make([]byte, 8)) {
				t.Fatalf("init buffer\n% x\nwant\n% x", got, tc.want)
			}
			if tc.version == 1 && !bytes.Equal(tc.want, []byte{1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 6, 0, 0, 0, 'a', 'd', 'j', 'o', 'i', 'n', 15, 0, 0, 0, '{', '"', 'w', 'i', 't', 'h', 'i', 'n', '"', ':', '"', '1', 'h', '"', '}'}) {
				t.Fatalf("v1 init buffer % x", tc.want)
			}
			if want := tc.init.Flags&abi.InitHasInputs != 0; h.inputs != want { // used by the v2 path only
				t.Fatalf("inputs %v", h.inputs)
			}
		})
	}
}

// TestInitInputsInvalid: a config whose input names cannot be written is refused before any
// module runs.
func TestInitInputsInvalid(t *testing.T) {
	for _, names := range [][]string{nil, {"a", "a"}, {"A"}} {
		cfg := testConfig(initEchoModule(2))
		cfg.Init.Flags |= abi.InitHasInputs
		for _, n := range names {
			cfg.Init.Inputs = append(cfg.Init.Inputs, []byte(n))
		}
		if h, err := New(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "input names") {
			if h != nil {
				h.Close(context.Background())
			}
			t.Fatalf("%q: err = %v", names, err)
		}
	}
}

// TestProcessV2Inputs runs the adjoin sample's Go module (samples/adjoin, built by the Go SDK)
// through the host: the module checks the input names at init (so they reached it), and it
// joins an impression with a click only when each row's input index says which is which.
// recSession answers every read as if the key held nothing, so what is joined is what one
// call sees.
func TestProcessV2Inputs(t *testing.T) {
	wasm, err := os.ReadFile("../../../samples/adjoin/go/adjoin.wasm")
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(flags uint32, names ...string) Config {
		c := testConfig(wasm) // the shared cache: one compilation for the hosts below
		c.Init = abi.Init{ABIVersion: abi.Version, Mode: abi.TimeoutEventTime, Flags: abi.InitHasWatermark | flags, Name: []byte("adjoin"), Config: []byte(`{"within":"1h"}`)}
		for _, n := range names {
			c.Init.Inputs = append(c.Init.Inputs, []byte(n))
		}
		return c
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no inputs", cfg(0), `adjoin: the spec's inputs must be impressions and clicks, got []`},
		{"other inputs", cfg(abi.InitHasInputs, "impressions", "views"), `got ["impressions" "views"]`},
	} {
		if h, err := New(context.Background(), tc.cfg); err == nil || !errors.Is(err, ErrInit) || !strings.Contains(err.Error(), tc.want) {
			if h != nil {
				h.Close(context.Background())
			}
			t.Fatalf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}

	imp, click := []byte(`{"ad_id":"a","ts":36000000}`), []byte(`{"ad_id":"a","ts":37200000}`)
	for _, tc := range []struct {
		name   string
		names  []string
		inputs []uint32 // of the rows imp, click
		emits  string
	}{
		{"impression then click", []string{"impressions", "clicks"}, []uint32{0, 1}, `{"ad_id":"a","impression_ts":36000000,"click_ts":37200000}`},
		{"names the other way round", []string{"clicks", "impressions"}, []uint32{1, 0}, `{"ad_id":"a","impression_ts":36000000,"click_ts":37200000}`},
		// The same rows read as a click at 10:00 then an impression at 10:20: no match.
		{"rows the other way round", []string{"impressions", "clicks"}, []uint32{1, 0}, ``},
		{"two impressions", []string{"impressions", "clicks"}, []uint32{0, 0}, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(context.Background(), cfg(abi.InitHasInputs, tc.names...))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			call := &handler.CallV2{ProcessingTimeMs: 1000, Groups: []handler.GroupV2{{Kind: abi.GroupData, Key: []byte(`"a"`), Rows: [][]byte{imp, click}, Inputs: tc.inputs}}}
			res := make([]handler.ResultV2, 1)
			if err := h.ProcessV2(context.Background(), call, &recSession{cur: -1}, res); err != nil {
				t.Fatal(err)
			}
			if res[0].Err != nil {
				t.Fatal(res[0].Err)
			}
			var emits []string
			for _, e := range res[0].Emits {
				emits = append(emits, string(e))
			}
			if got := strings.Join(emits, " "); got != tc.emits {
				t.Fatalf("emits %s, want %s", got, tc.emits)
			}
		})
	}

	// An index the init did not name fails the whole call (the guest's reader checks it).
	h, err := New(context.Background(), cfg(abi.InitHasInputs, "impressions", "clicks"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	call := &handler.CallV2{ProcessingTimeMs: 1000, Groups: []handler.GroupV2{{Kind: abi.GroupData, Key: []byte(`"a"`), Rows: [][]byte{imp}, Inputs: []uint32{2}}}}
	res := make([]handler.ResultV2, 1)
	if err := h.ProcessV2(context.Background(), call, &recSession{cur: -1}, res); err != nil {
		t.Fatal(err)
	}
	if res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "input index 2, the init has 2 inputs") {
		t.Fatalf("index 2 of 2: %v", res[0].Err)
	}
}
