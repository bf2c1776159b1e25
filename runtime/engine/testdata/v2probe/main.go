// Command v2probe is a scriptable ABI v2 (transformWithState) handler for the engine's tests:
// each row carries the state operations to perform, as probe does for v1.
//
// It declares a value "v", a list "l", a map "m", a value "t" with a TTL (config "ttl_ms",
// default 1000) and a value "on_timer". Config "alt": true declares "l" as a map (a kind
// change); "drop_m": true does not declare "m".
//
// A row is {"k": key, "ops": [op, ...]}; each op is an object with one field:
//
//	{"set": v}          v.Update(v)
//	{"get": tag}        emit {"tag", "key", "v"} (v absent when the value does not exist)
//	{"append": x}       l.Append(x)
//	{"list": tag}       emit {"tag", "key", "l": [elements]}
//	{"put": [k, x]}     m.Update(k, x)
//	{"remove": k}       m.Remove(k)
//	{"map": tag}        emit {"tag", "key", "m": {entries}}
//	{"tset": x}         t.Update(x)
//	{"tget": tag}       emit {"tag", "key", "t"} (t absent when expired or never set)
//	{"clear": name}     clear variable name ("v", "l", "m", "t")
//	{"reg": ts}         register a timer
//	{"del": ts}         delete a timer
//	{"timers": tag}     emit {"tag", "key", "timers": [ts...]}
//	{"on_timer": [op]}  store ops that the key's timer calls run
//	{"emit": v}         emit v
//	{"emit_raw": s}     emit the bytes of s (not necessarily JSON)
//	{"fail": msg}       return an error
//	{"exit": code}      os.Exit (a trap for the host)
//	{"clock": tag}      emit {"tag", "key", "wall_ns": time.Now().UnixNano()}
//	{"random": n}       emit {"tag": "random", "key", "hex": n bytes of crypto/rand, in hex}
//
// A timer call emits {"tag": "timer", "key", "ts"} and runs the ops stored with on_timer.
// The initial state is applied by the SDK's default (variables by name).
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false -o runtime/engine/testdata/v2probe/v2probe.wasm ./runtime/engine/testdata/v2probe
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"iter"
	"os"
	"time"

	groupstate "github.com/groupstate/groupstate/sdk/go"
)

type op struct {
	Set     json.RawMessage   `json:"set"`
	Get     string            `json:"get"`
	Append  json.RawMessage   `json:"append"`
	List    string            `json:"list"`
	Put     []json.RawMessage `json:"put"`
	Remove  *string           `json:"remove"`
	Map     string            `json:"map"`
	TSet    json.RawMessage   `json:"tset"`
	TGet    string            `json:"tget"`
	Clear   string            `json:"clear"`
	Reg     *int64            `json:"reg"`
	Del     *int64            `json:"del"`
	Timers  string            `json:"timers"`
	OnTimer json.RawMessage   `json:"on_timer"`
	Emit    json.RawMessage   `json:"emit"`
	EmitRaw string            `json:"emit_raw"`
	Fail    string            `json:"fail"`
	Exit    *int              `json:"exit"`
	Clock   string            `json:"clock"`
	Random  int               `json:"random"`
}

type row struct {
	Ops []op `json:"ops"`
}

type config struct {
	TTLMs int64 `json:"ttl_ms"`
	Alt   bool  `json:"alt"`
	DropM bool  `json:"drop_m"`
}

type probe struct {
	v, t, onTimer *groupstate.ValueState[json.RawMessage]
	l             *groupstate.ListState[json.RawMessage]
	lAlt          *groupstate.MapState[json.RawMessage]
	m             *groupstate.MapState[json.RawMessage]
}

func (p *probe) Init(h *groupstate.ProcessorHandle) error {
	c := config{TTLMs: 1000}
	if err := h.Config().Decode(&c); err != nil {
		return err
	}
	p.v = groupstate.NewValueState[json.RawMessage](h, "v")
	if c.Alt {
		p.lAlt = groupstate.NewMapState[json.RawMessage](h, "l")
	} else {
		p.l = groupstate.NewListState[json.RawMessage](h, "l")
	}
	if !c.DropM {
		p.m = groupstate.NewMapState[json.RawMessage](h, "m")
	}
	p.t = groupstate.NewValueState[json.RawMessage](h, "t", groupstate.WithTTL(time.Duration(c.TTLMs)*time.Millisecond))
	p.onTimer = groupstate.NewValueState[json.RawMessage](h, "on_timer")
	return nil
}

func emitObj(out *groupstate.Emitter[json.RawMessage], fields map[string]any) {
	b, _ := json.Marshal(fields)
	out.Emit(b)
}

func (p *probe) run(key groupstate.Key, ops []op, t *groupstate.Timers, out *groupstate.Emitter[json.RawMessage]) error {
	k := json.RawMessage(key.JSON())
	for _, o := range ops {
		switch {
		case o.Set != nil:
			if err := p.v.Update(o.Set); err != nil {
				return err
			}
		case o.Get != "":
			f := map[string]any{"tag": o.Get, "key": k}
			if v, ok := p.v.GetOption(); ok {
				f["v"] = v
			}
			emitObj(out, f)
		case o.Append != nil:
			if err := p.l.Append(o.Append); err != nil {
				return err
			}
		case o.List != "":
			l := []json.RawMessage{}
			for e := range p.l.All() {
				l = append(l, e)
			}
			emitObj(out, map[string]any{"tag": o.List, "key": k, "l": l})
		case o.Put != nil:
			var mk string
			if len(o.Put) != 2 || json.Unmarshal(o.Put[0], &mk) != nil {
				return errors.New("put takes [string, value]")
			}
			if err := p.m.Update(mk, o.Put[1]); err != nil {
				return err
			}
		case o.Remove != nil:
			p.m.Remove(*o.Remove)
		case o.Map != "":
			m := map[string]json.RawMessage{}
			for mk, v := range p.m.All() {
				m[mk] = v
			}
			emitObj(out, map[string]any{"tag": o.Map, "key": k, "m": m})
		case o.TSet != nil:
			if err := p.t.Update(o.TSet); err != nil {
				return err
			}
		case o.TGet != "":
			f := map[string]any{"tag": o.TGet, "key": k}
			if v, ok := p.t.GetOption(); ok {
				f["t"] = v
			}
			emitObj(out, f)
		case o.Clear != "":
			switch o.Clear {
			case "v":
				p.v.Clear()
			case "l":
				p.l.Clear()
			case "m":
				p.m.Clear()
			case "t":
				p.t.Clear()
			}
		case o.Reg != nil:
			if err := t.Register(*o.Reg); err != nil {
				return err
			}
		case o.Del != nil:
			if err := t.Delete(*o.Del); err != nil {
				return err
			}
		case o.Timers != "":
			ts := t.List()
			if ts == nil {
				ts = []int64{}
			}
			emitObj(out, map[string]any{"tag": o.Timers, "key": k, "timers": ts})
		case o.OnTimer != nil:
			if err := p.onTimer.Update(o.OnTimer); err != nil {
				return err
			}
		case o.Emit != nil:
			out.Emit(o.Emit)
		case o.EmitRaw != "":
			out.Emit(json.RawMessage(o.EmitRaw))
		case o.Fail != "":
			return errors.New(o.Fail)
		case o.Exit != nil:
			os.Exit(*o.Exit)
		case o.Clock != "":
			emitObj(out, map[string]any{"tag": o.Clock, "key": k, "wall_ns": time.Now().UnixNano()})
		case o.Random > 0:
			b := make([]byte, o.Random)
			rand.Read(b)
			emitObj(out, map[string]any{"tag": "random", "key": k, "hex": hex.EncodeToString(b)})
		}
	}
	return nil
}

func (p *probe) HandleInputRows(key groupstate.Key, rows iter.Seq[row], t *groupstate.Timers, out *groupstate.Emitter[json.RawMessage]) error {
	for r := range rows {
		if err := p.run(key, r.Ops, t, out); err != nil {
			return err
		}
	}
	return nil
}

func (p *probe) HandleExpiredTimer(key groupstate.Key, ts int64, t *groupstate.Timers, out *groupstate.Emitter[json.RawMessage]) error {
	emitObj(out, map[string]any{"tag": "timer", "key": json.RawMessage(key.JSON()), "ts": ts})
	var ops []op
	if raw, ok := p.onTimer.GetOption(); ok {
		if err := json.Unmarshal(raw, &ops); err != nil {
			return err
		}
	}
	return p.run(key, ops, t, out)
}

func init() { groupstate.Process[row, json.RawMessage](&probe{}) }

func main() {}
