package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"testing"

	"github.com/groupstate/groupstate/abi"
	groupstate "github.com/groupstate/groupstate/sdk/go"
)

// keyEcho is a natively built module that emits each group's key and row count.
func keyEcho(t *testing.T) *groupstate.Module {
	t.Helper()
	m := groupstate.NewModule()
	groupstate.HandleTyped(m, func(key groupstate.Key, rows iter.Seq[json.RawMessage], _ *groupstate.GroupState[int], out *groupstate.Emitter[string]) error {
		n := 0
		for range rows {
			n++
		}
		out.Emit(fmt.Sprintf("%s:%d", key.JSON(), n))
		return nil
	})
	in := abi.AppendInit(nil, abi.Init{ABIVersion: abi.Version, Name: []byte("t"), Config: []byte("{}")})
	if st, msg, err := abi.ParseInitResult(m.Init(in)); err != nil || st != abi.StatusOK {
		t.Fatalf("init: %v %s", err, msg)
	}
	return m
}

// TestNativeSplitsCalls: with several modules, a call's groups are split among them and
// every group's result lands at its own index, whatever the number of groups.
func TestNativeSplitsCalls(t *testing.T) {
	for _, c := range []struct{ mods, groups int }{{1, 3}, {2, 3}, {2, 1000}, {3, 1001}, {4, 300}} {
		t.Run(fmt.Sprintf("%d modules %d groups", c.mods, c.groups), func(t *testing.T) {
			mods := make([]BufferModule, c.mods)
			for i := range mods {
				mods[i] = keyEcho(t)
			}
			n := NewNative(mods...)
			call := &Call{ProcessingTimeMs: 1}
			for i := range c.groups {
				rows := make([][]byte, i%3+1)
				for j := range rows {
					rows[j] = []byte(`{}`)
				}
				call.Groups = append(call.Groups, Group{Key: fmt.Appendf(nil, `"k%d"`, i), Rows: rows})
			}
			results := make([]Result, c.groups)
			if err := n.Process(context.Background(), call, results); err != nil {
				t.Fatal(err)
			}
			for i, r := range results {
				want := fmt.Sprintf(`"\"k%d\":%d"`, i, i%3+1)
				if r.Err != nil || len(r.Emits) != 1 || string(r.Emits[0]) != want {
					t.Fatalf("group %d: %v %q, want %s", i, r.Err, r.Emits, want)
				}
			}
		})
	}
}
