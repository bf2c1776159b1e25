package input

import (
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
)

// TestPullHoldsItsRequest: a pull request's inbox holds what the request can bring (its batch
// and the statuses that end it), not a sync subscription's 64k entries (512 KB allocated for
// every request, and held all the time by an idle deployment's long poll).
func TestPullHoldsItsRequest(t *testing.T) {
	e := newEnv(t)
	for _, batch := range []int{1, 100} {
		p, err := startPull(e.nats.Conn, "no.consumer.here", pullRequest{Batch: batch, NoWait: true})
		testutil.Require(t, err)
		if got, want := cap(p.ch), batch+pullStatusRoom; got != want {
			t.Errorf("batch %d: the inbox holds %d messages, want %d", batch, got, want)
		}
		p.close()
	}
}
