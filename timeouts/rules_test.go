package timeouts_test

import (
	"errors"
	"math"
	"testing"

	"github.com/groupstate/groupstate/timeouts"
)

var (
	noneRules   = timeouts.Rules{Mode: timeouts.None}
	noneWM      = timeouts.Rules{Mode: timeouts.None, HasWatermark: true}
	procRules   = timeouts.Rules{Mode: timeouts.ProcessingTime}
	procWM      = timeouts.Rules{Mode: timeouts.ProcessingTime, HasWatermark: true}
	eventRules  = timeouts.Rules{Mode: timeouts.EventTime, HasWatermark: true}
	eventNoWM   = timeouts.Rules{Mode: timeouts.EventTime}
	unknownMode = timeouts.Rules{Mode: timeouts.Mode(9), HasWatermark: true}
)

// checkErr fails unless err matches want (nil meaning no error).
func checkErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%s: unexpected error %v", what, err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: error = %v, want %v", what, err, want)
	}
}

func TestRulesValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    timeouts.Rules
		want error
	}{
		{"zero", timeouts.Rules{}, nil},
		{"none with watermark", noneWM, nil},
		{"processing time", procRules, nil},
		{"processing time with watermark", procWM, nil},
		{"event time", eventRules, nil},
		{"event time without watermark", eventNoWM, timeouts.ErrEventTimeNeedsWatermark},
		{"unknown mode", unknownMode, timeouts.ErrUnknownMode},
	} {
		checkErr(t, tc.name, tc.r.Validate(), tc.want)
	}
}

func TestDropsLate(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    timeouts.Rules
		want bool
	}{
		{"none", noneRules, false},
		{"none with watermark", noneWM, false},
		{"processing time", procRules, false},
		{"processing time with watermark", procWM, false},
		{"event time", eventRules, true},
		{"event time without watermark", eventNoWM, false},
		{"unknown", unknownMode, false},
	} {
		if got := tc.r.DropsLate(); got != tc.want {
			t.Errorf("%s: DropsLate() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsLate(t *testing.T) {
	for _, tc := range []struct {
		event, wm int64
		want      bool
	}{
		{10000, 10000, true}, // exactly at W: late
		{10001, 10000, false},
		{9999, 10000, true},
		{0, 0, true}, // first batch, W = 0: a row at 0 is late
		{1, 0, false},
		{-5, 0, true},
		{math.MinInt64, 0, true},
		{math.MaxInt64, math.MaxInt64, true},
		{math.MaxInt64, math.MaxInt64 - 1, false},
	} {
		if got := timeouts.IsLate(tc.event, tc.wm); got != tc.want {
			t.Errorf("IsLate(%d, %d) = %v, want %v", tc.event, tc.wm, got, tc.want)
		}
	}
}

func TestExpiryBoundAndFires(t *testing.T) {
	for _, tc := range []struct {
		name       string
		r          timeouts.Rules
		t, w       int64
		timeout    int64
		wantBound  int64
		wantOK     bool
		wantFiring bool
	}{
		{"processing: at T does not fire", procRules, 15000, 0, 15000, 15000, true, false},
		{"processing: fires at T+1", procRules, 15001, 0, 15000, 15001, true, true},
		{"processing: future", procRules, 15000, 0, 20000, 15000, true, false},
		{"processing: ignores W", procWM, 15000, 99999, 16000, 15000, true, false},
		{"event: at W does not fire", eventRules, 99999, 55000, 55000, 55000, true, false},
		{"event: fires at W+1", eventRules, 0, 55001, 55000, 55001, true, true},
		{"event: ignores T", eventRules, 1 << 50, 1000, 2000, 1000, true, false},
		{"event without watermark", eventNoWM, 15000, 15000, 1, 0, false, false},
		{"none", noneRules, 15000, 15000, 1, 0, false, false},
		{"none with watermark", noneWM, 15000, 15000, 1, 0, false, false},
		{"unknown", unknownMode, 15000, 15000, 1, 0, false, false},
		{"processing: extremes", procRules, math.MaxInt64, 0, math.MaxInt64, math.MaxInt64, true, false},
		{"processing: min", procRules, math.MinInt64, 0, math.MinInt64, math.MinInt64, true, false},
	} {
		bound, ok := tc.r.ExpiryBound(tc.t, tc.w)
		if bound != tc.wantBound || ok != tc.wantOK {
			t.Errorf("%s: ExpiryBound(%d, %d) = %d, %v; want %d, %v", tc.name, tc.t, tc.w, bound, ok, tc.wantBound, tc.wantOK)
		}
		if fires := ok && timeouts.Fires(tc.timeout, bound); fires != tc.wantFiring {
			t.Errorf("%s: timeout %d fires = %v, want %v", tc.name, tc.timeout, fires, tc.wantFiring)
		}
	}
}

func TestFires(t *testing.T) {
	for _, tc := range []struct {
		ts, bound int64
		want      bool
	}{
		{15000, 15000, false},
		{15000, 15001, true},
		{15001, 15000, false},
		{math.MinInt64, math.MaxInt64, true},
		{math.MaxInt64, math.MaxInt64, false},
		{math.MaxInt64, math.MinInt64, false},
	} {
		if got := timeouts.Fires(tc.ts, tc.bound); got != tc.want {
			t.Errorf("Fires(%d, %d) = %v, want %v", tc.ts, tc.bound, got, tc.want)
		}
	}
}

func TestShouldRunNoDataBatch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        timeouts.Rules
		advanced bool
		want     bool
	}{
		{"processing, no advance", procRules, false, true},
		{"processing, advance", procWM, true, true},
		{"event, advance", eventRules, true, true},
		{"event, no advance", eventRules, false, false},
		{"event without watermark", eventNoWM, true, false},
		{"none", noneWM, true, false},
		{"unknown", unknownMode, true, false},
	} {
		if got := tc.r.ShouldRunNoDataBatch(tc.advanced); got != tc.want {
			t.Errorf("%s: ShouldRunNoDataBatch(%v) = %v, want %v", tc.name, tc.advanced, got, tc.want)
		}
	}
}

func TestHasTimeouts(t *testing.T) {
	for _, tc := range []struct {
		r    timeouts.Rules
		want bool
	}{{noneRules, false}, {procRules, true}, {eventRules, true}, {unknownMode, false}} {
		if got := tc.r.HasTimeouts(); got != tc.want {
			t.Errorf("%+v.HasTimeouts() = %v, want %v", tc.r, got, tc.want)
		}
	}
}

func TestCurrentWatermark(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    timeouts.Rules
		w    int64
		want error
	}{
		{"event", eventRules, 0, nil}, // 0 in the first batch
		{"processing with watermark", procWM, 11000, nil},
		{"none with watermark", noneWM, 5, nil},
		{"processing without watermark", procRules, 0, timeouts.ErrNoWatermark},
		{"none", noneRules, 0, timeouts.ErrNoWatermark},
	} {
		got, err := tc.r.CurrentWatermark(tc.w)
		checkErr(t, tc.name, err, tc.want)
		if err == nil && got != tc.w {
			t.Errorf("%s: CurrentWatermark(%d) = %d", tc.name, tc.w, got)
		}
	}
}

func TestCheckTimeoutDuration(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    timeouts.Rules
		d    int64
		want error
	}{
		{"processing, positive", procRules, 10000, nil},
		{"processing, 1ms", procRules, 1, nil},
		{"processing, max", procRules, math.MaxInt64, nil},
		{"processing, zero", procRules, 0, timeouts.ErrNonPositiveDuration},
		{"processing, negative", procRules, -1, timeouts.ErrNonPositiveDuration},
		{"processing, min", procRules, math.MinInt64, timeouts.ErrNonPositiveDuration},
		{"event", eventRules, 10000, timeouts.ErrDurationNotAllowed},
		{"none", noneRules, 10000, timeouts.ErrDurationNotAllowed},
		{"unknown", unknownMode, 10000, timeouts.ErrDurationNotAllowed},
		{"event, zero: mode checked first", eventRules, 0, timeouts.ErrDurationNotAllowed},
	} {
		checkErr(t, tc.name, tc.r.CheckTimeoutDuration(tc.d), tc.want)
	}
}

func TestDurationTimeout(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       timeouts.Rules
		t, d    int64
		want    int64
		wantErr error
	}{
		{"T + d", procRules, 12000, 10000, 22000, nil},
		{"first batch", procRules, 0, 1, 1, nil},
		{"largest", procRules, math.MaxInt64 - 10, 10, math.MaxInt64, nil},
		{"overflow", procRules, math.MaxInt64 - 10, 11, 0, timeouts.ErrTimeoutOverflow},
		{"overflow max", procRules, math.MaxInt64, math.MaxInt64, 0, timeouts.ErrTimeoutOverflow},
		{"negative T", procRules, math.MinInt64, math.MaxInt64, -1, nil},
		{"zero d", procRules, 12000, 0, 0, timeouts.ErrNonPositiveDuration},
		{"event", eventRules, 12000, 1, 0, timeouts.ErrDurationNotAllowed},
	} {
		got, err := tc.r.DurationTimeout(tc.t, tc.d)
		checkErr(t, tc.name, err, tc.wantErr)
		if got != tc.want {
			t.Errorf("%s: DurationTimeout(%d, %d) = %d, want %d", tc.name, tc.t, tc.d, got, tc.want)
		}
	}
}

func TestCheckTimeoutTimestamp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		r     timeouts.Rules
		ts, w int64
		want  error
	}{
		{"after W", eventRules, 20000, 11000, nil},
		{"equal to W", eventRules, 11000, 11000, nil},
		{"first batch", eventRules, 1, 0, nil},
		{"before W", eventRules, 10999, 11000, timeouts.ErrTimestampBeforeWatermark},
		{"zero", eventRules, 0, 0, timeouts.ErrNonPositiveTimestamp},
		{"negative", eventRules, -1, 0, timeouts.ErrNonPositiveTimestamp},
		{"min", eventRules, math.MinInt64, 0, timeouts.ErrNonPositiveTimestamp},
		{"max", eventRules, math.MaxInt64, math.MaxInt64, nil},
		{"processing", procRules, 20000, 0, timeouts.ErrTimestampNotAllowed},
		{"none", noneWM, 20000, 0, timeouts.ErrTimestampNotAllowed},
		{"unknown", unknownMode, 20000, 0, timeouts.ErrTimestampNotAllowed},
	} {
		checkErr(t, tc.name, tc.r.CheckTimeoutTimestamp(tc.ts, tc.w), tc.want)
	}
}

func TestCheckTimeoutResult(t *testing.T) {
	for _, tc := range []struct {
		name     string
		r        timeouts.Rules
		ts, t, w int64
		want     error
	}{
		{"processing, after T", procRules, 22000, 12000, 0, nil},
		{"processing, T+1", procRules, 12001, 12000, 0, nil},
		{"processing, at T", procRules, 12000, 12000, 0, timeouts.ErrNonPositiveDuration},
		{"processing, before T", procRules, 1, 12000, 0, timeouts.ErrNonPositiveDuration},
		{"processing, W irrelevant", procWM, 12001, 12000, 50000, nil},
		{"processing, max", procRules, math.MaxInt64, math.MaxInt64, 0, timeouts.ErrNonPositiveDuration},
		{"event, at W", eventRules, 11000, 99999, 11000, nil},
		{"event, after W", eventRules, 11001, 0, 11000, nil},
		{"event, T irrelevant", eventRules, 5, 1 << 40, 0, nil},
		{"event, before W", eventRules, 10999, 0, 11000, timeouts.ErrTimestampBeforeWatermark},
		{"event, zero", eventRules, 0, 0, 0, timeouts.ErrNonPositiveTimestamp},
		{"event, negative", eventRules, -7, 0, -10, timeouts.ErrNonPositiveTimestamp},
		{"none", noneRules, 22000, 12000, 0, timeouts.ErrTimeoutNotAllowed},
		{"none with watermark", noneWM, 22000, 12000, 0, timeouts.ErrTimeoutNotAllowed},
		{"unknown", unknownMode, 22000, 12000, 0, timeouts.ErrTimeoutNotAllowed},
	} {
		checkErr(t, tc.name, tc.r.CheckTimeoutResult(tc.ts, tc.t, tc.w), tc.want)
	}
}

func TestCheckErrorsAreDistinct(t *testing.T) {
	// An error for one rule must not match another rule's sentinel.
	err := eventRules.CheckTimeoutTimestamp(5, 10)
	for _, other := range []error{timeouts.ErrNonPositiveTimestamp, timeouts.ErrTimestampNotAllowed, timeouts.ErrNonPositiveDuration} {
		if errors.Is(err, other) {
			t.Errorf("%v matches %v", err, other)
		}
	}
}
