package state

import (
	"fmt"
	"testing"
)

func TestDbgCache(t *testing.T) {
	s, err := Open(t.TempDir(), &Options{Logger: quietLogger()})
	requireNoError(t, err)
	defer s.Close()
	d := s.Deployment("bench")
	value := make([]byte, 64)
	for start, id := 0, uint64(1); start < 100000; start, id = start+10_000, id+1 {
		batch := d.NewBatch(id)
		for i := start; i < start+10_000; i++ {
			batch.Set([]byte(fmt.Sprintf(`"user-%08d"`, i)), Entry{}, Entry{Value: value, HasValue: true, TimeoutMs: int64(i)})
		}
		requireNoError(t, batch.Commit())
	}
	requireNoError(t, s.db.Flush())
	for n := 0; n < 100000; n++ {
		_, _, err := d.Get([]byte(fmt.Sprintf(`"user-%08d"`, (n*7919)%100000)))
		requireNoError(t, err)
	}
	m := s.db.Metrics()
	t.Logf("%s", m.String())
}
