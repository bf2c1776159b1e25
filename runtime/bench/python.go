package bench

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/groupstate/groupstate/internal/pybuild"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// pyCountV1 and pyCountV2 are testdata/v2count's work in Python: count each user's rows and
// emit the total once a batch, with the count handed in and out with the group (ABI v1,
// PySpark's GroupState) or read and written through a value state variable (ABI v2,
// PySpark's StatefulProcessor).
const (
	pyCountV1 = `
def handle(key, rows, state):
    n = (state.getOption or {"login_count": 0})["login_count"] + sum(len(c) for c in rows)
    state.update({"login_count": n})
    yield {"user_id": key[0], "total_logins": n}
`
	pyCountV2 = `
from groupstate import StatefulProcessor

class Count(StatefulProcessor):
    def init(self, handle):
        self.count = handle.getValueState("count", "login_count long")

    def handleInputRows(self, key, rows, timerValues):
        n = (self.count.get() or {"login_count": 0})["login_count"] + len(rows)
        self.count.update({"login_count": n})
        yield {"user_id": key[0], "total_logins": n}
`
)

// pythonABI runs the same counting per key as a Python function (ABI v1) and as a Python
// StatefulProcessor (ABI v2) through the engine, keys keys and rows rows each, and returns
// their rows/s.
func pythonABI(ctx context.Context, dir string, keys, rows int, logger *slog.Logger) (v1, v2 float64, err error) {
	var rps [2]float64
	for i, src := range []string{pyCountV1, pyCountV2} {
		wasm, err := pybuild.Build(map[string][]byte{"count.py": []byte(src)}, "count")
		if err != nil {
			return 0, 0, err
		}
		settle()
		if rps[i], err = engineCount(ctx, filepath.Join(dir, fmt.Sprint("v", i+1)), wasm, keys, rows, logger); err != nil {
			return 0, 0, err
		}
	}
	return rps[0], rps[1], nil
}

// instanceStart measures how long a running host takes to make one more instance of the
// logincount module wasm, whose code it has compiled already: instantiation, _initialize (for
// Python, the interpreter's start and the handler's import), gs_abi_version and gs_init, then
// a call of one group (microseconds, next to the rest). It returns the median of runs starts,
// in milliseconds.
func instanceStart(ctx context.Context, wasm []byte, runs int, logger *slog.Logger) (float64, error) {
	h, err := logincountHost(ctx, wasm, logger)
	if err != nil {
		return 0, err
	}
	defer h.Close(ctx)
	call := &handler.Call{ProcessingTimeMs: 1000, Groups: []handler.Group{{
		Key: []byte(`"user-1"`), Rows: [][]byte{[]byte(`{"user_id":"user-1","ts":1700000000000}`)}}}}
	res := make([]handler.Result, 1)
	ms := make([]float64, 0, runs)
	for range runs {
		h.Release(ctx) // the next call makes a new instance
		t0 := time.Now()
		if err := h.Process(ctx, call, res); err != nil {
			return 0, err
		}
		ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
		if res[0].Err != nil {
			return 0, res[0].Err
		}
	}
	slices.Sort(ms)
	return ms[len(ms)/2], nil
}
