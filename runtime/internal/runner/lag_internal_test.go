package runner

import (
	"context"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// TestInputLagCountsFetchedRows: the input lag a live source reports counts the rows it
// fetched (so the consumer no longer counts them as pending) that no committed batch ran yet,
// as well as those not fetched; once the batch committed, they no longer count.
func TestInputLagCountsFetchedRows(t *testing.T) {
	j := startInput(t)
	ctx := context.Background()
	for range 5 {
		_, err := j.JS.Publish(ctx, "in.x", []byte(`{}`))
		testutil.Require(t, err)
	}
	src, err := input.NewSource(ctx, j.JS, "IN", "d", nil)
	testutil.Require(t, err)
	r := &Runner{}
	r.src = src
	l := &liveSource{feed: feed{r: r}}
	lag := func() uint64 {
		t.Helper()
		n, err := l.pending(ctx)
		testutil.Require(t, err)
		return n
	}
	if n := lag(); n != 5 {
		t.Fatalf("lag before any fetch %d, want 5", n)
	}
	msgs, err := src.Fetch(ctx, 3, 1<<20, time.Second)
	testutil.Require(t, err)
	if len(msgs) != 3 {
		t.Fatalf("fetched %d, want 3", len(msgs))
	}
	// As next does with what the feed fetched.
	l.fetched = append(l.fetched, msgs...)
	l.unrun.Store(int64(len(l.fetched)))
	if n := lag(); n != 5 {
		t.Fatalf("lag with 3 rows fetched and not run %d, want 5", n)
	}
	l.rest = l.fetched[2:] // the batch ran 2 of them
	l.committed(ctx, &engine.BatchReport{})
	if n := lag(); n != 3 {
		t.Fatalf("lag after a batch of 2 committed %d, want 3", n)
	}
}
