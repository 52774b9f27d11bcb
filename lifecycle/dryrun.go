package lifecycle

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

// PastFault is a fault the audit log kept, as a dry run replays it.
type PastFault struct {
	Fault
	At time.Time
	// Actual is what happened: the action the policy took (restart,
	// degrade) and the rule that decided, if one did.
	ActualAction, ActualRule string
}

// DryRunRule is what one rule would have done with the past faults.
type DryRunRule struct {
	Name   string
	Action string
	// Schedule describes the rule's restarts over the global policy
	// (strategy, delays, limit); empty unless Action is retry.
	Schedule string
	// Matched counts the faults the rule would have decided (the first
	// rule that matches decides), by pipeline.
	Matched   int
	Pipelines map[string]int
	// Actual counts what happened to those faults instead: "restart",
	// "degrade", with " by rule <name>" when a rule decided.
	Actual map[string]int
	// Warning says which delays the rule asks for are below the restart
	// delay floor (config.RestartDelayFloor); empty when none.
	Warning string
}

// DryRunReport is the result of DryRun.
type DryRunReport struct {
	Faults int
	Rules  []DryRunRule
	// Unmatched counts the faults no rule matches, by code, class and the
	// start of their message (numbers in it as #), the most frequent
	// first.
	Unmatched      int
	UnmatchedKinds []UnmatchedFaults
}

// UnmatchedFaults are faults of one kind no rule matched.
type UnmatchedFaults struct {
	Code      int
	Class     cerrors.Class
	Message   string
	Count     int
	Pipelines map[string]int
}

var digits = regexp.MustCompile(`[0-9]+`)

// unmatchedMessage is how much of a message groups unmatched faults.
const unmatchedMessage = 80

// DryRunner replays past faults against rules, in the order the rules
// would be tried, compiled over the global policy: the first rule that
// matches a fault decides it. It changes nothing, and holds counts, not
// the faults, so that a large audit log can be replayed. A dead-letter
// rule is taken to match the faults it fits even when the error named no
// record: the audit log does not say.
type DryRunner struct {
	// rules are the compiled rules as a decision tries them; index maps
	// each to its place in the report.
	rules     RuleSet
	index     map[*Rule]int
	rep       DryRunReport
	unmatched map[string]*UnmatchedFaults
}

// NewDryRunner compiles rules over base; a rule that does not compile is
// an error naming it.
func NewDryRunner(rules []config.Rule, base config.ErrorRecovery) (*DryRunner, error) {
	compiled, err := compileRules(base, rules)
	if err != nil {
		return nil, err
	}
	d := &DryRunner{rules: RuleSet{compiled}, index: make(map[*Rule]int, len(compiled)), unmatched: map[string]*UnmatchedFaults{},
		rep: DryRunReport{Rules: make([]DryRunRule, len(compiled))}}
	for i := range compiled {
		d.index[&compiled[i]] = i
	}
	warnings := make(map[string]string, len(rules))
	for _, r := range rules {
		warnings[r.Name] = config.FloorWarning(r.Policy.BelowFloor())
	}
	for i, r := range compiled {
		d.rep.Rules[i] = DryRunRule{Name: r.Name, Action: r.Action, Pipelines: map[string]int{}, Actual: map[string]int{},
			Warning: warnings[r.Name]}
		if r.Action == config.ActionRetry {
			d.rep.Rules[i].Schedule = describeSchedule(r.Policy)
		}
	}
	return d, nil
}

// maxUnmatchedKinds bounds the kinds of unmatched faults a report keeps;
// faults of further kinds are counted in Unmatched only.
const maxUnmatchedKinds = 1000

// Add replays one fault.
func (d *DryRunner) Add(f PastFault) {
	d.rep.Faults++
	f.NamesRecord = true
	// The matcher a live decision and the engine's dead-letter hook use.
	matched := d.rules.Match(f.Fault)
	if matched == nil {
		d.rep.Unmatched++
		// Faults that differ only in numbers (a counter, an id, a port)
		// are one kind.
		msg := digits.ReplaceAllString(f.Message, "#")
		if r := []rune(msg); len(r) > unmatchedMessage {
			msg = string(r[:unmatchedMessage]) + "..."
		}
		key := fmt.Sprintf("%d|%s|%s", f.Code, f.Class, msg)
		u := d.unmatched[key]
		if u == nil {
			if len(d.unmatched) >= maxUnmatchedKinds {
				return
			}
			u = &UnmatchedFaults{Code: f.Code, Class: f.Class, Message: msg, Pipelines: map[string]int{}}
			d.unmatched[key] = u
		}
		u.Count++
		u.Pipelines[f.Pipeline]++
		return
	}
	r := &d.rep.Rules[d.index[matched]]
	r.Matched++
	r.Pipelines[f.Pipeline]++
	actual := f.ActualAction
	if actual == "" {
		actual = "unknown"
	}
	if f.ActualRule != "" {
		actual += " by rule " + f.ActualRule
	}
	r.Actual[actual]++
}

// Report returns the report of the faults added so far.
func (d *DryRunner) Report() DryRunReport {
	rep := d.rep
	rep.UnmatchedKinds = nil
	for _, u := range d.unmatched {
		rep.UnmatchedKinds = append(rep.UnmatchedKinds, *u)
	}
	sort.Slice(rep.UnmatchedKinds, func(a, b int) bool {
		x, y := rep.UnmatchedKinds[a], rep.UnmatchedKinds[b]
		if x.Count != y.Count {
			return x.Count > y.Count
		}
		return x.Message < y.Message
	})
	return rep
}

// describeSchedule says how a rule restarts, for people.
func describeSchedule(p Policy) string {
	var b strings.Builder
	switch p.Strategy {
	case config.StrategySchedule:
		parts := make([]string, len(p.Schedule))
		for i, d := range p.Schedule {
			parts[i] = d.String()
		}
		fmt.Fprintf(&b, "schedule [%s]", strings.Join(parts, ", "))
	case config.StrategyFixed:
		fmt.Fprintf(&b, "fixed %s", max(p.MinDelay, config.RestartDelayFloor))
	case config.StrategyRandom:
		fmt.Fprintf(&b, "random %s-%s", p.MinDelay, p.MaxDelay)
	default:
		fmt.Fprintf(&b, "%s %s x%g up to %s", p.Strategy, p.MinDelay, p.BackoffFactor, p.MaxDelay)
	}
	if p.MaxRetries < 0 {
		b.WriteString(", unlimited retries")
	} else {
		fmt.Fprintf(&b, ", at most %d retries", p.MaxRetries)
	}
	if p.MaxDuration > 0 {
		fmt.Fprintf(&b, " within %s", p.MaxDuration)
	}
	return b.String()
}

// CodeClass is the class an error's code gives, before rules: what a
// rule's match.class compares with. classifiedBy is how the recorded class
// was decided; a rule's decision hides the code's class, which the code
// table gives back (an error without a code from a processor is fatal).
func CodeClass(recorded cerrors.Class, classifiedBy cerrors.Source, code int, componentKind cerrors.ComponentKind) cerrors.Class {
	if classifiedBy != cerrors.SourceRule {
		if c, err := cerrors.ParseClass(string(recorded)); err == nil {
			return c
		}
	}
	if code == 0 && componentKind == cerrors.ComponentProcessor {
		return cerrors.ClassFatal
	}
	return cerrors.ClassOf(code)
}
