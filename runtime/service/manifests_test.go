package service_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/service"
	"github.com/groupstate/groupstate/timeouts"
)

// TestManifestsPublished: every committed batch's manifest is published, once, on the
// deployment's manifests stream (GS_<NAME>_BATCHES), with the deployment's headers: batch
// ids follow each other from 1, their rows and sequences cover the input exactly, each one
// at the clock's processing time, across a restart of the runtime.
func TestManifestsPublished(t *testing.T) {
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	dir := t.TempDir()
	svc := env.startService(dir, clock)
	env.deploy(logincountSpec, logincountWasm(t))
	env.waitRunning("logincount")
	login := func(i int) string { return fmt.Sprintf(`{"user_id":"u%d"}`, i) } // a user per row: an output per row
	for i := range 5 {
		env.publish("logins.web", login(i))
	}
	env.waitStream("LOGINCOUNT_OUT", 5)
	svc.stop()
	env.startService(dir, clock)
	env.waitRunning("logincount")
	for i := 5; i < 9; i++ {
		env.publish("logins.web", login(i))
	}
	env.waitStream("LOGINCOUNT_OUT", 9)

	var prev, rows, seq uint64
	msgs := env.streamMsgs(topology.ManifestsStream("logincount"))
	for _, m := range msgs {
		var man engine.Manifest
		if err := json.Unmarshal(m.Data, &man); err != nil {
			t.Fatalf("manifest %s: %v", m.Data, err)
		}
		if m.Subject != topology.ManifestSubject("logincount", 0) || m.Header.Get(service.HeaderDeployment) != "logincount" ||
			m.Header.Get(service.HeaderBatch) != fmt.Sprint(man.Batch) {
			t.Errorf("manifest %s on %s with headers %v", m.Data, m.Subject, m.Header)
		}
		if man.Batch <= prev || man.ProcessingTimeMs != 1_000_000 {
			t.Errorf("manifest %+v: want a batch after %d, at T 1000000", man, prev)
		}
		if man.Rows > 0 && (man.FirstSequence != seq+1 || man.LastSequence != seq+uint64(man.Rows) || man.Position != man.LastSequence) {
			t.Errorf("manifest %+v: want %d rows from sequence %d", man, man.Rows, seq+1)
		}
		prev, rows, seq = man.Batch, rows+uint64(man.Rows), seq+uint64(man.Rows)
	}
	if rows != 9 {
		t.Errorf("%d manifests count %d rows, want 9", len(msgs), rows)
	}
}
