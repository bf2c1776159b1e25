// Command v2echo is the Go SDK's ABI v2 (transformWithState) fixture: it emits each row as it
// comes and keeps it in a list, counts a key's rows in a value, and registers a timer one
// second after each data call; when a timer fires it emits the key's kept rows again, in
// order, and clears them. TestWasmFixtures builds it and runs it in wazero against the SDK's
// test host.
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o v2echo.wasm ./sdk/go/testdata/v2echo
package main

import (
	"encoding/json"
	"iter"

	groupstate "github.com/groupstate/groupstate/sdk/go"
)

type echo struct {
	count *groupstate.ValueState[int]
	rows  *groupstate.ListState[json.RawMessage]
}

func (p *echo) Init(h *groupstate.ProcessorHandle) error {
	p.count = groupstate.NewValueState[int](h, "count")
	p.rows = groupstate.NewListState[json.RawMessage](h, "rows")
	return nil
}

func (p *echo) HandleInputRows(key groupstate.Key, rows iter.Seq[json.RawMessage], t *groupstate.Timers, out *groupstate.Emitter[json.RawMessage]) error {
	n, _ := p.count.GetOption()
	for r := range rows {
		n++
		if err := p.rows.Append(r); err != nil {
			return err
		}
		out.Emit(r)
	}
	if err := p.count.Update(n); err != nil {
		return err
	}
	return t.Register(t.CurrentProcessingTimeMs() + 1000)
}

func (p *echo) HandleExpiredTimer(key groupstate.Key, ts int64, t *groupstate.Timers, out *groupstate.Emitter[json.RawMessage]) error {
	for r := range p.rows.All() {
		out.Emit(r)
	}
	p.rows.Clear()
	return nil
}

func init() { groupstate.Process(&echo{}) }

func main() {}
