package service

import (
	"fmt"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/registry"
)

// TestRetriesKeepEvery: the retry set keeps one retry per deployment however many are asked
// before the loop drains it (a 16-slot channel dropped the rest), joins the retries of one
// deployment (the earlier time wins; of two revisions, the later record), and hands out
// only those due.
func TestRetriesKeepEvery(t *testing.T) {
	q := newRetries()
	const n = 1000
	for i := range n {
		q.after(registry.Record{Name: fmt.Sprint("d", i), Revision: 1}, 0)
		q.failedStart(registry.Record{Name: fmt.Sprint("d", i), Revision: 1}, fmt.Errorf("boom %d", i))
	}
	select {
	case <-q.wake:
	default:
		t.Fatal("no wake")
	}
	failed, due := q.take(time.Now())
	if len(failed) != n || len(due) != n {
		t.Fatalf("took %d failed starts and %d retries, want %d each", len(failed), len(due), n)
	}
	if failed, due := q.take(time.Now()); len(failed)+len(due) != 0 {
		t.Fatalf("taken twice: %v %v", failed, due)
	}

	q.after(registry.Record{Name: "a", Revision: 1}, time.Hour)
	q.after(registry.Record{Name: "a", Revision: 1}, 0) // the earlier wins
	q.after(registry.Record{Name: "b", Revision: 2}, 0)
	q.after(registry.Record{Name: "b", Revision: 1}, 0) // an older revision does not replace it
	q.after(registry.Record{Name: "c", Revision: 1}, time.Hour)
	_, due = q.take(time.Now())
	got := map[string]uint64{}
	for _, r := range due {
		got[r.Name] = r.Revision
	}
	if fmt.Sprint(got) != "map[a:1 b:2]" {
		t.Fatalf("due %v, want a@1 and b@2", got)
	}
	if _, due := q.take(time.Now().Add(2 * time.Hour)); len(due) != 1 || due[0].Name != "c" {
		t.Fatalf("due later %v, want c", due)
	}
}
