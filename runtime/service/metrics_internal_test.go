package service

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/groupstate/groupstate/runtime/client"
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
