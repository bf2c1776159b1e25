package state_test

import (
	"fmt"
	"log"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/groupstate/groupstate/state"
)

// Example shows one micro-batch: read the previous entry, set the new one
// with a timeout, emit an output row, commit, then find expired keys and
// deliver the outbox.
func Example() {
	s, err := state.Open("data", &state.Options{FS: vfs.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	d := s.Deployment("logincount")

	key := []byte(`"alice"`)
	prev, _, err := d.Get(key)
	if err != nil {
		log.Fatal(err)
	}
	b := d.NewBatch(1)
	defer b.Close()
	b.Set(key, prev, state.Entry{Value: []byte(`{"login_count":1}`), HasValue: true, TimeoutMs: 70_000})
	b.AppendOutbox(&state.OutboxEntry{Kind: state.OutboxOutput, Key: key, Payload: []byte(`{"user_id":"alice","total_logins":1}`)})
	b.SetProgress(0, 17) // watermark, last input sequence
	if _, err := b.Commit(); err != nil {
		log.Fatal(err)
	}

	p, _ := d.Progress()
	fmt.Printf("batch %d, position %d, keys %d, timer keys %d\n", p.BatchID, p.Position, p.Keys, p.TimerKeys)

	_ = d.Expired(80_000, func(key []byte, timeoutMs int64) error {
		fmt.Printf("expired %s at %d\n", key, timeoutMs)
		return nil
	})

	var last state.OutboxID
	_ = d.Outbox(func(e state.OutboxEntry) error {
		fmt.Printf("deliver %s %s %s\n", e.ID, e.Kind, e.Payload)
		last = e.ID
		return nil
	})
	_ = d.AckOutbox(last)
	// Output:
	// batch 1, position 17, keys 1, timer keys 1
	// expired "alice" at 70000
	// deliver 1.0 output {"user_id":"alice","total_logins":1}
}
