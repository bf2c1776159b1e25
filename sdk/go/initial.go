package groupstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/groupstate/groupstate/abi"
)

// applyInitialState is the default of [InitialStateHandler]: it sets each declared variable
// named in the JSON object initial (a value to its JSON value, a list to the elements of its
// array, a map to the entries of its object). Variables not named are left alone, and a JSON
// null is the same as not named. A name that is not declared, a null element or map value, or
// a value that does not decode into the variable's type fails the call.
func (e *v2Module) applyInitialState(initial []byte) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(initial, &obj); err != nil || obj == nil {
		return fmt.Errorf("groupstate: initial state is not a JSON object of state variables: %s", initial)
	}
	var unknown []string
	for name := range obj {
		if e.varIndex(name) < 0 {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		names := make([]string, len(e.vars))
		for i, v := range e.vars {
			names[i] = v.decl.Name
		}
		return fmt.Errorf("groupstate: initial state names undeclared state variables %q (declared: %s)",
			unknown, strings.Join(names, ", "))
	}
	w := &e.ops // a failing call's ops are not sent
	for i, v := range e.vars {
		raw, ok := obj[v.decl.Name]
		if !ok || isJSONNull(raw) {
			continue
		}
		idx := uint32(i)
		name := v.decl.Name
		switch v.decl.Kind {
		case abi.VarValue:
			b, err := initialValue(v, raw)
			if err != nil {
				return fmt.Errorf("groupstate: initial state of %s: %w", name, err)
			}
			w.ValueSet(idx, b)
		case abi.VarList:
			var elems []json.RawMessage
			if err := json.Unmarshal(raw, &elems); err != nil {
				return fmt.Errorf("groupstate: initial state of list %s: want a JSON array, got %s", name, raw)
			}
			bs := make([][]byte, len(elems))
			for j, el := range elems {
				b, err := initialValue(v, el)
				if err != nil {
					return fmt.Errorf("groupstate: initial state of list %s: element %d: %w", name, j, err)
				}
				bs[j] = b
			}
			w.ListPut(idx, bs...)
		case abi.VarMap:
			var entries map[string]json.RawMessage
			if err := json.Unmarshal(raw, &entries); err != nil {
				return fmt.Errorf("groupstate: initial state of map %s: want a JSON object, got %s", name, raw)
			}
			keys := make([]string, 0, len(entries))
			for k := range entries {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			w.MapClear(idx)
			for _, k := range keys {
				b, err := initialValue(v, entries[k])
				if err != nil {
					return fmt.Errorf("groupstate: initial state of map %s: key %q: %w", name, k, err)
				}
				w.MapSet(idx, []byte(k), b)
			}
		}
	}
	e.gen++ // the handles' caches predate these writes
	return nil
}

// initialValue returns the compact JSON of one value of the initial state, checked against
// the variable's type.
func initialValue(v varInfo, raw json.RawMessage) ([]byte, error) {
	if isJSONNull(raw) {
		return nil, ErrNullState
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if err := v.check(b); err != nil {
		return nil, err
	}
	return b, nil
}

func isJSONNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// varIndex returns the index of the variable named name, or -1.
func (e *v2Module) varIndex(name string) int {
	for i, v := range e.vars {
		if v.decl.Name == name {
			return i
		}
	}
	return -1
}
