// Command probe is a scriptable handler for the engine's tests: each row carries the state
// handle operations to perform, so one module can exercise every rule of docs/semantics.md.
//
// A row is {"k": key, "ops": [op, ...]}; each op is an object with one field:
//
//	{"update": v}      state.Update(v) (v is any JSON value; null exercises the error)
//	{"remove": true}   state.Remove()
//	{"dur": ms}        state.SetTimeoutDuration(ms)
//	{"ts": ms}         state.SetTimeoutTimestamp(ms)
//	{"emit": v}        emit v
//	{"emit_raw": s}    emit the bytes of string s (not necessarily JSON)
//	{"probe": tag}     emit {"tag", "key", "exists", "state", "timed_out", "t", "wm"} (wm null
//	                   when no watermark is configured; state absent when none)
//	{"fail": msg}      return an error
//	{"panic": msg}     panic
//	{"exit": code}     os.Exit (an unrecoverable trap for the host)
//	{"loop": true}     loop forever (the per-call time limit)
//	{"log": msg}       log msg at level info through the host (groupstate.Log)
//	{"alloc_mb": n}    allocate and touch n MiB (the memory limit)
//	{"emit_mb": n}     emit a JSON string of n MiB (the output limit)
//	{"open": path}     try to open a file: emits {"tag": "open", "ok", "error"}
//	{"env": name}      look up an environment variable: emits {"tag": "env", "set", "value", "environ"}
//	{"dial": addr}     try a TCP connection: emits {"tag": "dial", "ok", "error"}
//	{"clock": tag}     emit {"tag", "key", "wall_ns": time.Now().UnixNano()}
//	{"random": n}      emit {"tag": "random", "key", "hex": n bytes of crypto/rand, in hex}
//	{"init": tag}      emit {"tag", "wall_ns", "hex"}: time.Now().UnixNano() and 8 bytes of
//	                   crypto/rand, both read when the instance started (in init)
//
// An op whose state-handle call fails emits {"tag": "error", "op": i, "error": msg}.
// A timeout call runs the ops stored under "on_timeout" in the state value, if the state is
// an object holding one, else it emits a probe tagged "timeout".
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false -o runtime/engine/testdata/probe/probe.wasm ./runtime/engine/testdata/probe
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"time"

	groupstate "github.com/groupstate/groupstate/sdk/go"
)

type op struct {
	Update  json.RawMessage `json:"update"`
	Remove  bool            `json:"remove"`
	Dur     *int64          `json:"dur"`
	TS      *int64          `json:"ts"`
	Emit    json.RawMessage `json:"emit"`
	EmitRaw string          `json:"emit_raw"`
	Probe   string          `json:"probe"`
	Fail    string          `json:"fail"`
	Panic   string          `json:"panic"`
	Exit    *int            `json:"exit"`
	Loop    bool            `json:"loop"`
	Log     string          `json:"log"`
	AllocMB int             `json:"alloc_mb"`
	EmitMB  int             `json:"emit_mb"`
	Open    string          `json:"open"`
	Env     string          `json:"env"`
	Dial    string          `json:"dial"`
	Clock   string          `json:"clock"`
	Random  int             `json:"random"`
	Init    string          `json:"init"`
}

type row struct {
	Ops []op `json:"ops"`
}

var sink [][]byte

// What the instance read of its clock and random source when it started.
var (
	initWall   int64
	initRandom = make([]byte, 8)
)

func init() {
	initWall = time.Now().UnixNano()
	rand.Read(initRandom)
	groupstate.HandleRaw(handle)
}

func handle(g *groupstate.RawGroup) error {
	st := g.State()
	if st.HasTimedOut() {
		var v struct {
			OnTimeout []op `json:"on_timeout"`
		}
		if cur, ok := st.GetOption(); ok && json.Unmarshal(cur, &v) == nil && v.OnTimeout != nil {
			return run(g, v.OnTimeout)
		}
		return run(g, []op{{Probe: "timeout"}})
	}
	for data := range g.Rows() {
		var r row
		if err := json.Unmarshal(data, &r); err != nil {
			return err
		}
		if err := run(g, r.Ops); err != nil {
			return err
		}
	}
	return nil
}

func run(g *groupstate.RawGroup, ops []op) error {
	st := g.State()
	for i, o := range ops {
		var err error
		switch {
		case o.Update != nil:
			v := []byte(o.Update)
			if string(v) == "null" {
				v = nil
			}
			err = st.Update(v)
		case o.Remove:
			st.Remove()
		case o.Dur != nil:
			err = st.SetTimeoutDuration(time.Duration(*o.Dur) * time.Millisecond)
		case o.TS != nil:
			err = st.SetTimeoutTimestamp(*o.TS)
		case o.Emit != nil:
			g.Emit(o.Emit)
		case o.EmitRaw != "":
			g.Emit([]byte(o.EmitRaw))
		case o.Probe != "":
			emitProbe(g, o.Probe)
		case o.Fail != "":
			return errors.New(o.Fail)
		case o.Panic != "":
			panic(o.Panic)
		case o.Exit != nil:
			os.Exit(*o.Exit)
		case o.Loop:
			for {
			}
		case o.Log != "":
			groupstate.Log(groupstate.LevelInfo, o.Log)
		case o.EmitMB > 0:
			b := make([]byte, o.EmitMB<<20)
			for j := range b {
				b[j] = 'x'
			}
			b[0], b[len(b)-1] = '"', '"'
			g.Emit(b)
		case o.Open != "":
			f, err := os.Open(o.Open)
			if err == nil {
				f.Close()
			}
			emitResult(g, "open", err)
		case o.Env != "":
			v, ok := os.LookupEnv(o.Env)
			e, _ := json.Marshal(map[string]any{"tag": "env", "set": ok, "value": v, "environ": len(os.Environ())})
			g.Emit(e)
		case o.Dial != "":
			c, err := net.Dial("tcp", o.Dial)
			if err == nil {
				c.Close()
			}
			emitResult(g, "dial", err)
		case o.Clock != "":
			e, _ := json.Marshal(map[string]any{"tag": o.Clock, "key": json.RawMessage(g.Key().JSON()), "wall_ns": time.Now().UnixNano()})
			g.Emit(e)
		case o.Random > 0:
			b := make([]byte, o.Random)
			rand.Read(b)
			e, _ := json.Marshal(map[string]any{"tag": "random", "key": json.RawMessage(g.Key().JSON()), "hex": hex.EncodeToString(b)})
			g.Emit(e)
		case o.Init != "":
			e, _ := json.Marshal(map[string]any{"tag": o.Init, "wall_ns": initWall, "hex": hex.EncodeToString(initRandom)})
			g.Emit(e)
		case o.AllocMB > 0:
			b := make([]byte, o.AllocMB<<20)
			for j := range b {
				b[j] = 1
			}
			sink = append(sink, b)
		}
		if err != nil {
			e, _ := json.Marshal(map[string]any{"tag": "error", "op": i, "error": err.Error()})
			g.Emit(e)
		}
	}
	return nil
}

func emitResult(g *groupstate.RawGroup, tag string, err error) {
	p := map[string]any{"tag": tag, "ok": err == nil}
	if err != nil {
		p["error"] = err.Error()
	}
	b, _ := json.Marshal(p)
	g.Emit(b)
}

func emitProbe(g *groupstate.RawGroup, tag string) {
	st := g.State()
	p := map[string]any{
		"tag":       tag,
		"key":       json.RawMessage(g.Key().JSON()),
		"exists":    st.Exists(),
		"timed_out": st.HasTimedOut(),
		"t":         st.CurrentProcessingTimeMs(),
	}
	if v, ok := st.GetOption(); ok {
		p["state"] = json.RawMessage(v)
	}
	if wm, err := st.CurrentWatermarkMs(); err == nil {
		p["wm"] = wm
	} else {
		p["wm"] = nil // no watermark configured
	}
	b, _ := json.Marshal(p)
	g.Emit(b)
}

func main() {}
