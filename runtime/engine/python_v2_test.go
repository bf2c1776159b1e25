package engine_test

import (
	"strings"
	"testing"

	"github.com/groupstate/groupstate/internal/pybuild"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/scenario"
)

// pyProcessor exercises the Python SDK's ABI v2 (issue 31): Spark 4's StatefulProcessor with
// value, list (TTL) and map state, timers (a timer deleted by an earlier timer of the same
// call does not fire), the initial state (the default for key "init", an override for key
// "own"), declaration errors at init, answers larger than the SDK's buffer, and failures that
// fail their group with the traceback.
const pyProcessor = `
import groupstate
from groupstate import StatefulProcessor, StatefulProcessorHandle

def err(f):
    try:
        f()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return "no error"

class P(StatefulProcessor):
    def init(self, handle):
        assert isinstance(handle, StatefulProcessorHandle)
        self.h = handle
        self.v = handle.getValueState("v", "n long")
        self.l = handle.getListState("l", None, ttlDurationMs="5s")
        self.m = handle.getMapState("m", "k string", "v long")
        self.big = handle.getListState("big")
        self.errs = {
            "dup": err(lambda: handle.getValueState("v")),
            "name": err(lambda: handle.getListState("Bad")),
            "ttl": err(lambda: handle.getMapState("x", ttlDurationMs=0)),
        }

    def handleInputRows(self, key, rows, timerValues):
        k = key[0]
        T = timerValues.getCurrentProcessingTimeInMs()
        n = len(rows)
        rows = list(rows)
        if k == "boom":
            self.v.update({"n": 1})
            raise ValueError("boom")
        if k == "big":
            self.big.appendValue("x" * 100000)
            self.big.appendValue("y")
            yield {"k": k, "big": [len(s) for s in self.big.get()]}
            return
        if k == "own":
            yield {"k": k, "v": self.v.get()}
            return
        if k == "init":
            yield {"k": k, "v": self.v.get(), "l": list(self.l.get()), "m": dict(self.m.iterator())}
            return
        out = {"k": k, "n": n, "v0": self.v.get(), "exists0": self.v.exists()}
        self.v.update({"n": n})
        out["v1"] = self.v.get()
        self.l.appendValue(T)
        self.l.appendList([T + 1, {"t": T + 2}])
        out["l"] = list(self.l.get())
        for mk, mv in (("x", 1), ("\u00e9", 2), ("b", 3)):
            self.m.updateValue(mk, mv)
        self.m.removeKey("b")
        out["m"] = [list(e) for e in self.m.iterator()]
        out["keys"] = list(self.m.keys())
        out["values"] = list(self.m.values())
        out["has"] = [self.m.containsKey("x"), self.m.containsKey("b"), self.m.getValue("b")]
        for ts in (T + 3000, T + 4000, T + 5000):
            self.h.registerTimer(ts)
        out["timers"] = list(self.h.listTimers())
        out["errs"] = dict(self.errs)
        out["errs"]["none"] = err(lambda: self.v.update(None))
        out["errs"]["key"] = err(lambda: self.m.updateValue(1, 1))
        out["errs"]["declare"] = err(lambda: self.h.getValueState("late"))
        out["errs"]["ts"] = err(lambda: self.h.registerTimer("soon"))
        yield out

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        ts = expiredTimerInfo.getExpiryTimeInMs()
        if ts == 4000:
            self.h.deleteTimer(5000)
        yield {"k": key[0], "timer": ts, "T": timerValues.getCurrentProcessingTimeInMs(),
               "l": list(self.l.get()), "left": list(self.h.listTimers())}

    def handleInitialState(self, key, initialState, timerValues):
        if key[0] == "own":
            self.v.update({"own": initialState["v"]})
            yield {"k": "own", "initial": initialState}
        else:
            super().handleInitialState(key, initialState, timerValues)
`

// TestPythonProcessor runs a processor that uses every kind of state, timers, an initial
// state and failing groups, twice: with the glue running calls of DATA groups in C (what
// modules do) and with every call in the groupstate package's _process_v2 (the definition
// the C path follows); both give the expected rows and the same dead letters.
func TestPythonProcessor(t *testing.T) {
	var logs []string
	for _, inC := range []bool{true, false} {
		src := pyProcessor
		if !inC {
			src += "\nimport groupstate.stateful_processor\ngroupstate.stateful_processor._c_data_calls = False\n"
		}
		logs = append(logs, runPythonProcessor(t, src))
	}
	if logs[0] != logs[1] {
		t.Errorf("dead letters differ between the C and the Python paths:\nC:\n%s\nPython:\n%s", logs[0], logs[1])
	}
}

// runPythonProcessor runs TestPythonProcessor's scenario with the processor of source src and
// returns its dead letters' log.
func runPythonProcessor(t *testing.T, src string) string {
	t.Helper()
	wasm, err := pybuild.Build(map[string][]byte{"proc.py": []byte(src)}, "proc")
	require(t, err)
	sp := specFromYAML(t, `
name: pyproc
module: proc.wasm
input:
  subjects: ["in.>"]
key:
  field: k
timeout: processing_time
output:
  subject: out
on_error: dead_letter
`)
	initial, err := engine.ParseInitialState(strings.NewReader(`{"key": "init", "state": {"v": {"n": 7}, "l": [1, 2], "m": {"b": 2, "a": 1}}}
{"key": "own", "state": {"v": 5}}
`))
	require(t, err)
	steps := stepsOf(t, `{"at": 1000, "rows": [{"k": "a"}, {"k": "a"}, {"k": "boom"}, {"k": "big"}, {"k": "init"}, {"k": "own"}]}
{"expect": [{"k": "own", "initial": {"v": 5}}, {"k": "a", "n": 2, "v0": null, "exists0": false, "v1": {"n": 2}, "l": [1000, 1001, {"t": 1002}], "m": [["x", 1], ["\u00e9", 2]], "keys": ["x", "\u00e9"], "values": [1, 2], "has": [true, false, null], "timers": [4000, 5000, 6000], "errs": {"dup": "GroupStateValueError: groupstate: getValueState('v'): declared twice", "name": "GroupStateValueError: groupstate: getListState('Bad'): a name is 1-64 characters of a-z, 0-9 and _, starting with a letter a-z", "ttl": "GroupStateValueError: groupstate: ttlDurationMs must be positive", "none": "GroupStateTypeError: groupstate: null is not a valid state value", "key": "GroupStateTypeError: groupstate: a map key is a str, not int", "declare": "GroupStateRuntimeError: groupstate: getValueState('late') outside the processor's init", "ts": "GroupStateTypeError: groupstate: a timer is an int of epoch milliseconds"}}, {"k": "big", "big": [100000, 1]}, {"k": "init", "v": {"n": 7}, "l": [1, 2], "m": {"a": 1, "b": 2}}, {"k": "own", "v": {"own": 5}}]}
{"at": 10000, "rows": []}
{"expect": [{"k": "a", "timer": 4000, "T": 10000, "l": [], "left": []}, {"k": "a", "timer": 6000, "T": 10000, "l": [], "left": []}]}
`)
	out, log, err := runSteps(t, scenario.Options{Spec: sp, Wasm: wasm, InitialState: initial}, withRestarts(steps))
	require(t, err, out, log)
	for _, want := range []string{
		`key="boom"`, `Traceback (most recent call last):`, `File \"proc.py\", line 33, in handleInputRows`,
		`ValueError: boom`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("dead letters lack %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "_process_v2") {
		t.Errorf("the traceback shows the SDK's frames:\n%s", log)
	}
	return log
}

// TestPythonProcessorNoTimeout: under timeout none a processor's timers are refused
// (registerTimer raises, listTimers is empty), and an exception in init refuses the module
// with its traceback.
func TestPythonProcessorNoTimeout(t *testing.T) {
	const src = `
import groupstate

class P(groupstate.StatefulProcessor):
    def init(self, handle):
        if groupstate.config.get("fail"):
            raise RuntimeError("init failed: " + repr(handle.inputs))
        self.h = handle

    def handleInputRows(self, key, rows, timerValues):
        try:
            self.h.registerTimer(5)
            reg = "no error"
        except groupstate.GroupStateRuntimeError as e:
            reg = str(e)
        yield {"k": key[0], "register": reg, "timers": list(self.h.listTimers()),
               "w": timerValues.getCurrentWatermarkInMs()}
`
	wasm, err := pybuild.Build(map[string][]byte{"p.py": []byte(src)}, "p")
	require(t, err)
	const specText = `
name: pynotimeout
module: p.wasm
input:
  subjects: ["in.>"]
key:
  field: k
output:
  subject: out
`
	steps := stepsOf(t, `{"at": 1000, "rows": [{"k": "a"}]}
{"expect": [{"k": "a", "register": "groupstate: timers need timeout processing_time or event_time in the deployment spec", "timers": [], "w": 0}]}
`)
	_, log, err := runSteps(t, scenario.Options{Spec: specFromYAML(t, specText), Wasm: wasm}, steps)
	require(t, err, log)

	_, _, err = runSteps(t, scenario.Options{Spec: specFromYAML(t, specText+"config:\n  fail: true\n"), Wasm: wasm}, steps)
	if err == nil || !strings.Contains(err.Error(), "module init failed") ||
		!strings.Contains(err.Error(), `File "p.py", line 7, in init`) ||
		!strings.Contains(err.Error(), "RuntimeError: init failed: []") {
		t.Fatalf("got %v, want the init to fail with the traceback", err)
	}
}

// TestPythonProcessorCloseNotPerBatch: close() is not called after a call or a batch either
// (the instance's processor goes on from batch to batch): the count of close calls the
// instances report stays 0. And getQueryInfo() raises, saying it is not supported, and the
// objects of the start are frozen out of the garbage collector's sight (gc.freeze).
func TestPythonProcessorCloseNotPerBatch(t *testing.T) {
	const src = `
import gc
import groupstate
from groupstate import StatefulProcessor

closes = 0

class P(StatefulProcessor):
    def init(self, handle):
        try:
            handle.getQueryInfo()
            self.qi = "no error"
        except groupstate.GroupStateRuntimeError as e:
            self.qi = str(e)

    def handleInputRows(self, key, rows, timerValues):
        yield {"k": key[0], "closes": closes, "qi": self.qi, "frozen": gc.get_freeze_count() > 0}

    def close(self):
        global closes
        closes += 1
`
	wasm, err := pybuild.Build(map[string][]byte{"p.py": []byte(src)}, "p")
	require(t, err)
	steps := stepsOf(t, `{"at": 1000, "rows": [{"k": "a"}, {"k": "b"}]}
{"expect": [{"k": "a", "closes": 0, "qi": "groupstate: getQueryInfo is not supported: the runtime gives a module no query, run or batch id (groupstate.deployment is the deployment's name)", "frozen": true}, {"k": "b", "closes": 0, "qi": "groupstate: getQueryInfo is not supported: the runtime gives a module no query, run or batch id (groupstate.deployment is the deployment's name)", "frozen": true}]}
{"at": 2000, "rows": [{"k": "a"}]}
{"expect": [{"k": "a", "closes": 0, "qi": "groupstate: getQueryInfo is not supported: the runtime gives a module no query, run or batch id (groupstate.deployment is the deployment's name)", "frozen": true}]}
{"at": 3000, "rows": [{"k": "b"}, {"k": "a"}]}
{"expect": [{"k": "b", "closes": 0, "qi": "groupstate: getQueryInfo is not supported: the runtime gives a module no query, run or batch id (groupstate.deployment is the deployment's name)", "frozen": true}, {"k": "a", "closes": 0, "qi": "groupstate: getQueryInfo is not supported: the runtime gives a module no query, run or batch id (groupstate.deployment is the deployment's name)", "frozen": true}]}
`)
	_, log, err := runSteps(t, scenario.Options{
		Spec: specFromYAML(t, `
name: pyclose
module: p.wasm
input:
  subjects: ["in.>"]
key:
  field: k
output:
  subject: out
`), Wasm: wasm,
	}, steps)
	require(t, err, log)
}

// TestPythonProcessorFailedGroups: a processor's groups that fail in the SDK's hands (a
// returned dict, output rows json cannot encode, a SystemExit) fail alone, with the same dead
// letters whether the glue runs the call in C or the package's _process_v2 does.
func TestPythonProcessorFailedGroups(t *testing.T) {
	const proc = `
from groupstate import StatefulProcessor

class P(StatefulProcessor):
    def handleInputRows(self, key, rows, timerValues):
        k = key[0]
        if k == "dict":
            return {"k": k}
        if k == "nan":
            return [{"k": k}, {"x": float("nan")}]
        if k == "set":
            return iter([{"s": {1}}])
        if k == "exit":
            raise SystemExit(3)
        return [{"k": k, "n": len(rows)}]
`
	sp := specFromYAML(t, `
name: pyfail
module: proc.wasm
input:
  subjects: ["in.>"]
key:
  field: k
output:
  subject: out
on_error: dead_letter
`)
	var logs []string
	for _, inC := range []bool{true, false} {
		src := proc
		if !inC {
			src += "\nimport groupstate.stateful_processor\ngroupstate.stateful_processor._c_data_calls = False\n"
		}
		wasm, err := pybuild.Build(map[string][]byte{"proc.py": []byte(src)}, "proc")
		require(t, err)
		out, log, err := runSteps(t, scenario.Options{Spec: sp, Wasm: wasm}, stepsOf(t, `{"at": 1000, "rows": [{"k": "dict"}, {"k": "nan"}, {"k": "set"}, {"k": "exit"}, {"k": "ok"}, {"k": "ok"}]}
{"expect": [{"k": "ok", "n": 2}]}
`))
		require(t, err, out, log)
		for _, want := range []string{
			"GroupStateTypeError: groupstate: the processor returned a dict; yield output rows, or return a list of them",
			"GroupStateTypeError: groupstate: encoding an output row: Out of range float values are not JSON compliant",
			"GroupStateTypeError: groupstate: encoding an output row: Object of type set is not JSON serializable",
			"SystemExit: 3",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("c=%v: dead letters lack %q:\n%s", inC, want, log)
			}
		}
		logs = append(logs, log)
	}
	if logs[0] != logs[1] {
		t.Errorf("dead letters differ between the C and the Python paths:\nC:\n%s\nPython:\n%s", logs[0], logs[1])
	}
}
