package notify

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Notifier's own series, registered by Register. A
// target that keeps failing is itself something to alert on: nothing
// else would say that nobody is being told.
type metrics struct {
	sent     *prometheus.CounterVec
	failures *prometheus.CounterVec
	pending  *prometheus.GaugeVec
}

func newMetrics() metrics {
	return metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conduit_notifications_sent_total",
			Help: "Notifications a target took, by target and kind (a grouped message counts each notification it covers).",
		}, []string{"target", "kind"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "conduit_notification_failures_total",
			Help: "Failed attempts to deliver to a target (an error status, no answer, a refused connection).",
		}, []string{"target"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "conduit_notifications_pending",
			Help: "Notifications waiting in the outbox for a target.",
		}, []string{"target"}),
	}
}

// Register adds the Notifier's series to reg (the runtime's /metrics);
// a nil Notifier has none.
func (n *Notifier) Register(reg prometheus.Registerer) error {
	if n == nil {
		return nil
	}
	for _, t := range n.targets {
		// Every target from the start, at zero, so that rate() and
		// absent() work before its first failure.
		n.metrics.failures.WithLabelValues(t.Name)
		n.metrics.pending.WithLabelValues(t.Name)
	}
	for _, c := range []prometheus.Collector{n.metrics.sent, n.metrics.failures, n.metrics.pending} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
