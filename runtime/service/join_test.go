package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/timeouts"
)

// joinSpecNATS is samples/adjoin/adjoin.yaml with the impressions in a stream of their own
// name, the clicks in the stream the runtime creates, and streams for the outputs and the late
// rows.
const joinSpecNATS = `
name: adjoin
module: unused.wasm
inputs:
  - name: impressions
    subjects: ["ads.impressions.>"]
    stream: ADS_IMPRESSIONS
    key: {field: ad_id}
    event_time: {field: ts, watermark_delay: 2h}
  - name: clicks
    subjects: ["ads.clicks.>"]
    key: {field: ad_id}
    event_time: {field: ts, watermark_delay: 3h}
watermark_policy: min
timeout: event_time
output: {subject: adjoin.out, stream: ADJOIN_OUT}
late: {subject: adjoin.late, stream: ADJOIN_LATE}
config: {within: 1h}
`

// TestServiceJoin: the adjoin sample deployed over NATS with two input streams: a click
// joins its impression across a restart of the runtime, each pair is published once, an
// impression no click matched is published with click_ts null once both watermarks passed
// it, a row late for the deployment's watermark goes to the late stream and is counted for
// its input, status reports each input, and the joined ads hold no state at the end.
func TestServiceJoin(t *testing.T) {
	testutil.Long(t)
	env := startNATS(t)
	clock := timeouts.NewManualClock(time.UnixMilli(1_000_000))
	dir := t.TempDir()
	svc := env.startService(dir, clock)
	env.deploy(joinSpecNATS, testutil.ReadFile(t, "../../samples/adjoin/go/adjoin.wasm"))
	env.waitRunning("adjoin")

	const h = int64(time.Hour / time.Millisecond)
	t0 := 100 * h
	row := func(ad string, ts int64) string { return fmt.Sprintf(`{"ad_id": %q, "ts": %d}`, ad, ts) }
	env.publish("ads.impressions.web", row("a1", t0), row("a2", t0))
	env.publish("ads.clicks.web", row("a1", t0+h/2))
	env.waitStream("ADJOIN_OUT", 1)

	// A restart between the click and the rest: nothing is lost or published twice.
	svc.stop()
	env.startService(dir, clock)
	env.waitRunning("adjoin")

	env.publish("ads.clicks.web", row("a2", t0+2*h)) // past a2's impression + 1h: no match
	// Far-future rows move both watermarks: impressions to t0+8h, clicks to t0+7h; the
	// deployment's is their min, t0+7h, which passes a1's and a2's rows.
	env.publish("ads.impressions.web", row("zz", t0+10*h))
	env.publish("ads.clicks.web", row("zz", t0+10*h))
	env.waitStream("ADJOIN_OUT", 3)
	testutil.Eventually(t, "the watermark at t0+7h", func() bool {
		st, err := env.client.Status(context.Background(), "adjoin")
		return err == nil && st.WatermarkMs == t0+7*h
	})
	env.publish("ads.clicks.web", row("a3", t0+h)) // at or before t0+7h: late
	env.waitStream("ADJOIN_LATE", 1)

	var got []string
	for _, o := range env.waitStream("ADJOIN_OUT", 3) { // the late row joined nothing
		var p struct {
			AdID       string `json:"ad_id"`
			Impression int64  `json:"impression_ts"`
			Click      *int64 `json:"click_ts"`
		}
		testutil.Require(t, json.Unmarshal([]byte(o), &p))
		c := "null"
		if p.Click != nil {
			c = fmt.Sprint(*p.Click - t0)
		}
		got = append(got, fmt.Sprintf("%s %d %s", p.AdID, p.Impression-t0, c))
	}
	sort.Strings(got)
	want := []string{"a1 0 1800000", "a2 0 null", fmt.Sprintf("zz %d %d", 10*h, 10*h)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}

	var st *client.Status
	testutil.Eventually(t, "status with each input's counts", func() bool {
		var err error
		st, err = env.client.Status(context.Background(), "adjoin")
		return err == nil && len(st.Inputs) == 2 && st.Inputs[1].LateRows == 1
	})
	imp, clk := st.Inputs[0], st.Inputs[1]
	if imp.Name != "impressions" || imp.WatermarkMs != t0+8*h || clk.Name != "clicks" || clk.WatermarkMs != t0+7*h || st.LateRows != 1 || imp.LateRows != 0 {
		t.Fatalf("status inputs %+v, late %d", st.Inputs, st.LateRows)
	}
	// The deployment's counters go on through the restart (7 rows); each input's count since
	// the runtime started it (the 4 rows after the restart).
	if imp.RowsIn+clk.RowsIn != 4 || st.RowsIn != 7 || clk.RowsIn < 1 {
		t.Fatalf("rows per input %+v since the restart, want 4 in all; rows in %d, want 7", st.Inputs, st.RowsIn)
	}
	for _, ad := range []string{"a1", "a2"} {
		if _, found, err := env.client.State(context.Background(), "adjoin", client.KeyFromArg(ad)); err != nil || found {
			t.Fatalf("ad %s still holds state (%v, %v): the watermark passed all its rows", ad, found, err)
		}
	}
	if _, found, err := env.client.State(context.Background(), "adjoin", client.KeyFromArg("zz")); err != nil || !found {
		t.Fatalf("ad zz holds no state (%v): its rows are ahead of the watermark", err)
	}
	for _, stream := range []string{"ADS_IMPRESSIONS", "GS_ADJOIN_IN_CLICKS", "GS_ADJOIN_INPUTS"} {
		if _, err := env.js.Stream(context.Background(), stream); err != nil {
			t.Errorf("stream %s: %v", stream, err)
		}
	}
}
