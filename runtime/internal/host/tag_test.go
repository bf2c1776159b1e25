package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// tagRecorder is a slog.Handler that keeps each record as "stream key message" (stream "log"
// for groupstate.log).
type tagRecorder struct {
	mu   sync.Mutex
	recs []string
}

func (r *tagRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *tagRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *tagRecorder) WithGroup(string) slog.Handler            { return r }
func (r *tagRecorder) Handle(_ context.Context, rec slog.Record) error {
	stream, key := "log", "?"
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "stream":
			stream = a.Value.String()
		case "key":
			key = a.Value.String()
		}
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, fmt.Sprintf("%s %s %s", stream, key, rec.Message))
	r.mu.Unlock()
	return nil
}

// Instructions for tagModule's bodies.
func i32Store(addr, v int32) []byte {
	return slices.Concat(i32Const(addr), i32Const(v), []byte{0x36, 0x02, 0x00}) // i32.store align=4 offset=0
}
func call(f int) []byte { return append([]byte{0x10}, uleb(uint64(f))...) }

// tagModule is a v1 module whose gs_process, for a call of three groups, logs "m" with
// groupstate.log and writes "m\n" to stdout outside any group and then in groups 1 and 2,
// and returns three empty group results. It says which group runs with group_begin or, when
// cell is not 0, through a group cell there (abi/README.md 2.1), calling group_begin(0) as
// well to show that the cell wins.
func tagModule(cell int32) []byte {
	const (
		groupBegin = iota // imports
		log
		fdWrite
	)
	m := stubModule(1)
	m.imports = []wasmImport{
		{module: abi.ImportModule, name: abi.ImportGroupBegin, params: []byte{tI32}},
		{module: abi.ImportModule, name: abi.ImportLog, params: []byte{tI32, tI32, tI32}},
		{module: abi.WASIModule, name: "fd_write", params: []byte{tI32, tI32, tI32, tI32}, results: []byte{tI32}},
	}
	body := slices.Concat(
		i32Store(128, 0x0a6d),                // "m\n" at 128
		i32Store(160, 128), i32Store(164, 2), // one iovec at 160: 128, 2 bytes
		i32Store(516, 3), // result at 512: status 0, 3 groups of zeros
	)
	for _, g := range []int32{-1, 1, 2} {
		if cell != 0 {
			body = slices.Concat(body, i32Store(cell, g), i32Const(0), call(groupBegin))
		} else if g >= 0 {
			body = slices.Concat(body, i32Const(g), call(groupBegin))
		}
		body = slices.Concat(body,
			i32Const(0), i32Const(128), i32Const(1), call(log), // log(info, "m")
			i32Const(1), i32Const(160), i32Const(1), i32Const(176), call(fdWrite), []byte{0x1a}) // fd_write(stdout); drop
	}
	body = append(body, i64Const(512<<32|(abi.ResultHeaderSize+3*abi.GroupResultFixedSize))...)
	for i := range m.funcs {
		switch m.funcs[i].export {
		case abi.ExportAlloc:
			m.funcs[i].body = i32Const(1024)
		case abi.ExportInit:
			m.funcs[i].body = i64Const(256<<32 | 8) // zeros: status 0, no message
		case abi.ExportProcess:
			m.funcs[i].body = body
		}
	}
	if cell != 0 {
		m.funcs = append(m.funcs, wasmFunc{export: abi.ExportGroupCell, results: []byte{tI32}, body: i32Const(cell)})
	}
	return m.bytes()
}

// TestLogKeyTag: what a module logs or writes to stdout is tagged with the key of the group it
// runs, whether it says which with group_begin or with a group cell; outside any group the tag
// is empty.
func TestLogKeyTag(t *testing.T) {
	for _, cell := range []int32{0, 64} {
		t.Run(fmt.Sprintf("cell=%d", cell), func(t *testing.T) {
			rec := &tagRecorder{}
			cfg := testConfig(tagModule(cell))
			cfg.Logger = slog.New(rec)
			h, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			call := &handler.Call{Groups: []handler.Group{{Key: []byte(`"a"`)}, {Key: []byte(`"b"`)}, {Key: []byte(`"c"`)}}}
			res := make([]handler.Result, 3)
			if err := h.Process(context.Background(), call, res); err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Err != nil {
					t.Fatalf("group %d: %v", i, r.Err)
				}
			}
			want := []string{"log  m", "stdout  m", `log "b" m`, `stdout "b" m`, `log "c" m`, `stdout "c" m`}
			if !slices.Equal(rec.recs, want) {
				t.Fatalf("logged\n%s\nwant\n%s", strings.Join(rec.recs, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestGroupCellRefused: a gs_group_cell export with another signature refuses the module, and
// a cell outside the memory fails the init.
func TestGroupCellRefused(t *testing.T) {
	badSig := stubModule(1)
	badSig.funcs = append(badSig.funcs, wasmFunc{export: abi.ExportGroupCell, params: []byte{tI32}})
	for _, tc := range []struct {
		name string
		wasm []byte
		err  error
		msg  string
	}{
		{"signature", badSig.bytes(), ErrInvalidModule, `export "gs_group_cell" has signature (i32) -> (), want () -> (i32)`},
		{"outside the memory", tagModule(65533), ErrInit, "gs_group_cell returned 0xfffd, outside the module's memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(context.Background(), testConfig(tc.wasm))
			if err == nil {
				h.Close(context.Background())
				t.Fatal("module accepted")
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v\nwant %v containing %q", err, tc.err, tc.msg)
			}
		})
	}
}

// TestLogKeyTagGoSDK: a module of the Go SDK (the engine's probe), which announces its groups
// through its group cell, has its logs tagged with each group's key.
func TestLogKeyTagGoSDK(t *testing.T) {
	wasm, err := os.ReadFile("../../engine/testdata/probe/probe.wasm")
	if err != nil {
		t.Fatal(err)
	}
	rec := &tagRecorder{}
	cfg := testConfig(wasm)
	cfg.Logger = slog.New(rec)
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	in := <-h.pool
	h.pool <- in
	if in.cell == 0 {
		t.Fatal("the Go SDK's module has no group cell")
	}
	row := func(msg string) [][]byte { return [][]byte{[]byte(`{"ops":[{"log":"` + msg + `"}]}`)} }
	call := &handler.Call{Groups: []handler.Group{{Key: []byte(`"a"`), Rows: row("x")}, {Key: []byte(`7`), Rows: row("y")}}}
	res := make([]handler.Result, 2)
	if err := h.Process(context.Background(), call, res); err != nil {
		t.Fatal(err)
	}
	if want := []string{`log "a" x`, `log 7 y`}; !slices.Equal(rec.recs, want) {
		t.Fatalf("logged %q, want %q", rec.recs, want)
	}
}
