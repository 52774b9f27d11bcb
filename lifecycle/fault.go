package lifecycle

// The fault path: a run that ended with an error is decided about
// (stepFault, from the state alone) and the decision applied.

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
)

// onFault applies the policy to a run that ended with err.
func (s *Supervisor) onFault(err error) {
	now := s.cfg.Clock.Now()
	info := describeError(err, now)
	if info.Dependency == "" && s.cfg.DependencyOf != nil && info.Component != "" {
		info.Dependency = s.cfg.DependencyOf(info.Component)
	}
	var window deadLetterWindowError
	f := Fault{Pipeline: s.cfg.PipelineID, Class: info.Class, Code: info.Code, Message: info.Message,
		Component: info.Component, Plugin: s.pluginOf(info.Component), DeadLetterWindow: errors.As(err, &window)}
	step := stepFault(&s.state, info, f, &s.cfg.Policy, s.cfg.Policy.RuleSet(), now, s.cfg.Random())
	d, info, quarantined, startsEpisode := step.decision, step.info, step.quarantined, step.episodeStart.IsZero()
	s.state.LastError = &info
	s.state.Poison = step.poison
	if startsEpisode {
		s.state.Flaps = d.Flaps
	}
	current := s.m.current()
	// The fault is announced first, but after the restart is scheduled:
	// writing the event durably must not delay the schedule.
	fault := withError(auditlog.Event{Kind: auditlog.KindFault, Time: now, StatusBefore: current, StatusAfter: current, Actor: ActorSystem,
		Attempt: d.Attempt, Action: d.Action.String(), Strategy: d.Strategy, Message: faultMessage(d)}, &info)
	if d.Action == ActionRestart {
		fault.Delay, fault.NextAttemptAt = d.Delay, now.Add(d.Delay)
		if quarantined {
			fault.Message += fmt.Sprintf("; record quarantined: %d runs in a row failed on it this way, the next run sends it to the dead-letter queue", s.state.Poison.Runs)
		}
	}
	s.stopWindow()

	if d.Action == ActionDegrade {
		s.leaveBreaker()
		s.emit(fault)
		from := s.mustTransition(eventDegrade)
		s.state.DegradedReason = d.Reason
		s.state.NextAttemptAt = time.Time{}
		if s.state.Episode != nil && s.state.Episode.EndedAt.IsZero() {
			s.state.Episode.add(Attempt{Number: d.Attempt, FailedAt: now, Error: info})
			s.state.Episode.countRule(d.Rule)
		}
		s.endEpisode("degraded (" + string(d.Reason) + ")")
		s.save()
		s.emit(withError(auditlog.Event{Kind: auditlog.KindDegraded, Time: now, StatusBefore: from, StatusAfter: StatusDegraded, Actor: ActorSystem,
			Attempt: d.Attempt, Reason: string(d.Reason), Message: degradedMessage(d, s.cfg.Policy)}, &info))
		return
	}

	from := s.mustTransition(eventFault)
	next := now.Add(d.Delay)
	if startsEpisode {
		s.state.Episode = &Episode{StartedAt: now}
	}
	s.state.Episode.add(Attempt{Number: d.Attempt, FailedAt: now, Error: info, Delay: d.Delay, NextAttemptAt: next, Strategy: d.Strategy})
	s.state.Episode.countRule(d.Rule)
	s.state.FailCount = d.Attempt
	s.state.NextAttemptAt = next
	if dep := info.Dependency; dep != "" && s.cfg.Breakers != nil && !s.shuttingDown && s.cfg.Breakers.Fault(dep, s.cfg.PipelineID, s.releaser()) {
		// The dependency's breaker is open: the canary retries it, this
		// pipeline waits until it is back.
		s.mustTransition(eventHold)
		s.state.NextAttemptAt, s.state.HeldBy = time.Time{}, dep
		s.emit(fault)
		s.save()
		s.emit(withError(auditlog.Event{Kind: auditlog.KindRecovering, Time: now, StatusBefore: from, StatusAfter: StatusRecovering, Actor: ActorSystem,
			Attempt: d.Attempt, Reason: "breaker", Action: d.Action.String(),
			Message: "pipeline recovering: waiting for dependency " + strconv.Quote(dep) + ", whose breaker is open (other pipelines failed on it too); it restarts once the canary gets a record through"}, &info))
		return
	}
	if !s.shuttingDown {
		// Scheduled from the decision, not from when the state is on disk:
		// in a fault storm the saves queue up, and the schedule must not
		// slip behind them.
		s.scheduleRestart(next)
	}
	s.emit(fault)
	s.save()
	reason := ""
	if d.Flapping {
		// Said in a field, not only in the message, for whoever acts on
		// it (notifications).
		reason = string(ReasonFlapping)
	}
	s.emit(withError(auditlog.Event{Kind: auditlog.KindRecovering, Time: now, StatusBefore: from, StatusAfter: StatusRecovering, Actor: ActorSystem,
		Attempt: d.Attempt, Delay: d.Delay, NextAttemptAt: next, Strategy: d.Strategy, Action: d.Action.String(),
		Reason: reason, Message: recoveringMessage(d)}, &info))
}

func (s *Supervisor) pluginOf(component string) string {
	if s.cfg.PluginOf == nil || component == "" {
		return ""
	}
	return s.cfg.PluginOf(component)
}

// faultStep is what a fault does to a pipeline, decided from its state
// without touching it: the decision, the error as it is recorded (a rule
// that decided replaces its class), the record it keeps failing on, and
// when the episode it belongs to began (zero: this fault starts one).
type faultStep struct {
	decision     Decision
	info         ErrorInfo
	poison       *PoisonRecord
	quarantined  bool
	episodeStart time.Time
}

// stepFault decides about a fault: the pure part of the supervisor's fault
// path, which then applies the step - transitions, state, events, the
// restart's schedule, the breaker - in the order that keeps a state and the
// event that records it together. st is only read; rules is the snapshot
// of the rules the decision tries.
func stepFault(st *State, info ErrorInfo, f Fault, p *Policy, rules RuleSet, now time.Time, random float64) faultStep {
	h := History{FailCount: st.FailCount, LastRecoveredAt: st.LastRecoveredAt,
		LastEpisodeAttempts: st.LastEpisodeAttempts, Flaps: st.Flaps}
	if st.Episode != nil && st.Episode.EndedAt.IsZero() {
		h.EpisodeStart, h.RuleCounts = st.Episode.StartedAt, st.Episode.RuleCounts
	}
	d := Decide(*p, rules, h, f, now, random)
	if d.Rule != nil {
		// The rule decided the class; what the code said is in the message.
		info.Rule, info.Class, info.Source = d.Rule.Name, d.Class, cerrors.SourceRule
	}
	limit := p.QuarantineAfter
	if d.Rule != nil {
		limit = d.Rule.Policy.QuarantineAfter
	}
	poison, quarantined := nextPoison(st.Poison, info, limit)
	return faultStep{decision: d, info: info, poison: poison, quarantined: quarantined, episodeStart: h.EpisodeStart}
}

// nextPoison counts the runs in a row that failed on the same record the
// same way, and quarantines it at limit (the quarantine-after of the policy
// that decided: the rule's, or the pipeline's; 0 never). It returns the
// new record, prev left as it was, and whether this failure quarantined it.
func nextPoison(prev *PoisonRecord, info ErrorInfo, limit int) (*PoisonRecord, bool) {
	if info.Record == nil {
		return nil, false
	}
	next := &PoisonRecord{Position: info.Record, Error: info, Runs: 1}
	if prev.sameFailure(info) {
		c := *prev
		c.Runs++
		c.Error = info
		next = &c
	}
	if limit > 0 && next.Runs >= limit && !next.Quarantined {
		next.Quarantined = true
		return next, true
	}
	return next, false
}

// faultMessage says what was decided about a failed run, and by what.
// The messages of the fault path are put together without fmt: they are
// built on the supervisor's goroutine at every fault, whose stack ten
// thousand supervisors each need.
func faultMessage(d Decision) string {
	by := "its error's class"
	if d.Rule != nil {
		by = "rule " + strconv.Quote(d.Rule.Name) + " (action " + d.Rule.Action + ")"
	}
	msg := "pipeline run failed; " + by + " decided: " + d.Action.String()
	if d.Flapping {
		msg += "; it failed again within flap-window of recovering (flap " + strconv.Itoa(d.Flaps) + " in a row)"
	}
	return msg
}

func recoveringMessage(d Decision) string {
	msg := "pipeline recovering: restart " + strconv.Itoa(d.Attempt) + " scheduled in " + d.Delay.String() + " (strategy " + d.Strategy + ")"
	if d.Rule != nil {
		msg += ", by rule " + strconv.Quote(d.Rule.Name) + " (its failure " + strconv.Itoa(d.RuleAttempt) + ")"
	}
	if d.Flapping {
		msg += "; flapping: the backoff continues where the last episode ended"
	}
	return msg
}

func degradedMessage(d Decision, p Policy) string {
	limits := p
	if d.Rule != nil {
		limits = d.Rule.Policy
	}
	switch d.Reason {
	case ReasonRetriesExhausted:
		if d.Rule != nil {
			return fmt.Sprintf("pipeline degraded: rule %q allows %d restarts (max-retries) and they did not help", d.Rule.Name, limits.MaxRetries)
		}
		return fmt.Sprintf("pipeline degraded: %d restarts did not help (max-retries %d)", limits.MaxRetries, limits.MaxRetries)
	case ReasonMaxDuration:
		return fmt.Sprintf("pipeline degraded: recovery would take longer than max-duration %s", limits.MaxDuration)
	case ReasonRule:
		return fmt.Sprintf("pipeline degraded: rule %q says errors like this need a human", d.Rule.Name)
	case ReasonDeadLetterWindow:
		return "pipeline degraded: the dead-letter queue window overflowed (more records nacked than window-nack-threshold allows in window-size), and the last nacked record's error is fatal; it needs a human"
	case ReasonFlapping:
		return fmt.Sprintf("pipeline degraded: flapping, it failed again within flap-window %s of recovering %d times in a row (max-flaps %d)",
			p.FlapWindow, d.Flaps, p.MaxFlaps)
	default:
		return "pipeline degraded: fatal error, it needs a human"
	}
}

// describeError turns the error that ended a run into what the user sees:
// the cause (not the engine's wrapper), its classification and the
// component it came from (processor errors classify as such).
func describeError(err error, now time.Time) ErrorInfo {
	info := ErrorInfo{At: now}
	cause := err
	var comp componentError
	if errors.As(err, &comp) {
		info.ComponentKind, info.Component = comp.Component()
		cause = comp.Unwrap()
	}
	c := cerrors.ClassifyComponent(cerrors.ComponentKind(info.ComponentKind), cause)
	info.Code = c.Code
	info.Class = c.Class
	info.Source = c.Source
	info.Message = truncateMessage(c.Message, maxErrorMessage)
	if pos, ok := cerrors.RecordOf(cause); ok {
		info.Record = pos
	}
	if dep, ok := c.Details["dependency"].(string); ok {
		info.Dependency = truncateMessage(dep, maxDependency)
	}
	return info
}

// maxDependency bounds a dependency name taken from an error.
const maxDependency = 200

// deadLetterWindowError is how a run error says the dead-letter queue's
// window overflowed (pkg/pipeline's DLQWindowError implements it).
type deadLetterWindowError interface {
	error
	DeadLetterWindowOverflow()
}
