package metrics

import "github.com/prometheus/client_golang/prometheus"

// WriteFailure is why the store did not commit a write: the reason label
// of conduit_store_write_failures_total. The set is closed, so that the
// label has a handful of values and each is exported from the start.
type WriteFailure string

const (
	// WriteError: the store failed the commit. What it carried is not
	// stored; pipeline states are written again at their next transition.
	WriteError WriteFailure = "error"
	// WriteRefused: the store refuses writes for now (its disk is full,
	// or the process is short of file descriptors); audit events and the
	// states recorded with them wait in memory and are written later.
	WriteRefused WriteFailure = "refused"
	// WriteFenced: another instance of the cluster runs the pipeline now
	// and writes its state; expected right after a pipeline moved.
	WriteFenced WriteFailure = "fenced"
	// WriteDisowned: another conduit process opened the same database
	// since; this one's writes are refused and it stops.
	WriteDisowned WriteFailure = "disowned"
)

var writeFailures = []WriteFailure{WriteError, WriteRefused, WriteFenced, WriteDisowned}

// writeCounters are the store's failed writes by reason and the audit
// log's figures.
type writeCounters struct {
	failures *prometheus.CounterVec
	// byReason are failures' series, resolved once: every reason is
	// exported at zero before its first failure.
	byReason map[WriteFailure]prometheus.Counter
}

func newWriteCounters(reg *prometheus.Registry) writeCounters {
	w := writeCounters{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conduit_store_write_failures_total",
			Help: "Writes (a pipeline's state with its audit event, source positions, dedup entries) the store did not commit, by reason: error (the store failed), refused (no space or file descriptors: held and retried), fenced (another instance of the cluster runs the pipeline now), disowned (another conduit process opened the same database since).",
		}, []string{"reason"}),
		byReason: make(map[WriteFailure]prometheus.Counter, len(writeFailures)),
	}
	for _, r := range writeFailures {
		w.byReason[r] = w.failures.WithLabelValues(string(r))
	}
	reg.MustRegister(w.failures)
	return w
}

// StoreWriteFailed counts writes the store did not commit, for reason.
func (m *Metrics) StoreWriteFailed(reason WriteFailure, writes int) {
	c, ok := m.writes.byReason[reason]
	if !ok {
		c = m.writes.failures.WithLabelValues(string(reason))
	}
	c.Add(float64(writes))
}

// AuditFigures are what the audit log reports about its writes.
type AuditFigures struct {
	// Held is how many recorded events wait in memory while the store
	// refuses writes.
	Held int
	// Failed counts the events that could not be written at all.
	Failed uint64
}

// WatchAuditLog exports the audit log's figures, read on each scrape.
func (m *Metrics) WatchAuditLog(figures func() AuditFigures) {
	m.registry.MustRegister(&auditCollector{figures: figures,
		held: prometheus.NewDesc("conduit_audit_events_held",
			"Audit events (and the pipeline states recorded with them) waiting in memory because the store refuses writes; they are written once it takes writes again.", nil, nil),
		failed: prometheus.NewDesc("conduit_audit_write_failures_total",
			"Audit events that could not be written and are missing from the audit log.", nil, nil),
	})
}

type auditCollector struct {
	figures      func() AuditFigures
	held, failed *prometheus.Desc
}

func (c *auditCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.failed
}

func (c *auditCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.figures()
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(f.Held))
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(f.Failed))
}
