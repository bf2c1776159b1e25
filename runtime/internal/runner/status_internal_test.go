package runner

import (
	"errors"
	"testing"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// TestStatusBlocked: a batch whose outputs were not delivered, or a batch refused because
// earlier outputs are undelivered, makes a running deployment read blocked, with the error; a
// batch after the outbox was delivered makes it read running again; a failed or drained one
// stays as it is. The counters are the committed ones.
func TestStatusBlocked(t *testing.T) {
	type step struct {
		rep     *engine.BatchReport // nil: a batch refused with engine.ErrDeliveryPending
		want    string
		wantErr bool
	}
	cases := []struct {
		name  string
		start string
		steps []step
	}{
		{"undelivered after a commit", client.StatusRunning, []step{
			{&engine.BatchReport{Undelivered: "stream full"}, client.StatusBlocked, true},
			{nil, client.StatusBlocked, true},
			{&engine.BatchReport{Skipped: true}, client.StatusRunning, false},
		}},
		{"refused batches", client.StatusRunning, []step{
			{nil, client.StatusBlocked, true},
			{&engine.BatchReport{RowsIn: 1}, client.StatusRunning, false},
		}},
		{"failed stays failed", client.StatusFailed, []step{
			{&engine.BatchReport{Undelivered: "x"}, client.StatusFailed, false},
			{nil, client.StatusFailed, true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sr statusReporter
			sr.reset(client.Status{State: c.start})
			for i, s := range c.steps {
				if s.rep == nil {
					sr.block()
					sr.setError(errors.New("engine: outputs of earlier batches are not delivered yet"))
				} else {
					sr.record(s.rep, state.Counters{Batches: uint64(i), RowsIn: 7})
				}
				st, _ := sr.take(true)
				if st.State != s.want || (st.Error != "") != s.wantErr {
					t.Fatalf("step %d: state %q error %q, want %q (error: %v)", i, st.State, st.Error, s.want, s.wantErr)
				}
				if s.rep != nil && (st.RowsIn != 7 || st.Batches != int64(i)) {
					t.Fatalf("step %d: counters rows in %d batches %d, want the committed 7 and %d", i, st.RowsIn, st.Batches, i)
				}
			}
		})
	}
}
