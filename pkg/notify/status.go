package notify

import (
	"slices"
	"time"
)

// TargetStatus is a target as `conduit notifications list` shows it: its
// filters (never its URL or key) and how its deliveries go.
type TargetStatus struct {
	Name, Kind  string
	Events      []string
	Pipelines   []string
	MinSeverity string
	// Pending is how many notifications wait in the outbox for it.
	Pending int
	// Failures counts its failed attempts in a row; NextAttemptAt is when
	// it is tried again (zero: not waiting).
	Failures      int
	NextAttemptAt time.Time
	// LastDelivery is its last successful delivery, LastError its last
	// failure's error (kept until a delivery succeeds).
	LastDelivery time.Time
	LastError    string
}

// Delivery is one attempt to send a message.
type Delivery struct {
	Time   time.Time
	Target string
	Kind   Kind
	// Notifications is how many the message covered, about Pipelines
	// pipelines (or dependencies).
	Notifications, Pipelines int
	// Error is empty when the target took it.
	Error string
	// Test marks `conduit notifications test`.
	Test bool
}

// Status is every target and the recent deliveries, newest first.
type Status struct {
	Targets    []TargetStatus
	Deliveries []Delivery
}

// Status returns the targets and the last deliveries.
func (n *Notifier) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Status{Deliveries: slices.Clone(n.recent)}
	slices.Reverse(s.Deliveries)
	for _, t := range n.targets {
		s.Targets = append(s.Targets, t.status)
	}
	return s
}

func (n *Notifier) setPending(t *target, pending int) {
	n.metrics.pending.WithLabelValues(t.Name).Set(float64(pending))
	n.mu.Lock()
	defer n.mu.Unlock()
	t.status.Pending = pending
	t.status.Failures, t.status.NextAttemptAt = t.failures, t.retryAt
}

// noteDelivery remembers an attempt; test attempts leave the target's
// delivery state alone.
func (n *Notifier) noteDelivery(t *target, g group, at time.Time, err error, test bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d := Delivery{Time: at, Target: t.Name, Kind: g.kind, Notifications: len(g.entries), Pipelines: len(g.subjects()), Test: test}
	if err != nil {
		d.Error = err.Error()
	}
	if len(n.recent) == recentDeliveries {
		n.recent = slices.Delete(n.recent, 0, 1)
	}
	n.recent = append(n.recent, d)
	if test {
		return
	}
	t.status.Failures, t.status.NextAttemptAt = t.failures, t.retryAt
	if err != nil {
		t.status.LastError = d.Error
		return
	}
	t.status.LastDelivery, t.status.LastError = at, ""
}
