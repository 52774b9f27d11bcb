package lifecycle

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

// Policy is a pipeline's resolved error-recovery configuration
// (pipelines.error-recovery, a preset, the pipeline's own block and the
// rules; DESIGN 5.1, 5.2).
type Policy struct {
	// Preset is the preset the values came from where nothing else set
	// them (shown, not used).
	Preset string
	// Strategy computes the delay of restart n (see Delay).
	Strategy string
	// Schedule is the list of delays of the schedule strategy; the last
	// one repeats.
	Schedule []time.Duration
	MinDelay time.Duration
	// MaxDelay caps every delay but the schedule's, jitter included.
	MaxDelay time.Duration
	// BackoffFactor multiplies the delay after each attempt; at least 1.
	BackoffFactor float64
	// MaxRetries is how many restarts an episode may use; -1 is unlimited
	// and 0 degrades at the first transient error.
	MaxRetries int
	// HealthyWindow (max-retries-window) is how long a restarted pipeline
	// must run without an error to count as recovered.
	HealthyWindow time.Duration
	// Probation is how long a restarted pipeline must stay up to be
	// running again without a record end to end (an idle source); its
	// fail count still resets only after HealthyWindow. 0, or at least
	// HealthyWindow: probation lasts HealthyWindow.
	Probation time.Duration
	// Jitter spreads each delay by up to ±Jitter of itself (0..1), never
	// past MaxDelay.
	Jitter float64
	// MaxDuration bounds the time an episode may take; 0 is unlimited.
	MaxDuration time.Duration
	// MaxFlaps is how many episodes in a row may start within FlapWindow
	// of a recovery before the pipeline is degraded; -1 never.
	MaxFlaps   int
	FlapWindow time.Duration
	// QuarantineAfter dead-letters a record that failed the same way on
	// this many runs in a row; 0 is off.
	QuarantineAfter int
	// Rules are the pipeline's own rules and GlobalRules the global ones,
	// each in the order they are tried: by priority (higher first), then
	// as written; the pipeline's own first. GlobalRules may be shared by
	// many pipelines (see Policies): not to be changed.
	Rules, GlobalRules []Rule
	// Builtin are conduit's own rules for the known-permanent errors of
	// its connectors (config.BuiltinRules), tried after every other rule.
	// Shared by every pipeline of a Policies: not to be changed.
	Builtin []Rule

	// managed are the rules managed while conduit runs, tried between
	// Rules and GlobalRules; base is the policy they are compiled over.
	managed *ManagedRules
	base    config.ErrorRecovery
	baseKey policyKey
}

// policyKey identifies a policy without its rules. The rules compiled over
// two policies with the same key are the same (their keys apply over the
// policy's), so the caches of compiled global and managed rules are keyed
// by it. It holds every field of Policy but the rules.
type policyKey struct {
	preset, strategy string
	// schedule is the schedule's delays in nanoseconds, comma separated:
	// a slice is not comparable.
	schedule                                                              string
	minDelay, maxDelay, healthyWindow, probation, maxDuration, flapWindow time.Duration
	backoffFactor, jitter                                                 float64
	maxRetries, maxFlaps, quarantineAfter                                 int
}

// key returns p's policyKey.
func (p *Policy) key() policyKey {
	var schedule strings.Builder
	for i, d := range p.Schedule {
		if i > 0 {
			schedule.WriteByte(',')
		}
		schedule.WriteString(strconv.FormatInt(int64(d), 10))
	}
	return policyKey{
		preset: p.Preset, strategy: p.Strategy, schedule: schedule.String(),
		minDelay: p.MinDelay, maxDelay: p.MaxDelay, healthyWindow: p.HealthyWindow, probation: p.Probation,
		maxDuration: p.MaxDuration, flapWindow: p.FlapWindow,
		backoffFactor: p.BackoffFactor, jitter: p.Jitter,
		maxRetries: p.MaxRetries, maxFlaps: p.MaxFlaps, quarantineAfter: p.QuarantineAfter,
	}
}

// Rule is a recovery rule, compiled for matching.
type Rule struct {
	Name     string
	Priority int
	// Action is config.ActionRetry, ActionDegrade or ActionDeadLetter.
	Action string
	// Policy applies to the errors the rule matches (retry): its
	// strategy, schedule and limits. A rule's max-retries counts the
	// failures it matched in the episode.
	Policy Policy
	codes  []config.CodeRange
	class  cerrors.Class
	// message is lower-cased: it matches without regard to case.
	message                        string
	pipelines, components, plugins []string
}

// PolicyFrom converts a resolved configuration (see
// config.ErrorRecoveryOverride.Resolve). It fails when a rule's keys clash
// with the pipeline's policy (a min-delay above its own max-delay).
func PolicyFrom(c config.ErrorRecovery) (Policy, error) {
	p := policyFrom(c)
	var err error
	if p.Rules, err = compileRules(c, c.Rules); err != nil {
		return Policy{}, err
	}
	if p.GlobalRules, err = compileRules(c, c.GlobalRules); err != nil {
		return Policy{}, fmt.Errorf("global %w", err)
	}
	if p.Builtin, err = compileRules(c, config.BuiltinRules()); err != nil {
		return Policy{}, fmt.Errorf("built-in %w", err)
	}
	return p, nil
}

// Policies converts resolved configurations like PolicyFrom, compiling
// the global rules once for all the pipelines whose policies they apply
// over are the same: ten thousand pipelines share one copy of a hundred
// global rules instead of holding a million.
type Policies struct {
	mu      sync.Mutex
	global  map[policyKey][]Rule
	builtin []Rule
	managed *ManagedRules
}

// NewPolicies returns an empty cache.
func NewPolicies() *Policies { return &Policies{global: map[policyKey][]Rule{}} }

// WithManaged makes the policies From returns try the rules of m too, as
// they are at the moment of each fault.
func (ps *Policies) WithManaged(m *ManagedRules) *Policies {
	ps.managed = m
	return ps
}

// From is PolicyFrom, sharing the compiled global rules.
func (ps *Policies) From(c config.ErrorRecovery) (Policy, error) {
	p := policyFrom(c)
	// The global rules' policies depend on the pipeline's (their keys
	// apply over it), so the key is the pipeline's policy without rules.
	key := p.key()
	var err error
	if p.Rules, err = compileRules(c, c.Rules); err != nil {
		return Policy{}, err
	}
	if ps.managed != nil {
		p.managed, p.base, p.baseKey = ps.managed, c, key
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.builtin == nil {
		// The built-in rules only degrade: no key of theirs depends on
		// the pipeline's policy, so one compiled copy serves every one.
		if ps.builtin, err = compileRules(c, config.BuiltinRules()); err != nil {
			return Policy{}, fmt.Errorf("built-in %w", err)
		}
	}
	p.Builtin = ps.builtin
	if len(c.GlobalRules) == 0 {
		return p, nil
	}
	if rules, ok := ps.global[key]; ok {
		p.GlobalRules = rules
		return p, nil
	}
	if p.GlobalRules, err = compileRules(c, c.GlobalRules); err != nil {
		return Policy{}, fmt.Errorf("global %w", err)
	}
	ps.global[key] = p.GlobalRules
	return p, nil
}

// compileRules compiles rules over the policy c, in the order they are
// tried.
func compileRules(c config.ErrorRecovery, rules []config.Rule) ([]Rule, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	sorted := slices.Clone(rules)
	config.SortRules(sorted)
	out := make([]Rule, 0, len(sorted))
	for _, r := range sorted {
		rc, err := c.ForRule(r)
		if err != nil {
			return nil, fmt.Errorf("rule %q (%s:%d): %w", r.Name, r.File, r.Line, err)
		}
		rule := Rule{Name: r.Name, Priority: r.Priority, Action: r.Action, Policy: policyFrom(rc),
			codes: r.Match.Codes, message: strings.ToLower(r.Match.Message),
			pipelines: r.Match.Pipelines, components: r.Match.Components, plugins: r.Match.Plugins}
		if r.Match.Class != "" {
			rule.class, _ = cerrors.ParseClass(r.Match.Class)
		}
		out = append(out, rule)
	}
	return out, nil
}

func policyFrom(c config.ErrorRecovery) Policy {
	return Policy{
		Preset:          c.Preset,
		Strategy:        c.Strategy,
		Schedule:        c.Schedule,
		MinDelay:        c.MinDelay,
		MaxDelay:        c.MaxDelay,
		BackoffFactor:   c.BackoffFactor,
		MaxRetries:      c.MaxRetries,
		HealthyWindow:   c.MaxRetriesWindow,
		Probation:       c.Probation,
		Jitter:          c.Jitter,
		MaxDuration:     c.MaxDuration,
		MaxFlaps:        c.MaxFlaps,
		FlapWindow:      c.FlapWindow,
		QuarantineAfter: c.QuarantineAfter,
	}
}

// Fault is the error that ended a run, as the policy sees it.
type Fault struct {
	Pipeline string
	// Class, Code and Message are the error's classification.
	Class   cerrors.Class
	Code    int
	Message string
	// Component is the connector or processor id, Plugin its plugin.
	Component, Plugin string
	// NamesRecord says the error names the record it is about, which a
	// dead-letter rule needs.
	NamesRecord bool
	// DeadLetterWindow says the run ended because the dead-letter queue's
	// window overflowed; the class is the last nacked record's error's.
	DeadLetterWindow bool
}

// RuleSet is the rules a decision tries, in order: the pipeline's own, the
// managed ones (compiled over its policy), the global ones and the built-in
// ones. It is a snapshot: managed rules loaded after it was taken are not
// in it.
type RuleSet [4][]Rule

// RuleSet returns the rules a decision of p tries now, managed rules as
// they are at this moment.
func (p *Policy) RuleSet() RuleSet {
	return RuleSet{p.Rules, p.managed.forPolicy(p.base, p.baseKey), p.GlobalRules, p.Builtin}
}

// Match returns the first rule that matches f, or nil. Dead-letter rules
// match only errors that name a record.
func (rs *RuleSet) Match(f Fault) *Rule {
	for _, rules := range rs {
		for i := range rules {
			if r := &rules[i]; r.matches(f) {
				return r
			}
		}
	}
	return nil
}

// Match returns the first rule of p's rules now (RuleSet) that matches f,
// or nil.
func (p *Policy) Match(f Fault) *Rule {
	rs := p.RuleSet()
	return rs.Match(f)
}

// DeadLetterRule decides about an error that names its record while the
// run goes on (the engine asks, pkg/pipeline's Config.DeadLetter): the
// first rule that matches it decides, as for a fault, and only a
// dead-letter rule takes the record off the pipeline's hands - it is named
// then. f need not say it names a record: it does.
func (p *Policy) DeadLetterRule(f Fault) (rule string, ok bool) {
	f.NamesRecord = true
	r := p.Match(f)
	if r == nil || r.Action != config.ActionDeadLetter {
		return "", false
	}
	return r.Name, true
}

func (r *Rule) matches(f Fault) bool {
	if r.Action == config.ActionDeadLetter && !f.NamesRecord {
		return false
	}
	if len(r.codes) > 0 && !slices.ContainsFunc(r.codes, func(c config.CodeRange) bool { return c.Contains(f.Code) }) {
		return false
	}
	if r.class != "" && r.class != f.Class {
		return false
	}
	if r.message != "" && !strings.Contains(strings.ToLower(f.Message), r.message) {
		return false
	}
	return globsMatch(r.pipelines, f.Pipeline) && globsMatch(r.components, f.Component) && globsMatch(r.plugins, f.Plugin)
}

// globsMatch reports whether name matches one of globs; no globs match
// every name.
func globsMatch(globs []string, name string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// History is what Decide needs to know about the past.
type History struct {
	// FailCount is the number of transient failures in the current episode
	// before this one.
	FailCount int
	// EpisodeStart is when the current episode began, zero when the
	// pipeline was running (this failure starts one).
	EpisodeStart time.Time
	// RuleCounts counts the failures each rule matched in the episode.
	RuleCounts map[string]int
	// LastRecoveredAt is when the pipeline last recovered, and
	// LastEpisodeAttempts the fail count that episode ended with; Flaps
	// counts the episodes in a row that started within the flap window
	// of a recovery.
	LastRecoveredAt     time.Time
	LastEpisodeAttempts int
	Flaps               int
}

// Action is what the supervisor does next.
type Action int

// Actions.
const (
	ActionRestart Action = iota + 1
	ActionDegrade
)

func (a Action) String() string {
	switch a {
	case ActionRestart:
		return "restart"
	case ActionDegrade:
		return "degrade"
	default:
		return "Action(?)"
	}
}

// Decision is Decide's verdict.
type Decision struct {
	Action Action
	// Attempt is the fail count including this failure; the restart that
	// follows is attempt number Attempt.
	Attempt int
	// Delay is how long to wait before the restart (ActionRestart).
	Delay time.Duration
	// Reason says why (ActionDegrade).
	Reason DegradeReason
	// Class is the class the decision treated the error as: the rule's
	// when a rule decided, else the error's.
	Class cerrors.Class
	// Rule is the rule that decided, nil when none matched; RuleAttempt
	// is how many failures it has matched in the episode, this one
	// included.
	Rule        *Rule
	RuleAttempt int
	// Strategy is the strategy that gave Delay.
	Strategy string
	// Flapping says this failure came within the flap window of the last
	// recovery, so the episode continued that one's backoff; Flaps is how
	// many episodes in a row did.
	Flapping bool
	Flaps    int
}

// Decide is the restart policy as a pure function: given the policy, the
// rules to try (a snapshot: Policy.RuleSet), the history of the episode,
// the fault that just ended a run, the time now and a uniformly random
// number in [0,1) (for jitter and the random strategy), it says whether to
// restart and after how long, or to degrade and why.
//
//   - the first rule that matches decides: retry treats the error as
//     transient and restarts on the rule's schedule and limits, degrade
//     treats it as fatal; without a match the error's class decides;
//   - a fatal error degrades at once;
//   - a failure that starts an episode within flap-window of the last
//     recovery continues that episode's backoff; after max-flaps such
//     episodes in a row the pipeline degrades as flapping;
//   - a failure that brings the fail count (or the rule's count) above
//     max-retries (when that is not -1) degrades with "retries exhausted";
//   - when the episode has lasted max-duration, or the next attempt would
//     fall after it, the pipeline degrades with "max duration" instead of
//     waiting for an attempt it may not make;
//   - otherwise it restarts after the delay of the attempt.
func Decide(p Policy, rules RuleSet, h History, f Fault, now time.Time, random float64) Decision {
	d := Decision{Attempt: h.FailCount + 1, Class: f.Class, Flaps: h.Flaps}
	policy, retries := &p, d.Attempt
	if r := rules.Match(f); r != nil {
		d.Rule, d.RuleAttempt = r, h.RuleCounts[r.Name]+1
		switch r.Action {
		case config.ActionDegrade:
			d.Class = cerrors.ClassFatal
		default:
			d.Class = cerrors.ClassTransient
			policy, retries = &r.Policy, d.RuleAttempt
		}
	}
	if d.Class != cerrors.ClassTransient {
		d.Action, d.Reason = ActionDegrade, ReasonFatal
		switch {
		case d.Rule != nil:
			d.Reason = ReasonRule
		case f.DeadLetterWindow:
			d.Reason = ReasonDeadLetterWindow
		}
		return d
	}
	n := d.Attempt
	if h.EpisodeStart.IsZero() {
		// This failure starts an episode: is it the last one coming back?
		if !h.LastRecoveredAt.IsZero() && now.Sub(h.LastRecoveredAt) < p.FlapWindow {
			d.Flapping, d.Flaps = true, h.Flaps+1
			d.Attempt = h.LastEpisodeAttempts + 1
			if d.Rule == nil {
				retries = d.Attempt
			}
			if p.MaxFlaps >= 0 && d.Flaps > p.MaxFlaps {
				d.Action, d.Reason = ActionDegrade, ReasonFlapping
				return d
			}
		} else {
			d.Flaps = 0
		}
		n = d.Attempt
	}
	if d.Rule != nil {
		// The rule's schedule counts the failures it matched.
		n = d.RuleAttempt
	}
	if policy.MaxRetries >= 0 && retries > policy.MaxRetries {
		d.Action, d.Reason = ActionDegrade, ReasonRetriesExhausted
		return d
	}
	d.Strategy = policy.Strategy
	d.Delay = policy.delay(n, random)
	if policy.MaxDuration > 0 {
		start := h.EpisodeStart
		if start.IsZero() {
			start = now
		}
		if now.Add(d.Delay).Sub(start) > policy.MaxDuration {
			d.Action, d.Reason, d.Delay, d.Strategy = ActionDegrade, ReasonMaxDuration, 0, ""
			return d
		}
	}
	d.Action = ActionRestart
	return d
}

// Delay returns the wait before restart number attempt (1-based) under
// the policy's strategy, then spread by jitter using random in [0,1):
//
//   - exponential: min-delay x backoff-factor^(attempt-1) (the default:
//     1s, 2s, 4s, 8s, 16s, 32s, 1m, 1m, ...);
//   - fixed: min-delay;
//   - linear: min-delay x backoff-factor x attempt;
//   - random: uniform between min-delay and max-delay (random is used for
//     that, not for jitter);
//   - schedule: the attempt-th entry of the schedule, the last repeating.
//
// max-delay caps every strategy but schedule; no delay is shorter than
// config.RestartDelayFloor, whatever the policy asks. It costs the same for every
// attempt: a pipeline that failed a hundred million times gets its delay as
// fast as one that failed once. Jitter spreads the delay d over
// [d - jitter*d, d + jitter*d] but never past the cap: near the cap the
// upper end is cut, so the spread stays uniform below the cap instead of
// piling restarts up at it.
func Delay(p Policy, attempt int, random float64) time.Duration { return p.delay(attempt, random) }

// delay is Delay on a pointer: it runs on a supervisor's goroutine, deep
// in its fault path, where a copy of the policy at every level costs stack.
// Whatever the strategy gives, the wait is at least the restart delay
// floor (config.RestartDelayFloor): no policy or rule restarts a pipeline
// in a hot loop.
func (p *Policy) delay(attempt int, random float64) time.Duration {
	return max(p.strategyDelay(attempt, random), config.RestartDelayFloor)
}

// strategyDelay is the delay the strategy gives, before the floor.
func (p *Policy) strategyDelay(attempt int, random float64) time.Duration {
	if p.Strategy == config.StrategyRandom {
		// Uniform over the part of [min-delay, max-delay] at or above the
		// floor, so that a range reaching below it does not pile restarts
		// up at the floor.
		lo, hi := max(p.MinDelay, config.RestartDelayFloor), max(p.MaxDelay, config.RestartDelayFloor)
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(random*float64(hi-lo))
	}
	d := p.baseDelay(attempt)
	if p.Jitter <= 0 || d <= 0 {
		return d
	}
	lo, width := p.jitterRange(d)
	x := lo + width*random
	if c := p.delayCap(); x >= float64(c) {
		return c
	}
	return max(time.Duration(x), 0)
}

// delayCap is the longest delay the strategy allows: max-delay, or for a
// schedule, none.
func (p *Policy) delayCap() time.Duration {
	if p.Strategy == config.StrategySchedule {
		return math.MaxInt64
	}
	return p.MaxDelay
}

// jitterRange is where jitter may move delay d: from lo, width wide
// (2*spread, centred on d), cut at the cap.
func (p *Policy) jitterRange(d time.Duration) (lo, width float64) {
	spread := p.Jitter * float64(d)
	lo, width = float64(d)-spread, 2*spread
	if c := float64(p.delayCap()); lo+width > c {
		width = max(c-lo, 0)
	}
	return lo, width
}

// baseDelay is the un-jittered delay of an attempt in closed form.
func (p *Policy) baseDelay(attempt int) time.Duration {
	attempt = max(attempt, 1)
	switch p.Strategy {
	case config.StrategySchedule:
		if len(p.Schedule) == 0 {
			return 0
		}
		return p.Schedule[min(attempt, len(p.Schedule))-1]
	case config.StrategyFixed:
		return min(max(p.MinDelay, 0), max(p.MaxDelay, 0))
	case config.StrategyLinear:
		return p.capped(float64(p.MinDelay) * max(p.BackoffFactor, 1) * float64(attempt))
	}
	return p.exponentialDelay(attempt)
}

// capped converts x to a delay no longer than max-delay; a NaN or +Inf x
// fails the comparison and lands on the cap too.
func (p *Policy) capped(x float64) time.Duration {
	if p.MinDelay <= 0 || p.MaxDelay <= 0 {
		return 0
	}
	if !(x < float64(p.MaxDelay)) {
		return p.MaxDelay
	}
	return time.Duration(x)
}

// exponentialDelay is min-delay x backoff-factor^(attempt-1), capped.
func (p *Policy) exponentialDelay(attempt int) time.Duration {
	switch {
	case p.MinDelay <= 0 || p.MaxDelay <= 0:
		return 0
	case p.MinDelay >= p.MaxDelay:
		return p.MaxDelay
	case attempt <= 1 || !(p.BackoffFactor > 1):
		// A factor below 1 (which configuration refuses) would shrink the
		// delay towards zero, a hot restart loop: hold at min-delay.
		return p.MinDelay
	}
	// math.Pow is +Inf for huge attempts: capped lands that on the cap
	// before any conversion to Duration could overflow.
	return p.capped(float64(p.MinDelay) * math.Pow(p.BackoffFactor, float64(attempt-1)))
}

// longestDelay is the longest wait the policy can give restart number
// attempt: its delay with the most jitter can add, or max-delay for the
// random strategy.
func (p *Policy) longestDelay(attempt int) time.Duration {
	if p.Strategy == config.StrategyRandom {
		return max(p.MaxDelay, p.MinDelay, config.RestartDelayFloor)
	}
	longest := p.baseDelay(attempt)
	if p.Jitter > 0 && longest > 0 {
		lo, width := p.jitterRange(longest)
		if x := lo + width; x >= float64(p.delayCap()) {
			longest = p.delayCap()
		} else {
			longest = max(longest, time.Duration(x))
		}
	}
	return max(longest, config.RestartDelayFloor)
}

// CapResumeWait returns when a pipeline that was recovering when the
// process stopped should make its next attempt: at the persisted
// savedNext, but never later than the longest wait the policy, or any of
// its retry rules, gives restart number failCount from now, and never
// earlier than now. A saved time a year ahead, written by a clock that ran
// fast, is cut to that wait; a zero or past one is now. A day-long schedule
// keeps its day.
func CapResumeWait(p Policy, failCount int, savedNext, now time.Time) time.Time {
	longest := p.longestDelay(failCount)
	for _, rules := range p.RuleSet() {
		for i := range rules {
			if r := &rules[i]; r.Action == config.ActionRetry {
				longest = max(longest, r.Policy.longestDelay(failCount))
			}
		}
	}
	if latest := now.Add(longest); savedNext.After(latest) {
		return latest
	}
	if savedNext.Before(now) {
		return now
	}
	return savedNext
}

// probation is how long after a restart the pipeline is running again
// without a record end to end: Probation, cut to the healthy window.
func (p *Policy) probation() time.Duration {
	if p.Probation <= 0 || p.Probation > p.HealthyWindow {
		return p.HealthyWindow
	}
	return p.Probation
}
