package engine_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/internal/pybuild"
	"github.com/groupstate/groupstate/runtime/scenario"
)

// pyHandler exercises the Python runtime (issue 31): the standard library frozen into it,
// groupstate.config, the GroupState API and its errors, and failures that must fail only
// their group with the traceback as the error.
const pyHandler = `
import collections, dataclasses, datetime, decimal, functools, itertools, json, math, re, sys, typing
import groupstate
from helper import double

@dataclasses.dataclass
class Row:
    k: str
    n: int

def handle(key, rows, state):
    if key[0] == "str":
        return "abc"
    if key[0] == "list":
        return [{"k": "list"}, {"k": "list", "i": 2}]
    return _rows(key, rows, state)

def _rows(key, rows, state):
    k = key[0]
    if k == "boom":
        raise ValueError("boom " + groupstate.config["word"])
    if k == "exit":
        sys.exit(3)
    if k == "get":
        state.get
    if k == "none":
        state.update(None)
    if k == "duration":
        state.setTimeoutTimestamp(5)
    chunks = list(rows)
    n = sum(len(c) for c in chunks)
    seen = state.getOption or {"n": 0}
    state.update({"n": seen["n"] + n})
    yield {
        "k": k,
        "n": state.get["n"],
        "chunks": len(chunks),
        "double": double(n),
        "counter": collections.Counter("abca").most_common(1)[0][0],
        "date": datetime.datetime.fromtimestamp(state.getCurrentProcessingTimeMs() / 1000, datetime.timezone.utc).isoformat(),
        "dec": str(decimal.Decimal("1.10") + decimal.Decimal("2.205")),
        "re": re.sub(r"\d+", "#", "a1b22"),
        "json": json.loads('"\\n"') == "\n",
        "math": math.floor(math.pi * 100),
        "row": dataclasses.asdict(Row(k, n)),
        "reduce": functools.reduce(lambda a, b: a + b, itertools.chain([1], [2, 3])),
    }
    state.setTimeoutDuration("10s")
`

func TestPythonHandler(t *testing.T) {
	wasm, err := pybuild.Build(map[string][]byte{
		"handler.py": []byte(pyHandler),
		"helper.py":  []byte("def double(x):\n    return 2 * x\n"),
	}, "handler:handle")
	require(t, err)
	sp := specFromYAML(t, `
name: pytest
module: handler.wasm
input:
  subjects: ["in.>"]
key:
  field: k
timeout: processing_time
output:
  subject: out
on_error: dead_letter
config:
  word: bang
`)
	_, log, err := runSteps(t, scenario.Options{Spec: sp, Wasm: wasm}, stepsOf(t, `{"at": 1000, "rows": [{"k": "a"}, {"k": "boom"}, {"k": "exit"}, {"k": "a"}, {"k": "get"}, {"k": "none"}, {"k": "duration"}, {"k": "str"}, {"k": "list"}]}
{"expect": [{"k": "list"}, {"k": "list", "i": 2}, {"k": "a", "n": 2, "chunks": 1, "double": 4, "counter": "a", "date": "1970-01-01T00:00:01+00:00", "dec": "3.305", "re": "a#b#", "json": true, "math": 314, "row": {"k": "a", "n": 2}, "reduce": 6}]}
{"at": 2000, "rows": [{"k": "a"}]}
{"expect": [{"k": "a", "n": 3, "chunks": 1, "double": 2, "counter": "a", "date": "1970-01-01T00:00:02+00:00", "dec": "3.305", "re": "a#b#", "json": true, "math": 314, "row": {"k": "a", "n": 1}, "reduce": 6}]}
`))
	require(t, err, log)
	for _, want := range []string{
		`key="boom"`, `Traceback (most recent call last):`, `File \"handler.py\", line 21, in _rows`,
		`raise ValueError(\"boom \" + groupstate.config[\"word\"])`, `ValueError: boom bang`,
		`SystemExit: 3`,
		`TypeError: groupstate: the handler returned a str; yield output rows, or return a list of them`,
		`groupstate.GroupStateValueError: groupstate: state is either not defined or has already been removed`,
		`groupstate.GroupStateTypeError: groupstate: null is not a valid state value`,
		`groupstate.GroupStateRuntimeError: groupstate: cannot set timeout timestamp without event_time timeout`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("dead letters lack %s:\n%s", want, log)
		}
	}
}

// TestPythonInitFailure: a handler whose import fails (here at its first line) refuses the
// module with the traceback, as a failing gs_init does in every language.
func TestPythonInitFailure(t *testing.T) {
	wasm, err := pybuild.Build(map[string][]byte{
		"handler.py": []byte("raise RuntimeError('no config ' + repr(sorted(__import__('groupstate').config)))\n"),
	}, "handler:handle")
	require(t, err)
	sp := specFromYAML(t, `
name: pyinit
module: handler.wasm
input:
  subjects: ["in.>"]
key:
  field: k
config:
  a: 1
`)
	steps, err := scenario.Parse(strings.NewReader(`{"at": 1000, "rows": [{"k": "a"}]}` + "\n"))
	require(t, err)
	err = scenario.RunSteps(context.Background(), scenario.Options{
		Spec: sp, Wasm: wasm, Runtime: sharedRuntime(t), StateDir: t.TempDir(),
	}, steps)
	if err == nil || !strings.Contains(err.Error(), "module init failed") ||
		!strings.Contains(err.Error(), `File "handler.py", line 1, in <module>`) ||
		!strings.Contains(err.Error(), "RuntimeError: no config ['a']") {
		t.Fatalf("got %v, want the init to fail with the traceback", err)
	}
}

// pyStateHandler checks GroupState's rules under event-time timeouts: Spark's errors as Python
// exceptions of the builtin types PySpark's subclass, the last of update and remove winning,
// the watermark, and a timeout that fires with the state it was set with.
const pyStateHandler = `
import groupstate

def attempt(f, *args):
    try:
        f(*args)
        return "ok"
    except (ValueError, TypeError, RuntimeError) as e:
        return type(e).__name__ + ": " + str(e)

def handle(key, rows, state):
    if state.hasTimedOut:
        yield {"k": key[0], "timed_out": True, "state": state.getOption}
        return
    w = state.getCurrentWatermarkMs()
    out = {"k": key[0], "w": w, "rows": [r["ts"] for chunk in rows for r in chunk]}
    if key[0] == "a":
        out["get"] = attempt(lambda: state.get)
        out["none"] = attempt(state.update, None)
        out["nan"] = attempt(state.update, float("nan"))
        out["duration"] = attempt(state.setTimeoutDuration, "10s")
        out["zero"] = attempt(state.setTimeoutTimestamp, 0)
        out["bool"] = attempt(state.setTimeoutTimestamp, True)
        state.update({"n": 1})
        state.remove()
        out["removed"] = state.exists
        state.update({"n": 2})
        out["revived"] = state.get
        out["set"] = attempt(state.setTimeoutTimestamp, 25000)
    else:
        out["early"] = attempt(state.setTimeoutTimestamp, w - 1)
        state.remove()
    yield out
`

func TestPythonGroupState(t *testing.T) {
	wasm, err := pybuild.Build(map[string][]byte{"h.py": []byte(pyStateHandler)}, "h:handle")
	require(t, err)
	sp := specFromYAML(t, `
name: pystate
module: h.wasm
input:
  subjects: ["in.>"]
key:
  field: k
event_time:
  field: ts
  watermark_delay: 10s
timeout: event_time
output:
  subject: out
`)
	out, log, err := runSteps(t, scenario.Options{Spec: sp, Wasm: wasm}, stepsOf(t, `{"at": 1000, "rows": [{"k": "a", "ts": 20000}]}
{"expect": [{"k": "a", "w": 0, "rows": [20000], "get": "GroupStateValueError: groupstate: state is either not defined or has already been removed", "none": "GroupStateTypeError: groupstate: null is not a valid state value", "nan": "GroupStateTypeError: groupstate: encoding state: Out of range float values are not JSON compliant", "duration": "GroupStateRuntimeError: groupstate: cannot set timeout duration without processing_time timeout", "zero": "GroupStateValueError: groupstate: timeout timestamp must be positive", "bool": "GroupStateTypeError: groupstate: a timeout timestamp is an int of epoch milliseconds", "removed": false, "revived": {"n": 2}, "set": "ok"}]}
{"at": 2000, "rows": [{"k": "b", "ts": 40000}]}
{"expect": [{"k": "b", "w": 10000, "rows": [40000], "early": "GroupStateValueError: groupstate: timeout timestamp (9999) cannot be earlier than the current watermark (10000)"}, {"k": "a", "timed_out": true, "state": {"n": 2}}]}
`))
	require(t, err, out, log)
}

// TestPythonLoopInterrupted: a Python handler that never returns is stopped at the call time
// limit like any module (the host's loop-interrupt rewrite covers CPython's eval loop); its
// key fails, the other keys of the batch are not lost, and a new instance serves the next batch.
// The call limit (2 s) also bounds each new instance's start, the interpreter's included, so it
// leaves room for a start on a loaded machine (500 ms did not, once in a while).
func TestPythonLoopInterrupted(t *testing.T) {
	wasm, err := pybuild.Build(map[string][]byte{"h.py": []byte(`
def handle(key, rows, state):
    while key[0] == "loop":
        pass
    yield {"k": key[0]}
`)}, "h:handle")
	require(t, err)
	sp := specFromYAML(t, `
name: pyloop
module: h.wasm
input:
  subjects: ["in.>"]
key:
  field: k
output:
  subject: out
limits:
  call_timeout: 2s
  retry_timeout: 4s
`)
	_, log, err := runSteps(t, scenario.Options{Spec: sp, Wasm: wasm}, stepsOf(t, `{"at": 1000, "rows": [{"k": "a"}, {"k": "loop"}, {"k": "b"}]}
{"expect": [{"k": "a"}, {"k": "b"}]}
{"at": 2000, "rows": [{"k": "c"}]}
{"expect": [{"k": "c"}]}
`))
	require(t, err, log)
	if !strings.Contains(log, `key="loop"`) || !strings.Contains(log, "time limit") {
		t.Errorf("want the loop key dead-lettered for the time limit:\n%s", log)
	}
}

// TestPythonConfigDuration: a bad duration in the config fails the init with the field's name,
// as in the Go SDK.
func TestPythonConfigDuration(t *testing.T) {
	wasm, err := pybuild.Build(map[string][]byte{
		"h.py": []byte("import groupstate\nd = groupstate.config_duration_ms('idle_timeout')\ndef handle(key, rows, state):\n    yield {'d': d}\n"),
	}, "h:handle")
	require(t, err)
	sp := specFromYAML(t, `
name: pyconfig
module: h.wasm
input:
  subjects: ["in.>"]
key:
  field: k
config:
  idle_timeout: 10
`)
	steps, err := scenario.Parse(strings.NewReader(`{"at": 1000, "rows": [{"k": "a"}]}` + "\n"))
	require(t, err)
	for _, c := range []struct {
		cfg  any
		want string
	}{
		{"10", `groupstate: config idle_timeout: invalid duration '10'`},
		{"1m30s", ""},
		{true, `groupstate: config idle_timeout: a duration is a number of milliseconds`},
	} {
		cfg, want := c.cfg, c.want
		sp.Config = map[string]any{"idle_timeout": cfg}
		var out bytes.Buffer
		err = scenario.RunSteps(context.Background(), scenario.Options{
			Spec: sp, Wasm: wasm, Runtime: sharedRuntime(t), StateDir: t.TempDir(), Out: &out,
		}, steps)
		switch {
		case want == "" && (err != nil || strings.TrimSpace(out.String()) != `{"d":90000}`):
			t.Errorf("config %v: got %v, output %s, want {\"d\":90000}", cfg, err, out.String())
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("config %v: got %v, want an init failure with %q", cfg, err, want)
		}
	}
}
