package scenario_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/procmem"
	"github.com/groupstate/groupstate/runtime/scenario"
	"github.com/groupstate/groupstate/runtime/spec"
)

// manyKeys is a scenario over keys distinct keys, generated as it is read: batches of
// perBatch logins of new users 1 ms apart, then one batch a minute later that fires the
// timeouts of them all (logincount's idle_timeout is 10 s). It is an io.ReadSeeker that can
// only seek to its start, as scenario.Run needs.
type manyKeys struct {
	keys, perBatch, next int
	at                   int64
	done                 bool
	buf                  bytes.Buffer
}

func (m *manyKeys) Read(p []byte) (int, error) {
	for m.buf.Len() == 0 {
		switch {
		case m.done:
			return 0, io.EOF
		case m.next >= m.keys:
			fmt.Fprintf(&m.buf, `{"at": %d, "rows": []}`+"\n", m.at+60000)
			m.done = true
		default:
			fmt.Fprintf(&m.buf, `{"at": %d, "rows": [`, m.at)
			for i := m.next; i < min(m.next+m.perBatch, m.keys); i++ {
				if i > m.next {
					m.buf.WriteByte(',')
				}
				m.buf.WriteString(`{"user_id": "u`)
				m.buf.WriteString(strconv.Itoa(i))
				m.buf.WriteString(`"}`)
			}
			m.buf.WriteString("]}\n")
			m.next += m.perBatch
			m.at++
		}
	}
	return m.buf.Read(p)
}

func (m *manyKeys) Seek(offset int64, whence int) (int64, error) {
	switch {
	case offset == 0 && whence == io.SeekStart:
		m.next, m.at, m.done = 0, 1000, false
		m.buf.Reset()
		return 0, nil
	case offset == 0 && whence == io.SeekCurrent && m.next == 0 && m.buf.Len() == 0:
		return 0, nil
	}
	return 0, errors.New("manyKeys: seeks only to its start")
}

// peakHeap samples the heap's live and not yet collected objects every few milliseconds
// until stop is called, which returns the largest sample in bytes.
func peakHeap() (stop func() uint64) {
	var peak uint64
	done, finished := make(chan struct{}), make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(finished)
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() uint64 {
		once.Do(func() { close(done); <-finished })
		return peak
	}
}

// BenchmarkManyKeys runs `groupstate test`'s harness (scenario.Run) on logincount over N
// distinct keys, then one batch that fires all their timeouts (issue 30, item 5), and reports
// the peak of the Go heap and the process's peak RSS over the run: both stay level as N
// grows (the bounded caches: the hot-state cache, Pebble's memtables and block cache), where
// they grew with N when the harness held the parsed scenario and every output. Run the big
// ones with -bench 'ManyKeys/keys=1000000' -benchtime 1x.
func BenchmarkManyKeys(b *testing.B) {
	sp, _, err := spec.LoadSpec("../../samples/logincount/logincount.yaml")
	if err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile("../../samples/logincount/go/logincount.wasm")
	if err != nil {
		b.Fatal(err)
	}
	for _, keys := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			var heap, rss uint64
			for b.Loop() {
				runtime.GC()
				canRSS := procmem.ResetPeak()
				stop := peakHeap()
				var out countWriter
				err := scenario.Run(context.Background(), scenario.Options{Spec: sp, Wasm: wasm, Out: &out},
					&manyKeys{keys: keys, perBatch: sp.Trigger.MaxRows, at: 1000})
				heap = max(heap, stop())
				if canRSS {
					rss = max(rss, procmem.PeakRSS())
				}
				if err != nil {
					b.Fatal(err)
				}
				if out.lines != 2*keys {
					b.Fatalf("%d rows emitted, want %d (a count and a close per key)", out.lines, 2*keys)
				}
			}
			b.ReportMetric(float64(heap)/(1<<20), "peak-heap-MB")
			if rss > 0 {
				b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MB")
			}
			b.ReportMetric(float64(keys), "keys")
		})
	}
}

// countWriter counts the lines written to it.
type countWriter struct{ lines int }

func (c *countWriter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}
