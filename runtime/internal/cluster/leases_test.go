package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

func TestLeases(t *testing.T) {
	e := newEnv(t)
	l, err := OpenLeases(e.ctx, e.js, 0)
	if err != nil {
		t.Fatal(err)
	}
	alive := map[string]bool{"r1": true, "r2": true}
	live := func(id string) bool { return alive[id] }

	a, err := l.Acquire(e.ctx, "counts", 3, "r1", live)
	if err != nil || a.Owner != "r1" || a.Epoch == 0 {
		t.Fatalf("first acquire: %+v, %v", a, err)
	}
	if _, err := l.Acquire(e.ctx, "counts", 3, "r2", live); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("acquire of a lease a live runtime holds: %v", err)
	}
	if err := l.Check(e.ctx, a); err != nil {
		t.Fatalf("check of the current lease: %v", err)
	}

	alive["r1"] = false // r1 died
	b, err := l.Acquire(e.ctx, "counts", 3, "r2", live)
	if err != nil || b.Owner != "r2" || b.Epoch <= a.Epoch {
		t.Fatalf("acquire from a dead owner: %+v (after epoch %d), %v", b, a.Epoch, err)
	}
	if err := l.Check(e.ctx, a); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the fenced owner's check: %v", err)
	}
	if err := l.Release(e.ctx, a); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("the fenced owner's release: %v", err)
	}
	if got, _ := l.Get(e.ctx, "counts", 3); got.Owner != "r2" {
		t.Fatalf("a stale release changed the lease: %+v", got)
	}

	alive["r1"] = true // r1 restarted: r2 releases, r1 acquires
	if err := l.Release(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	c, err := l.Acquire(e.ctx, "counts", 3, "r1", live)
	if err != nil || c.Epoch <= b.Epoch {
		t.Fatalf("acquire of a released lease: %+v, %v", c, err)
	}
	again, err := l.Acquire(e.ctx, "counts", 3, "r1", live)
	if err != nil || again.Epoch <= c.Epoch {
		t.Fatalf("a restarted owner re-acquires with a new epoch: %+v after %d, %v", again, c.Epoch, err)
	}

	if _, err := l.Acquire(e.ctx, "counts", 0, "r2", live); err != nil {
		t.Fatal(err)
	}
	got, err := l.List(e.ctx, "counts")
	if err != nil || len(got) != 2 || got[0].Owner != "r2" || got[3].Owner != "r1" {
		t.Fatalf("list: %+v, %v", got, err)
	}
	if none, err := l.List(e.ctx, "other"); err != nil || len(none) != 0 {
		t.Fatalf("list of a deployment without leases: %+v, %v", none, err)
	}
}

// TestLeaseAcquireRace: of runtimes acquiring one free lease at once, exactly one wins.
func TestLeaseAcquireRace(t *testing.T) {
	e := newEnv(t)
	l, err := OpenLeases(e.ctx, e.js, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "b", "c", "d", "e", "f"}
	live := func(string) bool { return true }
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Acquire(e.ctx, "race", 0, id, live)
		}()
	}
	wg.Wait()
	wins := 0
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrLeaseHeld):
			t.Fatalf("%s: %v", ids[i], err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d runtimes won one lease: %v", wins, errs)
	}
}

// TestLeasesListWithoutQuorum: a List on a 3-node cluster that lost two nodes (the bucket's
// stream has no leader, so its watch delivers nothing) returns an error in bounded time,
// rather than waiting for as long as its context lasts (a runtime's context has no
// deadline), and never a partial list.
func TestLeasesListWithoutQuorum(t *testing.T) {
	c := testutil.StartCluster(t, 3)
	js := c.JetStream(t)
	ctx := context.Background()
	l, err := OpenLeases(ctx, js, 3)
	testutil.Require(t, err)
	if _, err := l.Acquire(ctx, "counts", 0, "r1", func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	c.Stop(1)
	c.Stop(2)
	done := make(chan error, 1)
	go func() {
		got, err := l.List(ctx, "counts")
		if err == nil {
			err = fmt.Errorf("got %v, want an error", got)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !strings.Contains(err.Error(), "listing the leases of counts") {
			t.Fatalf("List without quorum: %v", err)
		}
	case <-time.After(2 * natsio.ListTimeout):
		t.Fatalf("List without quorum did not return in %s", 2*natsio.ListTimeout)
	}
}
