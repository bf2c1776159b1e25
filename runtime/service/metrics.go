package service

import (
	"strconv"
	"sync"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the service's Prometheus metrics, labelled by deployment (README lists them).
// Create them with NewMetrics and pass them in [Options]; safe for concurrent use.
type Metrics struct {
	inputRows     *prometheus.CounterVec
	lateRows      *prometheus.CounterVec
	deadLetters   *prometheus.CounterVec
	outputRows    *prometheus.CounterVec
	timeoutsFired *prometheus.CounterVec
	failedKeys    *prometheus.CounterVec
	batches       *prometheus.CounterVec
	batchDuration *prometheus.HistogramVec
	stateKeys     *prometheus.GaugeVec
	stateBytes    *prometheus.GaugeVec
	watermarkLag  *prometheus.GaugeVec
	inputLag      *prometheus.GaugeVec
	up            *prometheus.GaugeVec
	fencedTotal   *prometheus.CounterVec
	owned         *prometheus.GaugeVec
	takeovers     *prometheus.HistogramVec
	standbyLag    *prometheus.GaugeVec
	changelogSize *prometheus.GaugeVec
	restored      *prometheus.CounterVec
	snapUpload    *prometheus.CounterVec
	// clockStepsBack counts the steps back of the processing time clock (engine.BatchReport.ClockStepBack).
	clockStepsBack *prometheus.CounterVec
	// Of each input of a deployment with several (labels deployment and input).
	inputRowsBy    *prometheus.CounterVec
	lateRowsBy     *prometheus.CounterVec
	inputLagBy     *prometheus.GaugeVec
	watermarkLagBy *prometheus.GaugeVec

	mu      sync.Mutex
	running map[string]map[int]*client.Status // by deployment and partition: the last status of each running here
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	d := []string{"deployment"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, d)
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, d)
	}
	m := &Metrics{
		inputRows:     counter("groupstate_input_rows_total", "Input rows received."),
		lateRows:      counter("groupstate_late_rows_total", "Rows dropped as late (event time at or before the watermark)."),
		deadLetters:   counter("groupstate_dead_letters_total", "Rows sent to the dead-letter subject."),
		outputRows:    counter("groupstate_output_rows_total", "Rows emitted by the handler."),
		timeoutsFired: counter("groupstate_timeouts_fired_total", "Timeout calls."),
		failedKeys:    counter("groupstate_failed_keys_total", "Calls that failed for a key (dead-lettered under on_error: dead_letter)."),
		batches:       counter("groupstate_batches_total", "Committed micro-batches."),
		batchDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "groupstate_batch_duration_seconds",
			Help:    "Duration of committed micro-batches.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, d),
		stateKeys:    gauge("groupstate_state_keys", "Keys with a state value."),
		stateBytes:   gauge("groupstate_state_bytes", "Estimated bytes of state on disk."),
		watermarkLag: gauge("groupstate_watermark_lag_seconds", "Wall clock minus the event-time watermark."),
		inputLag:     gauge("groupstate_input_lag_messages", "Input messages not yet delivered to the deployment."),
		up:           gauge("groupstate_deployment_up", "1 while the deployment runs (every partition of it run here), 0 when it stopped or failed."),
		running:      map[string]map[int]*client.Status{},
		fencedTotal:  counter("groupstate_fenced_total", "Times this runtime gave a replicated deployment up because another runtime took it over (a refused changelog append)."),
		owned:        gauge("groupstate_partitions_owned", "Partitions of the deployment this runtime runs."),
		takeovers: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "groupstate_takeover_seconds",
			Help:    "From acquiring a replicated deployment's lease to its first committed batch.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, d),
		standbyLag:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "groupstate_standby_lag_records", Help: "Changelog records a standby copy kept here found to apply at its last read (0: caught up)."}, []string{"deployment", "partition"}),
		changelogSize: gauge("groupstate_changelog_bytes", "Bytes in the deployment's changelog stream."),
		restored:      counter("groupstate_restore_records_total", "Changelog records and snapshot chunks applied by the takeovers of this runtime (few when it took over from a warm standby copy)."),
		snapUpload:    counter("groupstate_snapshot_upload_bytes_total", "Bytes (compressed) of snapshot chunks this runtime uploaded: the chunks the last snapshot lacked."),
		clockStepsBack: counter("groupstate_clock_steps_back_total",
			"Times the wall clock was found behind the processing time of the last committed batch (stepped back, or a takeover by a runtime whose clock is behind); batches run at the committed time until it catches up."),
	}
	di := []string{"deployment", "input"}
	m.inputRowsBy = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "groupstate_input_rows_by_input_total", Help: "Input rows received, by input (deployments with several inputs)."}, di)
	m.lateRowsBy = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "groupstate_late_rows_by_input_total", Help: "Rows dropped as late, by input (deployments with several inputs)."}, di)
	m.inputLagBy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "groupstate_input_lag_by_input_messages", Help: "Input rows not yet delivered to the deployment, by input (deployments with several inputs)."}, di)
	m.watermarkLagBy = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "groupstate_input_watermark_lag_seconds", Help: "Wall clock minus the input's own watermark (deployments with several inputs)."}, di)
	reg.MustRegister(m.inputRowsBy, m.lateRowsBy, m.inputLagBy, m.watermarkLagBy)
	reg.MustRegister(m.inputRows, m.lateRows, m.deadLetters, m.outputRows, m.timeoutsFired, m.failedKeys,
		m.batches, m.batchDuration, m.stateKeys, m.stateBytes, m.watermarkLag, m.inputLag, m.up, m.fencedTotal,
		m.owned, m.takeovers, m.standbyLag, m.changelogSize, m.restored, m.snapUpload, m.clockStepsBack)
	return m
}

// batch records a committed batch, and a step back of the clock seen by any batch.
func (m *Metrics) batch(name string, rep *engine.BatchReport) {
	if m == nil {
		return
	}
	if rep.ClockStepBack {
		m.clockStepsBack.WithLabelValues(name).Inc()
	}
	if rep.Skipped {
		return
	}
	m.inputRows.WithLabelValues(name).Add(float64(rep.RowsIn))
	m.lateRows.WithLabelValues(name).Add(float64(rep.LateRows))
	m.deadLetters.WithLabelValues(name).Add(float64(rep.DeadLetters))
	m.outputRows.WithLabelValues(name).Add(float64(rep.Emitted))
	m.timeoutsFired.WithLabelValues(name).Add(float64(rep.TimeoutCalls))
	m.failedKeys.WithLabelValues(name).Add(float64(rep.FailedKeys))
	m.batches.WithLabelValues(name).Inc()
	m.batchDuration.WithLabelValues(name).Observe(rep.Duration.Seconds())
	for _, in := range rep.Inputs {
		m.inputRowsBy.WithLabelValues(name, in.Name).Add(float64(in.RowsIn))
		m.lateRowsBy.WithLabelValues(name, in.Name).Add(float64(in.LateRows))
	}
}

// status records the gauges of a status document of partition part of deployment name. The
// gauges are labelled by deployment only: with several of its partitions running here, they
// hold the sums over them (the largest watermark lag), and up is 1 while none of them failed
// (a partition that stopped here, moved to another runtime, no longer counts).
func (m *Metrics) status(name string, part int, st *client.Status, hasWatermark bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	parts := m.running[name]
	if parts == nil {
		parts = map[int]*client.Status{}
		m.running[name] = parts
	}
	delete(parts, part)
	sum := *st // a partition stopped here (moved away) counts no more; the last one leaves its values
	if st.State != client.StatusStopped {
		parts[part] = st
	}
	if len(parts) > 0 {
		sum = client.Status{State: client.StatusRunning}
		for _, p := range parts {
			if p.State != client.StatusRunning {
				sum.State = p.State
			}
			sum.StateKeys += p.StateKeys
			sum.StateBytes += p.StateBytes
			sum.InputLag += p.InputLag
			if p.WatermarkMs > 0 && (sum.WatermarkMs == 0 || p.WatermarkMs < sum.WatermarkMs) {
				sum.WatermarkMs = p.WatermarkMs
			}
		}
	}
	m.stateKeys.WithLabelValues(name).Set(float64(sum.StateKeys))
	m.stateBytes.WithLabelValues(name).Set(float64(sum.StateBytes))
	m.inputLag.WithLabelValues(name).Set(float64(sum.InputLag))
	if hasWatermark && sum.WatermarkMs > 0 {
		m.watermarkLag.WithLabelValues(name).Set(time.Since(time.UnixMilli(sum.WatermarkMs)).Seconds())
	}
	for _, in := range st.Inputs { // deployments with inputs have one partition
		m.inputLagBy.WithLabelValues(name, in.Name).Set(float64(in.Lag))
		if hasWatermark && in.WatermarkMs > 0 {
			m.watermarkLagBy.WithLabelValues(name, in.Name).Set(time.Since(time.UnixMilli(in.WatermarkMs)).Seconds())
		}
	}
	up := 0.0
	if client.Runs(sum.State) { // blocked runs too: its input lag tells
		up = 1
	}
	m.up.WithLabelValues(name).Set(up)
}

// fenced counts a replicated deployment given up because another runtime took it over.
func (m *Metrics) fenced(name string) {
	if m == nil {
		return
	}
	m.fencedTotal.WithLabelValues(name).Inc()
}

// started exports a deployment's series from its start (a counter at 0 is exported too) and
// counts its partition as owned here.
func (m *Metrics) started(name string, replicated bool) {
	if m == nil {
		return
	}
	for _, c := range []*prometheus.CounterVec{m.inputRows, m.lateRows, m.deadLetters, m.outputRows, m.timeoutsFired, m.failedKeys, m.batches, m.fencedTotal, m.clockStepsBack} {
		c.WithLabelValues(name).Add(0)
	}
	m.owned.WithLabelValues(name).Inc() // one per partition run here
	if replicated {
		m.changelogSize.WithLabelValues(name).Add(0)
		m.restored.WithLabelValues(name).Add(0)
		m.snapUpload.WithLabelValues(name).Add(0)
	}
}

// standbyBehind records how many records a standby copy of a deployment's partition found
// to apply at its last read.
func (m *Metrics) standbyBehind(name string, partition, records int) {
	if m == nil {
		return
	}
	m.standbyLag.WithLabelValues(name, strconv.Itoa(partition)).Set(float64(records))
}

// standbyEnded removes the lag series of a standby copy no longer kept here.
func (m *Metrics) standbyEnded(name string, partition int) {
	if m == nil {
		return
	}
	m.standbyLag.DeleteLabelValues(name, strconv.Itoa(partition))
}

// stopped counts a deployment's partition as no longer owned here.
func (m *Metrics) stopped(name string) {
	if m == nil {
		return
	}
	m.owned.WithLabelValues(name).Dec()
}

// restoredRecords counts what a takeover of a deployment's partition applied to restore it.
func (m *Metrics) restoredRecords(name string, n int) {
	if m == nil {
		return
	}
	m.restored.WithLabelValues(name).Add(float64(n))
}

// snapshotUploaded counts the bytes a snapshot of a deployment's partition uploaded.
func (m *Metrics) snapshotUploaded(name string, bytes int64) {
	if m == nil {
		return
	}
	m.snapUpload.WithLabelValues(name).Add(float64(bytes))
}

// takeover records the time from acquiring a lease to the first committed batch.
func (m *Metrics) takeover(name string, d time.Duration) {
	if m == nil {
		return
	}
	m.takeovers.WithLabelValues(name).Observe(d.Seconds())
}

// changelog records the size of a deployment's changelog stream.
func (m *Metrics) changelog(name string, bytes uint64) {
	if m == nil {
		return
	}
	m.changelogSize.WithLabelValues(name).Set(float64(bytes))
}
