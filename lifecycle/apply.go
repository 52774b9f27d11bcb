package lifecycle

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

// ApplyOutcome says what applying a rule did to one pipeline.
type ApplyOutcome struct {
	// Restarted: the pipeline was degraded, its last error matches the
	// rule, and it now waits in recovering for a restart at NextAttemptAt.
	Restarted     bool
	NextAttemptAt time.Time
	// Why says why not, for people.
	Why string
}

// ApplyRule hands a degraded pipeline to the managed rule called name, as
// if the rule had existed when its last error happened: if the error
// matches the rule and the rule retries, the pipeline goes recovering with
// a restart on the rule's schedule (its first delay), and the rule's limits
// count from there. A pipeline that is not degraded, was force-stopped by
// a user (a person decided that, not an error), or whose error the rule
// does not match is left as it is. actor is who applied the rule.
func (s *Supervisor) ApplyRule(ctx context.Context, name string, actor auditlog.Actor) (ApplyOutcome, error) {
	reply := make(chan ApplyOutcome, 1)
	if err := s.send(ctx, applyRuleMsg{rule: name, actor: actor, reply: reply}); err != nil {
		return ApplyOutcome{}, err
	}
	return answer(ctx, s, reply)
}

// stepApplyRule hands a degraded pipeline to a managed rule (snap.rule).
func (p *pipeline) stepApplyRule(m applyRuleMsg, snap *snapshot, fx *effects) {
	a := ruleApplicationOf(&p.state, p.m.phase(), p.retiring(), snap.rule,
		func(f *Fault) { f.Pipeline, f.Plugin = snap.pipelineID, snap.plugin(f.Component) },
		m.actor, snap.now, snap.random)
	if a.outcome.Restarted {
		p.must(eventRetry, fx)
		a.apply(&p.state)
		fx.schedule(a.outcome.NextAttemptAt)
		p.save(snap, fx)
		fx.emit(a.event, snap.now)
	}
	fx.answerApply(m.reply, a.outcome)
}

// ruleApplication is what applying a managed rule does to a pipeline:
// nothing, and why (outcome), or a restart on the rule's schedule - the
// state it changes and the event that records it.
type ruleApplication struct {
	outcome ApplyOutcome
	rule    *Rule
	// info is the pipeline's last error as the rule classifies it.
	info  ErrorInfo
	delay time.Duration
	now   time.Time
	event *auditlog.Event
}

// ruleApplicationOf works out what applying r (nil: the pipeline's
// policy has no managed rule of that name) does to a pipeline in state
// st, whose machine is in phase ph. fault fills in what the state does
// not say of the last error's fault (the pipeline, the component's
// plugin); random gives a restart's jitter. It does no I/O and reads no
// clock.
func ruleApplicationOf(st *State, ph phase, retiring bool, r *Rule, fault func(*Fault),
	actor auditlog.Actor, now time.Time, random float64) ruleApplication {
	not := func(why string) ruleApplication { return ruleApplication{outcome: ApplyOutcome{Why: why}} }
	current := ph.status()
	switch {
	case retiring:
		return not("conduit is shutting down")
	case current != StatusDegraded:
		return not("not degraded (" + current.String() + ")")
	case st.DegradedReason == ReasonForceStop || ph != phaseDegraded:
		return not("force-stopped by a user: start it to run it again")
	case st.LastError == nil:
		return not("no error recorded")
	case r == nil:
		return not("the rule does not apply to this pipeline's policy")
	}
	info := *st.LastError
	f := Fault{Code: info.Code, Message: info.Message, Component: info.Component, NamesRecord: true,
		Class: CodeClass(info.Class, info.Source, info.Code, info.ComponentKind)}
	fault(&f)
	switch {
	case !r.matches(f):
		return not("its last error does not match the rule")
	case r.Action == config.ActionDegrade:
		return not("the rule degrades: it would decide the same")
	}
	delay := Delay(r.Policy, 1, random)
	next := now.Add(delay)
	info.Rule, info.Class, info.Source = r.Name, cerrors.ClassTransient, cerrors.SourceRule
	return ruleApplication{
		outcome: ApplyOutcome{Restarted: true, NextAttemptAt: next, Why: fmt.Sprintf("restart in %s", delay)},
		rule:    r, info: info, delay: delay, now: now,
		event: withError(&auditlog.Event{Kind: auditlog.KindRecovering, Time: now, StatusBefore: current, StatusAfter: StatusRecovering, Actor: actor,
			Attempt: 1, Delay: delay, NextAttemptAt: next, Strategy: r.Policy.Strategy, Action: ActionRestart.String(),
			Message: fmt.Sprintf("rule %s applied by %s to the degraded pipeline: its last error matches; restart 1 scheduled in %s (strategy %s)",
				strconv.Quote(r.Name), actor, delay, r.Policy.Strategy)}, &info),
	}
}

// apply changes the state as a restart the rule decided says, except what
// the state machine owns (the status): a new episode with its first
// attempt, the fail count and the next attempt.
func (a *ruleApplication) apply(st *State) {
	next := a.outcome.NextAttemptAt
	info := a.info
	st.DegradedReason = ""
	st.FailCount = 1
	st.NextAttemptAt = next
	st.LastError = &info
	st.Episode = &Episode{StartedAt: a.now}
	st.Episode.add(Attempt{Number: 1, FailedAt: info.At, Error: info, Delay: a.delay, NextAttemptAt: next, Strategy: a.rule.Policy.Strategy})
	st.Episode.countRule(a.rule)
}
