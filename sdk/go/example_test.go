package groupstate_test

import (
	"encoding/json"
	"fmt"
	"iter"

	"github.com/groupstate/groupstate/abi"
	groupstate "github.com/groupstate/groupstate/sdk/go"
)

// Example runs a typed handler natively: it counts logins per user, as a module would in a
// deployment, by feeding the Module ABI buffers like the host does.
func Example() {
	type login struct{}
	type count struct {
		N int `json:"n"`
	}
	type total struct {
		User  json.RawMessage `json:"user"`
		Total int             `json:"total"`
	}

	m := groupstate.NewModule()
	groupstate.HandleTyped(m, func(key groupstate.Key, rows iter.Seq[login], state *groupstate.GroupState[count], out *groupstate.Emitter[total]) error {
		c, _ := state.GetOption()
		for range rows {
			c.N++
		}
		out.Emit(total{User: key.JSON(), Total: c.N})
		return state.Update(c)
	})
	m.Init(abi.AppendInit(nil, abi.Init{ABIVersion: abi.Version, Name: []byte("logins"), Config: []byte("{}")}))

	in := abi.AppendProcessHeader(nil, abi.ProcessHeader{GroupCount: 2, ProcessingTimeMs: 1000})
	in = abi.AppendGroup(in, 0, []byte(`"alice"`), nil, [][]byte{[]byte(`{}`), []byte(`{}`)})
	in = abi.AppendGroup(in, abi.GroupStateExists, []byte(`7`), []byte(`{"n":4}`), [][]byte{[]byte(`{}`)})

	rr, _ := abi.NewResultReader(m.Process(in))
	var g abi.GroupResult
	for {
		ok, err := rr.Next(&g)
		if !ok || err != nil {
			break
		}
		for row := range g.Emits() {
			fmt.Printf("emit %s, state %s\n", row, g.State)
		}
	}
	// Output:
	// emit {"user":"alice","total":2}, state {"n":2}
	// emit {"user":7,"total":5}, state {"n":5}
}
