package engine_test

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/state"
)

// instantSink is a PipelinedSink whose deliveries succeed at once.
type instantSink struct{}

func (instantSink) Deliver(context.Context, string, []state.OutboxEntry) error { return nil }

func (instantSink) Start(context.Context, string, []state.OutboxEntry) engine.Delivery {
	return doneDelivery{}
}

type doneDelivery struct{}

func (doneDelivery) Wait(context.Context) error { return nil }

// TestLastAckIsDurable: the acknowledgement of an idle deployment's last outputs survives a
// power loss, whether the deployment then runs no-data batches that have nothing to do
// (skipped, so nothing else syncs the store) or stops (Close); otherwise those outputs would
// come back from the outbox and be published again, perhaps after the output stream's
// duplicate window. Acknowledgements followed by a batch's synced commit need no sync of
// their own.
func TestLastAckIsDurable(t *testing.T) {
	sinks := map[string]func() engine.Sink{
		"plain":     func() engine.Sink { return &collector{} },
		"pipelined": func() engine.Sink { return instantSink{} },
	}
	for sinkName, newSink := range sinks {
		for _, end := range []string{"skipped", "close"} {
			t.Run(sinkName+"/"+end, func(t *testing.T) {
				fs := vfs.NewCrashableMem()
				st, err := state.Open("db", &state.Options{FS: fs, Logger: discardLogger()})
				require(t, err)
				defer st.Close()
				eng := newEngine(t, specFromYAML(t, probeSpec), probeWasm(t), st, newSink())
				ctx := context.Background()
				for i, at := range []int64{1000, 2000} {
					_, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: at, Position: uint64(i + 1),
						Rows: rows(`{"k":"a","ops":[{"emit":1}]}`)})
					require(t, err)
				}
				switch end {
				case "skipped":
					rep, err := eng.RunBatch(ctx, engine.BatchInput{ProcessingTimeMs: 3000})
					require(t, err)
					if !rep.Skipped {
						t.Fatalf("no-data batch: %+v, want skipped", rep)
					}
				case "close":
					require(t, eng.Close(ctx))
				}

				crashed, err := state.Open("db", &state.Options{FS: fs.CrashClone(vfs.CrashCloneCfg{}), Logger: discardLogger()})
				require(t, err)
				defer crashed.Close()
				var left []state.OutboxID
				require(t, crashed.Deployment("probe").Outbox(func(e state.OutboxEntry) error {
					left = append(left, e.ID)
					return nil
				}))
				if len(left) != 0 {
					t.Fatalf("after a power loss the outbox holds %v again, acknowledged before it", left)
				}
			})
		}
	}
}
