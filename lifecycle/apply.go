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

func (s *Supervisor) onApplyRule(name string, actor auditlog.Actor) ApplyOutcome {
	switch {
	case s.shuttingDown:
		return ApplyOutcome{Why: "conduit is shutting down"}
	case s.m.current() != StatusDegraded:
		return ApplyOutcome{Why: "not degraded (" + s.m.current().String() + ")"}
	case s.state.DegradedReason == ReasonForceStop:
		return ApplyOutcome{Why: "force-stopped by a user: start it to run it again"}
	case s.state.LastError == nil:
		return ApplyOutcome{Why: "no error recorded"}
	}
	r := s.cfg.Policy.ManagedRule(name)
	if r == nil {
		return ApplyOutcome{Why: "the rule does not apply to this pipeline's policy"}
	}
	info := *s.state.LastError
	f := Fault{Pipeline: s.cfg.PipelineID, Code: info.Code, Message: info.Message, Component: info.Component,
		Plugin: s.pluginOf(info.Component), NamesRecord: true,
		Class: CodeClass(info.Class, info.Source, info.Code, info.ComponentKind)}
	if !r.matches(f) {
		return ApplyOutcome{Why: "its last error does not match the rule"}
	}
	if r.Action == config.ActionDegrade {
		return ApplyOutcome{Why: "the rule degrades: it would decide the same"}
	}
	now := s.cfg.Clock.Now()
	delay := Delay(r.Policy, 1, s.cfg.Random())
	next := now.Add(delay)
	from := s.mustTransition(eventRetry)
	s.state.DegradedReason = ""
	s.state.FailCount = 1
	s.state.NextAttemptAt = next
	info.Rule, info.Class, info.Source = r.Name, cerrors.ClassTransient, cerrors.SourceRule
	s.state.LastError = &info
	s.state.Episode = &Episode{StartedAt: now}
	s.state.Episode.add(Attempt{Number: 1, FailedAt: info.At, Error: info, Delay: delay, NextAttemptAt: next, Strategy: r.Policy.Strategy})
	s.state.Episode.countRule(r)
	s.scheduleRestart(next)
	s.save()
	s.emit(withError(auditlog.Event{Kind: auditlog.KindRecovering, Time: now, StatusBefore: from, StatusAfter: StatusRecovering, Actor: actor,
		Attempt: 1, Delay: delay, NextAttemptAt: next, Strategy: r.Policy.Strategy, Action: ActionRestart.String(),
		Message: fmt.Sprintf("rule %s applied by %s to the degraded pipeline: its last error matches; restart 1 scheduled in %s (strategy %s)",
			strconv.Quote(r.Name), actor, delay, r.Policy.Strategy)}, &info))
	return ApplyOutcome{Restarted: true, NextAttemptAt: next, Why: fmt.Sprintf("restart in %s", delay)}
}
