package service

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
)

// TestMetricsSumPartitions: the gauges stay labelled by deployment only; with several of a
// deployment's partitions on one runtime they hold the sums, a partition handed over (stopped
// here) drops out, and one that failed makes up 0.
func TestMetricsSumPartitions(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	st := func(state string, keys int64) *client.Status {
		return &client.Status{State: state, StateKeys: keys, InputLag: keys}
	}
	check := func(step string, keys, up float64) {
		t.Helper()
		if got := gaugeValue(t, m.stateKeys.WithLabelValues("d")); got != keys {
			t.Errorf("%s: state keys %v, want %v", step, got, keys)
		}
		if got := gaugeValue(t, m.inputLag.WithLabelValues("d")); got != keys {
			t.Errorf("%s: input lag %v, want %v", step, got, keys)
		}
		if got := gaugeValue(t, m.up.WithLabelValues("d")); got != up {
			t.Errorf("%s: up %v, want %v", step, got, up)
		}
	}
	m.status("d", 0, st(client.StatusRunning, 3), false)
	check("one partition", 3, 1)
	m.status("d", 2, st(client.StatusRunning, 4), false)
	m.status("d", 0, st(client.StatusRunning, 5), false)
	check("two partitions", 9, 1)
	m.status("d", 2, st(client.StatusFailed, 4), false)
	check("one failed", 9, 0)
	m.status("d", 2, st(client.StatusStopped, 4), false)
	check("the failed one handed over", 5, 1)
	m.status("d", 0, st(client.StatusStopped, 5), false)
	check("the last one stopped", 5, 0)
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// TestMetricsByInput: a deployment with several inputs has each input's rows and late rows
// counted, and its lag and watermark lag set, under its own input label.
func TestMetricsByInput(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	rep := &engine.BatchReport{RowsIn: 5, LateRows: 1, Inputs: []engine.InputReport{{Name: "a", RowsIn: 2}, {Name: "b", RowsIn: 3, LateRows: 1}}}
	m.batch("d", rep)
	m.batch("d", rep)
	for _, c := range []struct {
		input      string
		rows, late float64
	}{{"a", 4, 0}, {"b", 6, 2}} {
		if got := counterValue(t, m.inputRowsBy.WithLabelValues("d", c.input)); got != c.rows {
			t.Errorf("input %s: %v rows, want %v", c.input, got, c.rows)
		}
		if got := counterValue(t, m.lateRowsBy.WithLabelValues("d", c.input)); got != c.late {
			t.Errorf("input %s: %v late rows, want %v", c.input, got, c.late)
		}
	}
	if got := counterValue(t, m.inputRows.WithLabelValues("d")); got != 10 {
		t.Errorf("the deployment's rows: %v, want 10", got)
	}
	m.status("d", 0, &client.Status{State: client.StatusRunning, Inputs: []client.InputStatus{{Name: "a", Lag: 7, WatermarkMs: 1000}, {Name: "b"}}}, true)
	if got := gaugeValue(t, m.inputLagBy.WithLabelValues("d", "a")); got != 7 {
		t.Errorf("input a's lag %v, want 7", got)
	}
	if got := gaugeValue(t, m.watermarkLagBy.WithLabelValues("d", "a")); got < 1e9 {
		t.Errorf("input a's watermark lag %v s, want since 1970", got)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestMetricsClockStepsBack: a step back of the clock is counted once per report that says
// so, skipped batches included, and the series exists from the deployment's start.
func TestMetricsClockStepsBack(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.started("d", false)
	for _, rep := range []*engine.BatchReport{
		{ClockStepBack: true, ClockBehindMs: 500},
		{ClockBehindMs: 400},
		{Skipped: true, ClockStepBack: true, ClockBehindMs: 900},
		{},
	} {
		m.batch("d", rep)
	}
	var got dto.Metric
	if err := m.clockStepsBack.WithLabelValues("d").Write(&got); err != nil {
		t.Fatal(err)
	}
	if v := got.GetCounter().GetValue(); v != 2 {
		t.Fatalf("groupstate_clock_steps_back_total %v, want 2", v)
	}
}
