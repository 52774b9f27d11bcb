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
	compiled map[policyKey]compiledManaged
}

// compiledManaged is a set compiled over one policy: the rules that apply,
// and the ones that do not, with why.
type compiledManaged struct {
	rules   []Rule
	clashes []RuleClash
}

// RuleClash is a managed rule that does not apply to the pipelines of a
// policy because its keys clash with that policy's (a min-delay above the
// pipeline's max-delay, say). It is reported when the rule is loaded and
// when such a pipeline is provisioned; the rule is then left out for those
// pipelines, never silently.
type RuleClash struct {
	Rule string
	Err  error
}

// String is the compile error, which names the rule and where it is
// defined.
func (c RuleClash) String() string { return c.Err.Error() }

// NewManagedRules returns an empty set.
func NewManagedRules() *ManagedRules {
	m := &ManagedRules{}
	m.current.Store(&managedSet{compiled: map[policyKey]compiledManaged{}})
	return m
}

// Set replaces the rules.
func (m *ManagedRules) Set(rules []config.Rule) {
	sorted := slices.Clone(rules)
	config.SortRules(sorted)
	m.current.Store(&managedSet{rules: sorted, compiled: map[policyKey]compiledManaged{}})
}

// forPolicy returns the rules compiled over base (whose key is baseKey),
// compiling them on first use. A rule whose keys clash with base does not
// apply to the pipelines with that policy; Clashes says which and why.
func (m *ManagedRules) forPolicy(base config.ErrorRecovery, baseKey policyKey) []Rule {
	return m.compiledFor(base, baseKey).rules
}

func (m *ManagedRules) compiledFor(base config.ErrorRecovery, baseKey policyKey) compiledManaged {
	if m == nil {
		return compiledManaged{}
	}
	set := m.current.Load()
	if len(set.rules) == 0 {
		return compiledManaged{}
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	if c, ok := set.compiled[baseKey]; ok {
		return c
	}
	c := compileManaged(base, set.rules)
	set.compiled[baseKey] = c
	return c
}

// compileManaged compiles each of rules over base on its own, so that one
// that clashes leaves the others applying.
func compileManaged(base config.ErrorRecovery, rules []config.Rule) compiledManaged {
	c := compiledManaged{rules: make([]Rule, 0, len(rules))}
	for _, r := range rules {
		compiled, err := compileRules(base, []config.Rule{r})
		if err != nil {
			c.clashes = append(c.clashes, RuleClash{Rule: r.Name, Err: err})
			continue
		}
		c.rules = append(c.rules, compiled...)
	}
	return c
}

// ManagedClashes returns the managed rules that do not apply to a pipeline
// with policy p, with why; nil when all apply.
func (p *Policy) ManagedClashes() []RuleClash {
	return slices.Clone(p.managed.compiledFor(p.base, p.baseKey).clashes)
}

// RuleClashes returns which of rules, loaded as managed rules, would not
// apply to a pipeline with policy p, and why.
func (p *Policy) RuleClashes(rules []config.Rule) []RuleClash {
	return compileManaged(p.base, rules).clashes
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
