package supervision

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
)

// recoveryFigures count how recovery went since the process started, for
// GetRecoverySummary.
type recoveryFigures struct {
	since              time.Time
	recovered, degrade atomic.Int64
	mu                 sync.Mutex
	restartsByRule     map[string]int64
}

func newRecoveryFigures(now time.Time) *recoveryFigures {
	return &recoveryFigures{since: now.UTC(), restartsByRule: map[string]int64{}}
}

// count takes a supervisor's event into account.
func (f *recoveryFigures) count(e *auditlog.Event) {
	switch e.Kind {
	case auditlog.KindRecovered:
		f.recovered.Add(1)
	case auditlog.KindDegraded:
		if e.Reason != string(lifecycle.ReasonForceStop) {
			f.degrade.Add(1)
		}
	case auditlog.KindFault:
		if e.Action != lifecycle.ActionRestart.String() {
			return
		}
		rule := "none"
		if e.ErrorRule != "" {
			rule = e.ErrorRule
		}
		f.mu.Lock()
		f.restartsByRule[rule]++
		f.mu.Unlock()
	}
}

// RecoverySummary implements api.Summaries.
func (ps *Pipelines) RecoverySummary() api.RecoverySummary {
	f := ps.figures
	sm := api.RecoverySummary{Since: f.since, EpisodesRecovered: f.recovered.Load(), EpisodesDegraded: f.degrade.Load()}
	sm.PendingRestarts, sm.EarliestNextAttempt, sm.LatestAttempt = ps.restarts.Span()
	if ps.breakers != nil {
		for _, st := range ps.breakers.States() {
			sm.HeldByBreakers += len(st.Held)
		}
	}
	f.mu.Lock()
	sm.RestartsByRule = maps.Clone(f.restartsByRule)
	f.mu.Unlock()
	return sm
}
