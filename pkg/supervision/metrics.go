package supervision

import (
	"time"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/config"
)

// DeclaredDependencies are the dependencies the provisioned pipelines'
// connectors name, whose breakers the metrics export before they see a
// failure. Called on each scrape.
func (ps *Pipelines) DeclaredDependencies() []string {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	var deps []string
	seen := map[string]bool{}
	for _, m := range ps.pipelines {
		for _, c := range m.cfg.Connectors {
			if c.Dependency != "" && !seen[c.Dependency] {
				seen[c.Dependency] = true
				deps = append(deps, c.Dependency)
			}
		}
	}
	return deps
}

// statusSince is when a pipeline entered the status its supervisor starts
// in (lifecycle.State.StartStatus) from its persisted state st: for a
// recovering one the start of its episode - the restarts within it write
// the state too, and a recovery that a restart of conduit interrupted goes
// on; for one that resumes running, now; otherwise the state's last write,
// which a transition makes, and now for a state never written.
func statusSince(st lifecycle.State, now time.Time) time.Time {
	start := st.StartStatus()
	if start == lifecycle.StatusRecovering && st.Episode != nil && st.Episode.EndedAt.IsZero() && !st.Episode.StartedAt.IsZero() {
		return st.Episode.StartedAt
	}
	if start != st.Status || st.UpdatedAt.IsZero() {
		return now
	}
	return st.UpdatedAt
}

// deadLetterRules are the names of the dead-letter rules of a pipeline's
// policy (its own and the global ones), which the metrics export at zero.
func deadLetterRules(p lifecycle.Policy) []string {
	var names []string
	for _, rules := range [][]lifecycle.Rule{p.Rules, p.GlobalRules} {
		for _, ps := range rules {
			if ps.Action == config.ActionDeadLetter && ps.Name != "" {
				names = append(names, ps.Name)
			}
		}
	}
	return names
}
