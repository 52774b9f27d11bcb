package lifecycle

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/conduitry/conduit/pkg/config"
)

// ManagedRules are the recovery rules managed while conduit runs (kept in
// the database; DESIGN 5.2), tried after a pipeline's own rules and before
// the global ones of conduit.yml. Set replaces them for every pipeline at
// once: the next fault of any pipeline is decided by the new set. Safe
// for concurrent use.
type ManagedRules struct {
	current atomic.Pointer[managedSet]
}

// managedSet is one version of the rules, with their compiled forms by
// the policy they apply over (a rule's keys apply over the pipeline's
// policy, so pipelines with different policies get different rules).
type managedSet struct {
	rules    []config.Rule // in the order they are tried
	mu       sync.Mutex
	compiled map[string][]Rule
}

// NewManagedRules returns an empty set.
func NewManagedRules() *ManagedRules {
	m := &ManagedRules{}
	m.current.Store(&managedSet{compiled: map[string][]Rule{}})
	return m
}

// Set replaces the rules.
func (m *ManagedRules) Set(rules []config.Rule) {
	sorted := slices.Clone(rules)
	config.SortRules(sorted)
	m.current.Store(&managedSet{rules: sorted, compiled: map[string][]Rule{}})
}

// forPolicy returns the rules compiled over base (whose key is baseKey),
// compiling them on first use. A rule whose keys clash with base (a
// min-delay above the pipeline's max-delay) does not apply to the
// pipelines with that policy; Check tells about it when the rule is
// loaded.
func (m *ManagedRules) forPolicy(base config.ErrorRecovery, baseKey string) []Rule {
	if m == nil {
		return nil
	}
	set := m.current.Load()
	if len(set.rules) == 0 {
		return nil
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if rules, ok := set.compiled[baseKey]; ok {
		return rules
	}
	rules := make([]Rule, 0, len(set.rules))
	for _, r := range set.rules {
		compiled, err := compileRules(base, []config.Rule{r})
		if err != nil {
			continue
		}
		rules = append(rules, compiled...)
	}
	set.compiled[baseKey] = rules
	return rules
}

// CheckRules compiles rules over the policy c, as every pipeline with that
// policy would, and returns the first rule that does not compile.
func CheckRules(c config.ErrorRecovery, rules []config.Rule) error {
	_, err := compileRules(c, rules)
	return err
}

// ManagedRule returns the managed rule called name compiled over p, or nil.
func (p *Policy) ManagedRule(name string) *Rule {
	rules := p.managed.forPolicy(p.base, p.baseKey)
	for i := range rules {
		if rules[i].Name == name {
			return &rules[i]
		}
	}
	return nil
}
