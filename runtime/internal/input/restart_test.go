package input

import (
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/internal/natsio"
	"github.com/groupstate/groupstate/runtime/internal/output"
	"github.com/groupstate/groupstate/state"
)

// A NATS restart (same data directory and port) pauses a Source and a
// Publisher; afterwards they resume with nothing lost.
func TestServerRestartResume(t *testing.T) {
	e := newEnv(t)
	ctx, js := e.ctx, e.js
	stream := newInput(t, e)
	if _, err := natsio.EnsureStream(ctx, js, natsio.StreamOptions{Name: "OUT", Subjects: []string{"dep.out"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	publishN(t, e, "in.a", 0, 10)
	src, err := NewSource(ctx, js, stream, "dep", nil)
	if err != nil {
		t.Fatal(err)
	}
	first := fetchAll(t, e, src, 5, 5)
	if err := src.Ack(ctx, first[4]); err != nil {
		t.Fatal(err)
	}

	e.nats.Stop()
	// During the outage Fetch returns nothing (or an error); its pull request
	// may reach the server after the restart and strand deliveries, which the
	// Source detects as a gap.
	_, _ = src.Fetch(ctx, 5, 0, 50*time.Millisecond)
	e.nats.Start(t)
	eventually(t, 5*time.Second, "reconnect", e.nats.Conn.IsConnected)

	var rest []Msg
	eventually(t, 10*time.Second, "the 5 remaining messages", func() bool {
		ms, err := src.Fetch(ctx, 10, 0, 100*time.Millisecond)
		if err != nil {
			return false
		}
		rest = append(rest, ms...)
		return len(rest) >= 5
	})
	checkSeqs(t, rest, 6)

	p := output.NewPublisher(js, output.Subjects{Output: "dep.out", DeadLetter: "dep.dlq"})
	entries := []state.OutboxEntry{{ID: state.OutboxID{BatchID: 1}, Kind: state.OutboxOutput, Payload: []byte("x")}}
	eventually(t, 5*time.Second, "deliver after restart", func() bool {
		return p.Deliver(ctx, "dep", entries) == nil
	})
	st, err := js.Stream(ctx, "OUT")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("OUT after restart: %v", err)
	}
}
