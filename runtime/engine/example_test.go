package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/spec"
	"github.com/groupstate/groupstate/state"
)

// Example runs the logincount sample in-process: two micro-batches, the second of which
// fires the processing-time timeout of a user who went quiet.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "groupstate-example-")
	defer os.RemoveAll(dir)

	sp, modulePath, err := spec.LoadSpec("../../samples/logincount/logincount.yaml")
	if err != nil {
		log.Fatal(err)
	}
	wasm, err := os.ReadFile(modulePath)
	if err != nil {
		log.Fatal(err)
	}
	store, err := state.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rt, err := engine.New(engine.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	// The sink gets every output after its batch committed.
	print := engine.SinkFunc(func(_ context.Context, _ string, entries []state.OutboxEntry) error {
		for _, e := range entries {
			if e.Kind == state.OutboxOutput {
				fmt.Println(string(e.Payload))
			}
		}
		return nil
	})
	eng, err := rt.NewEngine(ctx, engine.Config{Spec: sp, Wasm: wasm, Store: store, Sink: print})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close(ctx)

	batches := []engine.BatchInput{
		{ProcessingTimeMs: 1_000, Rows: []engine.Row{
			{Data: []byte(`{"user_id": "ada"}`)}, {Data: []byte(`{"user_id": "bob"}`)}, {Data: []byte(`{"user_id": "ada"}`)},
		}},
		// 10s idle timeout: ada and bob time out after 11000; bob logs in again first.
		{ProcessingTimeMs: 11_001, Rows: []engine.Row{{Data: []byte(`{"user_id": "bob"}`)}}},
	}
	for _, b := range batches {
		if _, err := eng.RunBatch(ctx, b); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// {"user_id":"ada","total_logins":2}
	// {"user_id":"bob","total_logins":1}
	// {"user_id":"bob","total_logins":2}
	// {"user_id":"ada","total_logins":2,"session_closed":true}
}
