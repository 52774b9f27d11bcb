// Package metrics exposes the runtime's Prometheus metrics on /metrics:
// pipeline status, restarts, faults, records read and written, dead-letter
// nacks, filtered records, dedup hits and audit events by kind.
//
// It uses its own registry (no global state) and costs nothing on the record
// hot path: record counts are read from the engines' own counters when
// Prometheus scrapes.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conduitry/conduit/lifecycle"
)

// RecordCounts are a pipeline's record counters since the process started.
type RecordCounts struct {
	Read, Written, Filtered, Nacked int64
	// DedupSkipped are records not written again because an earlier run
	// already had (dedup hits).
	DedupSkipped int64
}

// RecordSource reports the record counters of every pipeline; it is called
// on each scrape.
type RecordSource func(emit func(pipelineID string, c RecordCounts))

// Metrics holds the collectors. Create it with New, feed it pipeline events
// (it is a lifecycle.Observer) and serve Handler.
type Metrics struct {
	registry *prometheus.Registry
	status   *prometheus.GaugeVec
	restarts *prometheus.CounterVec
	faults   *prometheus.CounterVec
	events   *prometheus.CounterVec
}

var statuses = []lifecycle.Status{lifecycle.StatusRunning, lifecycle.StatusRecovering, lifecycle.StatusDegraded, lifecycle.StatusStopped}

// New returns metrics with the Go and process collectors and, when records
// is not nil, per-pipeline record counters read from it.
func New(records RecordSource) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		status: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "conduit_pipeline_status",
			Help: "1 for the status a pipeline is in (running, recovering, degraded, stopped), 0 for the others.",
		}, []string{"pipeline_id", "status"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conduit_pipeline_restarts_total",
			Help: "Restarts of a pipeline by the supervisor after a transient error.",
		}, []string{"pipeline_id"}),
		faults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conduit_pipeline_faults_total",
			Help: "Runs of a pipeline that ended with an error, by error class.",
		}, []string{"pipeline_id", "class"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conduit_audit_events_total",
			Help: "Pipeline events written to the audit log, by kind.",
		}, []string{"kind"}),
	}
	m.registry.MustRegister(m.status, m.restarts, m.faults, m.events,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if records != nil {
		m.registry.MustRegister(recordCollector(records))
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Registry returns the registry, for tests and for other collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// SetStatus records the status of a pipeline (also for pipelines that no
// event has touched yet, such as stopped ones at startup).
func (m *Metrics) SetStatus(pipelineID string, s lifecycle.Status) {
	for _, st := range statuses {
		v := 0.0
		if st == s {
			v = 1
		}
		m.status.WithLabelValues(pipelineID, st.String()).Set(v)
	}
}

// PipelineEvent implements lifecycle.Observer.
func (m *Metrics) PipelineEvent(e lifecycle.Event) {
	m.events.WithLabelValues(string(e.Kind)).Inc()
	switch e.Kind {
	case lifecycle.EventRestarted:
		m.restarts.WithLabelValues(e.PipelineID).Inc()
	case lifecycle.EventFault:
		if e.Error != nil {
			m.faults.WithLabelValues(e.PipelineID, e.Error.Class).Inc()
		}
	}
	if e.To != 0 {
		m.SetStatus(e.PipelineID, e.To)
	}
}

// CountEvent counts an audit event that did not come from a supervisor
// (for example dedup-skipped).
func (m *Metrics) CountEvent(kind string) { m.events.WithLabelValues(kind).Inc() }

type records struct {
	source                                 RecordSource
	read, written, filtered, nacked, dedup *prometheus.Desc
}

func recordCollector(source RecordSource) prometheus.Collector {
	label := []string{"pipeline_id"}
	return &records{
		source:   source,
		read:     prometheus.NewDesc("conduit_pipeline_records_read_total", "Records read from the pipeline's source.", label, nil),
		written:  prometheus.NewDesc("conduit_pipeline_records_written_total", "Records acknowledged end to end (written by every destination).", label, nil),
		filtered: prometheus.NewDesc("conduit_pipeline_records_filtered_total", "Records a processor filtered out.", label, nil),
		nacked:   prometheus.NewDesc("conduit_pipeline_dlq_nacks_total", "Records nacked and sent to the dead-letter queue.", label, nil),
		dedup: prometheus.NewDesc("conduit_pipeline_dedup_skipped_total",
			"Records a destination did not write again after a restart because an earlier run already had (dedup hits).", label, nil),
	}
}

func (r *records) Describe(ch chan<- *prometheus.Desc) {
	ch <- r.read
	ch <- r.written
	ch <- r.filtered
	ch <- r.nacked
	ch <- r.dedup
}

func (r *records) Collect(ch chan<- prometheus.Metric) {
	r.source(func(id string, c RecordCounts) {
		ch <- prometheus.MustNewConstMetric(r.read, prometheus.CounterValue, float64(c.Read), id)
		ch <- prometheus.MustNewConstMetric(r.written, prometheus.CounterValue, float64(c.Written), id)
		ch <- prometheus.MustNewConstMetric(r.filtered, prometheus.CounterValue, float64(c.Filtered), id)
		ch <- prometheus.MustNewConstMetric(r.nacked, prometheus.CounterValue, float64(c.Nacked), id)
		ch <- prometheus.MustNewConstMetric(r.dedup, prometheus.CounterValue, float64(c.DedupSkipped), id)
	})
}
