package lifecycle

// The fault path: a run that ended with an error is decided about
// (stepFault, from the state alone), what that changes is worked out
// (faultOutcome, the state and the events), and carryOutFault applies it
// to the state and appends the effects; all of it is part of the step.

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
)

// stepRunFailed decides about a run that ended with err: stepFault
// decides from the state, and carryOutFault changes the state and says
// what records it. A decision to restart a pipeline whose failure names a
// dependency first asks the dependency's breaker (an outside party, which
// counts the failure): its answer comes back as breakerAnswered, which
// carries the fault out.
func (p *pipeline) stepRunFailed(err error, snap *snapshot, fx *effects) {
	now := snap.now
	info := describeError(err, now)
	if info.Dependency == "" && snap.dependencyOf != nil && info.Component != "" {
		info.Dependency = snap.dependencyOf(info.Component)
	}
	var window deadLetterWindowError
	f := Fault{Pipeline: snap.pipelineID, Class: info.Class, Code: info.Code, Message: info.Message,
		Component: info.Component, Plugin: snap.plugin(info.Component), DeadLetterWindow: errors.As(err, &window)}
	step := stepFault(&p.state, info, f, snap.policy, snap.rules, now, snap.random)
	if step.info.Dependency != "" && step.decision.Action == ActionRestart && snap.breakers && !p.retiring() {
		fx.askBreaker(&step)
		return
	}
	p.carryOutFault(&step, "", snap, fx)
}

// carryOutFault applies a decided fault: faultOutcome says what it
// changes and which events record it, and this function puts that in the
// order that keeps a state and the event that records it together. held
// names the dependency whose open breaker holds the restart ("" when none
// does).
func (p *pipeline) carryOutFault(step *faultStep, held string, snap *snapshot, fx *effects) {
	now := snap.now
	out := faultOutcome(step, p.m.current(), now, held, snap.policy)
	out.record(&p.state)
	fx.add(effect{do: doStopTimers})
	if out.degrade {
		p.leaveBreaker(snap, fx)
		// Announced before the transition, as every fault is.
		fx.emit(out.fault, now)
		p.must(eventDegrade, fx)
		out.apply(&p.state)
	} else {
		p.must(eventFault, fx)
		out.apply(&p.state)
		if held != "" {
			p.must(eventHold, fx)
			p.state.HeldBy = held
		} else if !p.retiring() {
			// Scheduled from the decision, not from when the state is on
			// disk: in a fault storm the saves queue up, and the schedule
			// must not slip behind them. The fault is announced after it:
			// writing the event durably must not delay the schedule.
			fx.schedule(out.next)
		}
		fx.emit(out.fault, now)
	}
	p.save(snap, fx)
	fx.emit(out.after, now)
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

// stepFault decides about a fault from the state without touching it (st
// is only read; rules is the snapshot of the rules the decision tries):
// the rule that matches, restart or degrade (Decide), the record it keeps
// failing on.
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

// faultChange is what a decided fault does: the error as recorded, the
// state it changes (record, then apply), when the restart is due (next;
// zero when the pipeline degrades or a breaker holds it), and the two
// events that record it: the fault, then the pipeline degraded or
// recovering.
type faultChange struct {
	step    *faultStep
	now     time.Time
	held    string
	degrade bool
	next    time.Time
	fault   *auditlog.Event
	after   *auditlog.Event
}

// faultOutcome works out what step does to a pipeline whose status is
// current: the state it changes and the events that record it, from the
// decision alone. held names the dependency whose open breaker holds the
// restart ("" when none does). It does no I/O and reads no clock.
func faultOutcome(step *faultStep, current Status, now time.Time, held string, p *Policy) faultChange {
	d := step.decision
	c := faultChange{step: step, now: now, held: held, degrade: d.Action == ActionDegrade}
	info := &step.info
	c.fault = withError(&auditlog.Event{Kind: auditlog.KindFault, Time: now, StatusBefore: current, StatusAfter: current, Actor: ActorSystem,
		Attempt: d.Attempt, Action: d.Action.String(), Strategy: d.Strategy, Message: faultMessage(d)}, info)
	if c.degrade {
		c.after = withError(&auditlog.Event{Kind: auditlog.KindDegraded, Time: now, StatusBefore: current, StatusAfter: StatusDegraded, Actor: ActorSystem,
			Attempt: d.Attempt, Reason: string(d.Reason), Message: degradedMessage(d, *p)}, info)
		return c
	}
	next := now.Add(d.Delay)
	c.fault.Delay, c.fault.NextAttemptAt = d.Delay, next
	if step.quarantined {
		c.fault.Message += "; record quarantined: " + strconv.Itoa(step.poison.Runs) + " runs in a row failed on it this way, the next run sends it to the dead-letter queue"
	}
	if held != "" {
		c.after = withError(&auditlog.Event{Kind: auditlog.KindRecovering, Time: now, StatusBefore: current, StatusAfter: StatusRecovering, Actor: ActorSystem,
			Attempt: d.Attempt, Reason: "breaker", Action: d.Action.String(),
			Message: "pipeline recovering: waiting for dependency " + strconv.Quote(held) + ", whose breaker is open (other pipelines failed on it too); it restarts once the canary gets a record through"}, info)
		return c
	}
	c.next = next
	reason := ""
	if d.Flapping {
		// Said in a field, not only in the message, for whoever acts on
		// it (notifications).
		reason = string(ReasonFlapping)
	}
	c.after = withError(&auditlog.Event{Kind: auditlog.KindRecovering, Time: now, StatusBefore: current, StatusAfter: StatusRecovering, Actor: ActorSystem,
		Attempt: d.Attempt, Delay: d.Delay, NextAttemptAt: next, Strategy: d.Strategy, Action: d.Action.String(),
		Reason: reason, Message: recoveringMessage(d)}, info)
	return c
}

// record notes the fault in the state - its error, the record it failed
// on, the flaps of an episode it starts - before the fault is announced.
func (c *faultChange) record(st *State) {
	info := c.step.info
	st.LastError, st.Poison = &info, c.step.poison
	if c.step.episodeStart.IsZero() {
		st.Flaps = c.step.decision.Flaps
	}
}

// apply changes the rest of the state as the decision says, except what
// the state machine owns (the status, probation, the dependency that
// holds it): the episode's attempts, the fail count and the next attempt,
// or why the pipeline degraded.
func (c *faultChange) apply(st *State) {
	d, info, now := c.step.decision, c.step.info, c.now
	if c.degrade {
		st.DegradedReason = d.Reason
		st.NextAttemptAt = time.Time{}
		if e := st.Episode; e != nil && e.EndedAt.IsZero() {
			e.add(Attempt{Number: d.Attempt, FailedAt: now, Error: info})
			e.countRule(d.Rule)
			e.EndedAt, e.Outcome = now, "degraded ("+string(d.Reason)+")"
		}
		return
	}
	if c.step.episodeStart.IsZero() {
		st.Episode = &Episode{StartedAt: now}
	}
	next := now.Add(d.Delay)
	st.Episode.add(Attempt{Number: d.Attempt, FailedAt: now, Error: info, Delay: d.Delay, NextAttemptAt: next, Strategy: d.Strategy})
	st.Episode.countRule(d.Rule)
	st.FailCount = d.Attempt
	st.NextAttemptAt = next
	if c.held != "" {
		st.NextAttemptAt = time.Time{}
	}
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
