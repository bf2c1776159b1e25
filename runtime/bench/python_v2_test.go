package bench

import (
	"context"
	"testing"

	"github.com/groupstate/groupstate/internal/pybuild"
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

// BenchmarkPythonABIv2: the same counting per key as a Python ABI v1 function and as a Python
// ABI v2 StatefulProcessor, 10k keys and 100k rows through the engine (the Python figures of
// BenchmarkABIv2, smaller because Python is slower).
func BenchmarkPythonABIv2(b *testing.B) {
	v1, err := pybuild.Build(map[string][]byte{"count.py": []byte(pyCountV1)}, "count")
	if err != nil {
		b.Fatal(err)
	}
	v2, err := pybuild.Build(map[string][]byte{"count.py": []byte(pyCountV2)}, "count")
	if err != nil {
		b.Fatal(err)
	}
	var r1, r2 float64
	for b.Loop() {
		if r1, err = engineCount(context.Background(), b.TempDir(), v1, 10_000, 100_000, quiet); err != nil {
			b.Fatal(err)
		}
		if r2, err = engineCount(context.Background(), b.TempDir(), v2, 10_000, 100_000, quiet); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(r1, "v1-rows/s")
	b.ReportMetric(r2, "v2-rows/s")
	b.ReportMetric(r2/r1, "ratio")
}
