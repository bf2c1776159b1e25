package state_test

import (
	"fmt"
	"log"
	"math"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/groupstate/groupstate/state"
)

// ExampleBatch_Key shows the state of an ABI v2 handler: variables declared in the
// batch, one KeyTxn per group call (a DATA call that appends and registers a timer,
// then the TIMERS call that fires it), TTL expiry at the end of the batch.
func ExampleBatch_Key() {
	s, err := state.Open("data", &state.Options{FS: vfs.NewMem()})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	d := s.Deployment("sessions")
	const nowMs = 1_000

	b := d.NewBatch(1)
	defer b.Close()
	vars, err := b.DeclareVars([]state.VarDecl{
		{Name: "events", Kind: state.VarList},
		{Name: "seen", Kind: state.VarMap, TTLMs: 60_000},
	})
	if err != nil {
		log.Fatal(err)
	}
	events, seen := vars.Index("events"), vars.Index("seen")

	// DATA: a group call for key "alice".
	tx := b.Key(vars, []byte(`"alice"`), nowMs)
	if err := tx.ListAppend(events, []byte(`"login"`), []byte(`"click"`)); err != nil {
		log.Fatal(err)
	}
	if err := tx.MapSet(seen, []byte("page-1"), []byte("1")); err != nil {
		log.Fatal(err)
	}
	if err := tx.TimerRegister(500); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // a failed call would Discard
		log.Fatal(err)
	}

	// TIMERS: the batch sees the timer its DATA call registered.
	type fired struct {
		key string
		ts  int64
	}
	var timers []fired
	err = b.ExpiredTimers(state.TimerPos{TimeoutMs: math.MinInt64}, nowMs, func(key []byte, ts int64) error {
		timers = append(timers, fired{string(key), ts})
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range timers {
		tx := b.Key(vars, []byte(f.key), nowMs)
		elems, _, err := tx.ListRead(events, 0, 1<<20)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("timer %d of %s: %d events\n", f.ts, f.key, len(elems))
		if err := tx.TimerDelete(f.ts); err != nil {
			log.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			log.Fatal(err)
		}
	}

	removed, err := b.ExpireTTL(nowMs)
	if err != nil {
		log.Fatal(err)
	}
	p, err := b.Commit()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("removed %d, keys %d, keys with timers %d\n", removed, p.Keys, p.TimerKeys)
	// Output:
	// timer 500 of "alice": 2 events
	// removed 0, keys 1, keys with timers 0
}
