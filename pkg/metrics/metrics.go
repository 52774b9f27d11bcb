// Package metrics exposes the runtime's Prometheus metrics on /metrics:
// pipeline status and since when, restarts, faults, records read and
// written, dead-letter nacks, filtered records, dedup hits, audit events by
// kind, store and audit log writes that failed, breakers and the cluster.
// The alerting rules and the dashboard in pkg/monitoring are built on them.
//
// Series an alert watches are exported before the event they count (at
// zero, or for every dependency a connector names), so that a rule or a
// dashboard panel never waits on a series that does not exist yet.
//
// It uses its own registry (no global state) and costs nothing on the record
// hot path: record counts are read from the engines' own counters when
// Prometheus scrapes.
package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
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
// on each scrape. A pipeline's counts must never be lower than the ones the
// call before reported: Prometheus takes a drop for a counter reset.
type RecordSource func(emit func(pipelineID string, c RecordCounts))

// Metrics holds the collectors. Create it with New, register each pipeline
// with Pipeline, feed that pipeline's events to the handle it returns, and
// serve Handler.
type Metrics struct {
	registry *prometheus.Registry
	events   *prometheus.CounterVec
	// eventCounters are the events counter's series for the supervisor's
	// event kinds, resolved once so that counting an event takes no lock.
	eventCounters map[auditlog.Kind]prometheus.Counter
	// decisions counts what the recovery policy decided about faults, by
	// the rule that decided (none: the error's class) and the action.
	decisions *prometheus.CounterVec
	// deadLettered counts the records dead-letter rules and quarantine
	// sent to the dead-letter queue, by pipeline and rule.
	deadLettered *prometheus.CounterVec
	// writes counts the store's failed writes.
	writes writeCounters

	mu        sync.RWMutex
	pipelines map[string]*Pipeline
}

// Pipeline holds one pipeline's status, restart and fault counts. Updating
// it takes no lock and allocates nothing: supervisors update it on every
// transition, ten thousand of them at once in a fault storm, and a shared
// lock there made the supervisors queue behind each other. Prometheus
// reads it when it scrapes.
type Pipeline struct {
	id string
	// status holds a lifecycle.Status, stored first by Metrics.Pipeline.
	status atomic.Value
	// since is when the pipeline entered its status, in Unix nanoseconds.
	since    atomic.Int64
	restarts atomic.Uint64
	// faults counts runs that ended with an error, by class.
	transient, fatal atomic.Uint64
}

// New returns metrics with the Go and process collectors and, when records
// is not nil, per-pipeline record counters read from it.
func New(records RecordSource) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conduit_audit_events_total",
			Help: "Pipeline events written to the audit log, by kind.",
		}, []string{"kind"}),
		eventCounters: make(map[auditlog.Kind]prometheus.Counter, len(auditlog.SupervisorKinds())),
		pipelines:     make(map[string]*Pipeline),
	}
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "conduit_recovery_decisions_total",
		Help: "Faults by the recovery rule that decided them (none: the error's class decided) and the action: restart or degrade.",
	}, []string{"rule", "action"})
	// The decisions of the errors' classes are exported at zero before
	// the first fault; a rule's appear when it first decides.
	for _, a := range []lifecycle.Action{lifecycle.ActionRestart, lifecycle.ActionDegrade} {
		m.decisions.WithLabelValues("none", a.String())
	}
	m.registry.MustRegister(m.decisions)
	m.deadLettered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "conduit_records_dead_lettered_total",
		Help: "Records a recovery rule with action dead-letter (rule: its name) or quarantine (rule: quarantine) sent to the dead-letter queue instead of the destinations, by pipeline.",
	}, []string{"pipeline_id", "rule"})
	m.registry.MustRegister(m.deadLettered)
	m.writes = newWriteCounters(m.registry)
	for _, k := range auditlog.SupervisorKinds() {
		m.eventCounters[k] = m.events.WithLabelValues(string(k))
	}
	m.registry.MustRegister(m.events, newPipelineCollector(m),
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

// Pipeline returns the metrics of a pipeline, registering it with status
// initial, entered at since, the first time (so that pipelines no event
// has touched yet, such as stopped ones at startup, are exported too).
func (m *Metrics) Pipeline(id string, initial lifecycle.Status, since time.Time) *Pipeline {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pipelines[id]
	if !ok {
		p = &Pipeline{id: id}
		p.status.Store(initial)
		p.since.Store(since.UnixNano())
		m.pipelines[id] = p
	}
	return p
}

// Status is the pipeline's status as its events last set it.
func (p *Pipeline) Status() lifecycle.Status {
	s, _ := p.status.Load().(lifecycle.Status)
	return s
}

// ForgetPipeline removes a deleted pipeline's series.
func (m *Metrics) ForgetPipeline(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pipelines, id)
	m.deadLettered.DeletePartialMatch(prometheus.Labels{"pipeline_id": id})
}

// DeadLetterRules exports the records dead-lettered by each of rules (the
// names of the dead-letter rules pipeline's policy has) at zero until one
// takes a record, so that an alert on them has a series to watch from the
// start.
func (m *Metrics) DeadLetterRules(pipeline string, rules []string) {
	for _, r := range rules {
		m.deadLettered.WithLabelValues(pipeline, r)
	}
}

// DeadLettered counts n records of pipeline that rule (a dead-letter rule,
// or quarantine) sent to the dead-letter queue.
func (m *Metrics) DeadLettered(pipeline, rule string, n int) {
	m.deadLettered.WithLabelValues(pipeline, rule).Add(float64(n))
}

// PipelineEvent counts a supervisor's event and updates its pipeline's
// series through p, the handle Pipeline returned for it.
func (m *Metrics) PipelineEvent(p *Pipeline, e auditlog.Event) {
	if c, ok := m.eventCounters[e.Kind]; ok {
		c.Inc()
	} else {
		m.events.WithLabelValues(string(e.Kind)).Inc()
	}
	switch e.Kind {
	case auditlog.KindRestarted:
		p.restarts.Add(1)
	case auditlog.KindFault:
		if e.Action != "" {
			rule := "none"
			if e.ErrorRule != "" {
				rule = e.ErrorRule
			}
			m.decisions.WithLabelValues(rule, e.Action).Inc()
		}
		if e.HasError() {
			if e.ErrorClass == cerrors.ClassFatal {
				p.fatal.Add(1)
			} else {
				p.transient.Add(1)
			}
		}
	}
	// A restart within recovering changes no status: since keeps the
	// start of the episode, which is what an alert on a long recovery
	// measures.
	if e.StatusAfter == "" {
		return
	}
	if before, _ := p.status.Swap(e.StatusAfter).(lifecycle.Status); before != e.StatusAfter {
		p.since.Store(e.Time.UnixNano())
	}
}

// WatchRestarts exports the restarts waiting in the scheduler: how many
// pipelines wait and when the earliest one is due. pending is called on
// each scrape.
func (m *Metrics) WatchRestarts(span func() (n int, earliest, latest time.Time)) {
	m.registry.MustRegister(&restartsCollector{span: span,
		waiting: prometheus.NewDesc("conduit_pending_restarts",
			"Pipelines waiting for a scheduled restart.", nil, nil),
		next: prometheus.NewDesc("conduit_next_restart_timestamp_seconds",
			"When the earliest scheduled restart is due, in Unix seconds; absent when none waits.", nil, nil),
		last: prometheus.NewDesc("conduit_last_restart_timestamp_seconds",
			"When the latest scheduled restart is due, in Unix seconds; absent when none waits.", nil, nil),
	})
}

type restartsCollector struct {
	span                func() (int, time.Time, time.Time)
	waiting, next, last *prometheus.Desc
}

func (c *restartsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.waiting
	ch <- c.next
	ch <- c.last
}

func (c *restartsCollector) Collect(ch chan<- prometheus.Metric) {
	n, earliest, latest := c.span()
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n))
	if n > 0 {
		ch <- prometheus.MustNewConstMetric(c.next, prometheus.GaugeValue, float64(earliest.UnixNano())/1e9)
		ch <- prometheus.MustNewConstMetric(c.last, prometheus.GaugeValue, float64(latest.UnixNano())/1e9)
	}
}

// CountEvent counts an audit event that did not come from a supervisor
// (for example dedup-skipped).
func (m *Metrics) CountEvent(kind string) { m.events.WithLabelValues(kind).Inc() }

// pipelineCollector exports every registered pipeline's series at scrape
// time, from the lock-free handles.
type pipelineCollector struct {
	m                               *Metrics
	status, since, restarts, faults *prometheus.Desc
}

func newPipelineCollector(m *Metrics) *pipelineCollector {
	return &pipelineCollector{
		m: m,
		status: prometheus.NewDesc("conduit_pipeline_status",
			"1 for the status a pipeline is in (running, recovering, degraded, stopped), 0 for the others.",
			[]string{"pipeline_id", "status"}, nil),
		since: prometheus.NewDesc("conduit_pipeline_status_since_timestamp_seconds",
			"When the pipeline entered its current status, in Unix seconds; restarts while recovering do not move it, so for a recovering pipeline it is when the recovery began.",
			[]string{"pipeline_id"}, nil),
		restarts: prometheus.NewDesc("conduit_pipeline_restarts_total",
			"Restarts of a pipeline by the supervisor after a transient error.", []string{"pipeline_id"}, nil),
		faults: prometheus.NewDesc("conduit_pipeline_faults_total",
			"Runs of a pipeline that ended with an error, by error class.", []string{"pipeline_id", "class"}, nil),
	}
}

func (c *pipelineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.status
	ch <- c.since
	ch <- c.restarts
	ch <- c.faults
}

func (c *pipelineCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.RLock()
	defer c.m.mu.RUnlock()
	for _, p := range c.m.pipelines {
		current := p.Status()
		for _, st := range auditlog.Statuses() {
			v := 0.0
			if st == current {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.status, prometheus.GaugeValue, v, p.id, st.String())
		}
		ch <- prometheus.MustNewConstMetric(c.since, prometheus.GaugeValue, float64(p.since.Load())/1e9, p.id)
		ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(p.restarts.Load()), p.id)
		ch <- prometheus.MustNewConstMetric(c.faults, prometheus.CounterValue, float64(p.transient.Load()), p.id, cerrors.ClassTransient.String())
		ch <- prometheus.MustNewConstMetric(c.faults, prometheus.CounterValue, float64(p.fatal.Load()), p.id, cerrors.ClassFatal.String())
	}
}

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

// WatchBreakers exports the dependency breakers that states returns on
// each scrape: whether each is open and how many pipelines it holds. The
// dependencies declared returns (those the pipelines' connectors name) are
// exported too, closed and holding none, while their breaker has seen no
// failure: an alert on a breaker has its series before the first outage.
func (m *Metrics) WatchBreakers(states func() []lifecycle.BreakerState, declared func() []string) {
	m.registry.MustRegister(&breakersCollector{states: states, declared: declared,
		open: prometheus.NewDesc("conduit_dependency_breaker_open",
			"1 while the dependency's breaker is open (its pipelines wait while a canary retries it), 0 while it counts failures.", []string{"dependency"}, nil),
		held: prometheus.NewDesc("conduit_dependency_breaker_held_pipelines",
			"Pipelines waiting for the dependency's breaker to close.", []string{"dependency"}, nil),
	})
}

type breakersCollector struct {
	states     func() []lifecycle.BreakerState
	declared   func() []string
	open, held *prometheus.Desc
}

func (c *breakersCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.held
}

func (c *breakersCollector) Collect(ch chan<- prometheus.Metric) {
	states := c.states()
	seen := make(map[string]bool, len(states))
	for _, st := range states {
		seen[st.Dependency] = true
		open := 0.0
		if st.Open {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, open, st.Dependency)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(len(st.Held)), st.Dependency)
	}
	if c.declared == nil {
		return
	}
	for _, dep := range c.declared() {
		if dep == "" || seen[dep] {
			continue
		}
		seen[dep] = true
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, 0, dep)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, 0, dep)
	}
}
