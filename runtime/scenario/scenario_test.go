package scenario_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/runtime/scenario"
)

func TestParse(t *testing.T) {
	steps, err := scenario.Parse(strings.NewReader(`# a comment
{"at": 100, "rows": [{"k": 1}]}

{"at": 100}
{"restart": true}
{"expect": []}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 4 || *steps[0].At != 100 || len(steps[0].Rows) != 1 || steps[1].Rows != nil || !steps[2].Restart || steps[3].Expect == nil || steps[3].Line != 6 {
		t.Fatalf("steps %+v", steps)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"at": 5}` + "\n" + `{"at": 4}`, `line 2: "at" 4 is before the previous batch's 5`},
		{`{"at": -1}`, `"at" must not be negative`},
		{`{"at": 1.5}`, `"at" must be an integer`},
		{`{"rows": []}`, `"rows" without "at"`},
		{`{"inputs": []}`, `"inputs" without "at"`},
		{`{"at": 1, "rows": [], "inputs": []}`, `"rows" or "inputs", not both`},
		{`{"at": 1, "inputs": [{"rows": []}]}`, `has no "name"`},
		{`{"at": 1, "inputs": [{"name": "a", "row": []}]}`, `"inputs" must be an array of`},
		{`{"at": 1, "inputs": {}}`, `"inputs" must be an array of`},
		{`{"at": 1, "expect": []}`, "exactly one of"},
		{`{}`, "exactly one of"},
		{`{"restart": false}`, `"restart" must be true`},
		{`{"drain": false}`, `"drain" must be true`},
		{`{"drain": true, "at": 5}`, "exactly one of"},
		{`{"at": 1}` + "\n" + `{"drain": true}` + "\n" + `{"expect": []}` + "\n" + `{"at": 2}`, `line 4: a step after the drain on line 2`},
		{`{"drain": true}` + "\n" + `{"restart": true}`, `line 2: a step after the drain on line 1`},
		{`{"expect": {}}`, `"expect" must be an array`},
		{`{"at": 1, "rows": {}}`, `"rows" must be an array`},
		{`{"at": 1, "row": []}`, `unknown field "row"`},
		{`[1]`, "not a JSON object"},
		{`{"at": 1`, "line 1: not a JSON object"},
	}
	for _, tc := range tests {
		_, err := scenario.Parse(strings.NewReader(tc.in))
		if !errors.Is(err, scenario.ErrInvalidStep) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s):\n  err  %v\n  want ErrInvalidStep containing %q", tc.in, err, tc.want)
		}
	}
}

func raw(s ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(s))
	for i, v := range s {
		out[i] = json.RawMessage(v)
	}
	return out
}

func TestDiff(t *testing.T) {
	tests := []struct {
		want, got []json.RawMessage
		diff      string // "" for equal, else a substring of the report
	}{
		{raw(`{"a":1,"b":2}`, `{"c":3}`), raw(`{"c":3}`, `{"b":2,"a":1.0}`), ""},
		{nil, nil, ""},
		{raw(`{"a":1}`, `{"a":1}`), raw(`{"a":1}`), `- missing:    {"a":1}`},
		{raw(`{"a":1}`), raw(`{"a":1}`, `{"a":2}`), `+ unexpected: {"a":2}`},
		{raw(`{"a":"1"}`), raw(`{"a":1}`), `- missing:    {"a":"1"}`},
		{raw(`{"a":[1,2]}`), raw(`{"a":[2,1]}`), "unexpected"},
	}
	for _, tc := range tests {
		d := scenario.Diff(tc.want, tc.got)
		if (tc.diff == "") != (d == "") || !strings.Contains(d, tc.diff) {
			t.Errorf("Diff(%s, %s) = %q, want %q", tc.want, tc.got, d, tc.diff)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"at": 1, "rows": [{"k": 1}]}` + "\n" + `{"expect": [{"x": 1}]}` + "\n" + `{"restart": true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = scenario.Parse(strings.NewReader(string(b)))
	})
}
