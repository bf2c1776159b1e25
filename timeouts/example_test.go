package timeouts_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/groupstate/groupstate/timeouts"
)

// A micro-batch with event-time timeouts: late rows are dropped, the watermark advances
// after the batch, and timeouts fire strictly below it.
func Example() {
	rules := timeouts.Rules{Mode: timeouts.EventTime, HasWatermark: true}
	wm := timeouts.NewWatermark(10_000, 0) // watermark_delay: 10s, first batch

	// Batch 1 at W = 0.
	for _, ev := range []int64{12_000, 21_000} {
		wm.Observe(ev) // every row counts for the max, late or not
		fmt.Println("row", ev, "late:", rules.DropsLate() && timeouts.IsLate(ev, wm.Current()))
	}
	// A handler arms a session timeout at end + gap.
	fmt.Println("set 25000:", rules.CheckTimeoutTimestamp(25_000, wm.Current()))
	w, advanced := wm.Advance()
	fmt.Println("watermark", w, "advanced:", advanced, "no-data batch:", rules.ShouldRunNoDataBatch(advanced))

	// Batch 2 at W = 11000: a row at the watermark is late.
	fmt.Println("row 11000 late:", timeouts.IsLate(11_000, wm.Current()))
	bound, _ := rules.ExpiryBound(0, wm.Current())
	fmt.Println("timeout 25000 fires:", timeouts.Fires(25_000, bound))
	// Output:
	// row 12000 late: false
	// row 21000 late: false
	// set 25000: <nil>
	// watermark 11000 advanced: true no-data batch: true
	// row 11000 late: true
	// timeout 25000 fires: false
}

func ExampleRules_ExpiryBound() {
	rules := timeouts.Rules{Mode: timeouts.ProcessingTime}
	for _, t := range []int64{15_000, 15_001} {
		bound, ok := rules.ExpiryBound(t, 0)
		fmt.Printf("T=%d: timeout 15000 fires: %v\n", t, ok && timeouts.Fires(15_000, bound))
	}
	_, ok := timeouts.Rules{Mode: timeouts.None}.ExpiryBound(15_000, 0)
	fmt.Println("none has a bound:", ok)
	// Output:
	// T=15000: timeout 15000 fires: false
	// T=15001: timeout 15000 fires: true
	// none has a bound: false
}

func ExampleRules_CheckTimeoutTimestamp() {
	rules := timeouts.Rules{Mode: timeouts.EventTime, HasWatermark: true}
	err := rules.CheckTimeoutTimestamp(5_000, 11_000)
	fmt.Println(errors.Is(err, timeouts.ErrTimestampBeforeWatermark))
	fmt.Println(err)
	// Output:
	// true
	// timeouts: timeout timestamp cannot be earlier than the current watermark: timestamp 5000 ms, watermark 11000 ms
}

func ExampleRules_DurationTimeout() {
	rules := timeouts.Rules{Mode: timeouts.ProcessingTime}
	ts, err := rules.DurationTimeout(12_000, 10_000) // setTimeoutDuration("10s") at T = 12000
	fmt.Println(ts, err)
	_, err = timeouts.Rules{Mode: timeouts.EventTime, HasWatermark: true}.DurationTimeout(12_000, 10_000)
	fmt.Println(err)
	// Output:
	// 22000 <nil>
	// timeouts: cannot set a timeout duration without processing_time timeout (timeout mode is event_time)
}

func ExampleWatermark() {
	wm := timeouts.NewWatermark(10_000, 0)
	fmt.Println("first batch W:", wm.Current())
	wm.Observe(21_000)
	fmt.Println(wm.Advance())
	wm.Observe(5_000) // older events never move it back
	fmt.Println(wm.Advance())
	// Output:
	// first batch W: 0
	// 11000 true
	// 11000 false
}

func ExampleParseMode() {
	m, err := timeouts.ParseMode("event_time")
	fmt.Println(uint32(m), m, err)
	_, err = timeouts.ParseMode("eventtime")
	fmt.Println(err)
	// Output:
	// 2 event_time <nil>
	// timeouts: unknown timeout mode "eventtime": want none, processing_time or event_time
}

func ExampleParseEventTime() {
	for _, tok := range []string{`1700000000000`, `1700000000000.9`, `"2024-01-02T03:04:05.123Z"`, `"yesterday"`} {
		ms, err := timeouts.ParseEventTime([]byte(tok))
		fmt.Println(ms, err)
	}
	// Output:
	// 1700000000000 <nil>
	// 1700000000000 <nil>
	// 1704164645123 <nil>
	// 0 timeouts: bad event time: found the string "yesterday", which is not an RFC 3339 timestamp; want epoch milliseconds (a JSON number) or an RFC 3339 timestamp string like "2024-01-02T03:04:05Z"
}

func ExampleParseDuration() {
	d, err := timeouts.ParseDuration("1m30s")
	fmt.Println(d, err)
	_, err = timeouts.ParseDuration("10")
	fmt.Println(err)
	// Output:
	// 1m30s <nil>
	// timeouts: bad duration "10": it has no unit; want a duration like 10s, 250ms or 1m30s (units ns, us, ms, s, m, h)
}

func ExampleManualClock() {
	clock := timeouts.NewManualClock(time.UnixMilli(12_000))
	fmt.Println(timeouts.UnixMs(clock.Now()))
	clock.Advance(10 * time.Second)
	fmt.Println(timeouts.UnixMs(clock.Now()))
	// Output:
	// 12000
	// 22000
}
