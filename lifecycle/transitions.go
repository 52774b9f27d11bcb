package lifecycle

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
)

// resume takes up the initial state when the supervisor starts. The first
// event's status before is the status the audit log last recorded: stopped
// for a new pipeline (created, provisioned) and after a clean shutdown,
// the persisted status after a crash.
func (s *Supervisor) resume() {
	if !s.cfg.Persisted {
		if s.state.Status != StatusRunning {
			// Remembered, so that the next process knows the pipeline.
			s.save()
			return
		}
		s.emit(Event{Kind: auditlog.KindStarting, From: StatusStopped, To: StatusRunning, Actor: ActorConfig,
			Message: "pipeline starting"})
		s.save()
		s.emit(Event{Kind: auditlog.KindRunning, From: StatusRunning, To: StatusRunning, Actor: ActorConfig,
			Message: "pipeline running"})
		s.startRun()
		return
	}
	from := s.state.Status
	// The machine starts a recovering pipeline waiting: a breaker does not
	// outlive its process (a pipeline it held restarts like any other
	// recovering one, and counts again if it fails), nor does a probation.
	s.syncPhase()
	// A clean shutdown persists running and recovering pipelines as
	// stopped for shutdown, so one persisted as running or recovering was
	// cut off; for the others the process tells.
	how := "conduit had not stopped cleanly (crash, kill or power loss)"
	switch {
	case s.state.StopReason.resumable():
		switch s.state.StopReason {
		case StopReasonShutdown:
			how = cmp.Or(s.cfg.Takeover.how(StopReasonShutdown), "conduit had stopped cleanly")
		case StopReasonHandover:
			how = cmp.Or(s.cfg.Takeover.how(StopReasonHandover), "another instance handed the pipeline over")
		default:
			how = "conduit stopped while the pipeline was being " + string(s.state.StopReason)
		}
		s.state.StopReason, s.state.ResumeStatus = "", 0
	case from == StatusRunning || from == StatusRecovering:
		how = cmp.Or(s.cfg.Takeover.how(""), how)
	case !s.cfg.ProcessCrashed:
		how = "conduit had stopped cleanly"
	}
	switch s.state.Status {
	case StatusRunning:
		s.emit(Event{Kind: auditlog.KindResumed, From: from, To: StatusRunning, Actor: ActorSystem,
			Message: how + "; pipeline was running: starting it again from its last saved position"})
		if from != StatusRunning {
			s.save()
		}
		s.emit(Event{Kind: auditlog.KindRunning, From: StatusRunning, To: StatusRunning, Actor: ActorSystem, Message: "pipeline running"})
		s.startRun()
		if s.provingHealthy() {
			// It was running again after a probation: its fail count resets
			// after a healthy window of this run.
			s.window = s.cfg.Clock.NewTimer(s.cfg.Policy.HealthyWindow)
		}
	case StatusRecovering:
		now := s.cfg.Clock.Now()
		next := CapResumeWait(s.cfg.Policy, s.state.FailCount, s.state.NextAttemptAt, now)
		message := how + "; pipeline was recovering: next attempt at its persisted time"
		if !next.Equal(s.state.NextAttemptAt) && s.state.NextAttemptAt.After(now) {
			message = fmt.Sprintf("%s; pipeline was recovering: its persisted next attempt %s is further away than its policy allows, moved to %s",
				how, s.state.NextAttemptAt.Format(time.RFC3339), next.Format(time.RFC3339))
			s.log.Warn("persisted next attempt is later than the recovery policy allows (was the clock wrong?); capped",
				zap.Time("persisted_next_attempt_at", s.state.NextAttemptAt), zap.Time("next_attempt_at", next))
		}
		s.state.NextAttemptAt = next
		s.emit(Event{Kind: auditlog.KindResumed, From: from, To: StatusRecovering, Actor: ActorSystem,
			Attempt: s.state.FailCount, Delay: next.Sub(now), NextAttemptAt: next, Error: s.state.LastError,
			Message: message})
		s.save()
		s.scheduleRestart(next)
	case StatusDegraded:
		s.emit(Event{Kind: auditlog.KindResumed, From: from, To: StatusDegraded, Actor: ActorSystem,
			Reason: string(s.state.DegradedReason), Error: s.state.LastError,
			Message: how + "; pipeline stays degraded until it is started"})
	case StatusStopped:
	}
}

func (s *Supervisor) onStart(actor string) error {
	if !s.m.can(eventStart) {
		return &TransitionError{Event: string(eventStart), From: s.m.current()}
	}
	if s.run != nil {
		return ErrStillStopping
	}
	from, err := s.transition(eventStart)
	if err != nil {
		return err
	}
	s.state.FailCount = 0
	// A human started it: what came before no longer counts as flapping.
	s.state.Flaps, s.state.LastRecoveredAt, s.state.LastEpisodeAttempts = 0, time.Time{}, 0
	s.state.Poison = nil
	s.state.NextAttemptAt = time.Time{}
	s.state.DegradedReason = ""
	s.emit(Event{Kind: auditlog.KindStarting, From: from, To: StatusRunning, Actor: actor, Message: "pipeline starting"})
	s.save()
	s.emit(Event{Kind: auditlog.KindRunning, From: StatusRunning, To: StatusRunning, Actor: actor, Message: "pipeline running"})
	s.startRun()
	return nil
}

func (s *Supervisor) onStop(m stopMsg) {
	if m.force {
		s.forceStop(m.reply)
		return
	}
	from, err := s.transition(eventStop)
	if err != nil {
		m.reply <- err
		return
	}
	s.stopWindow()
	s.takeOverRestart()
	s.leaveBreaker()
	s.state.NextAttemptAt = time.Time{}
	s.endEpisode("stopped")
	s.save()
	if s.run == nil {
		s.emit(Event{Kind: auditlog.KindStopped, From: from, To: StatusStopped, Actor: ActorUser, Message: "pipeline stopped"})
		m.reply <- nil
		return
	}
	// Asked first, then told: whoever sees the stopping event knows the
	// run was asked to stop (one still being built is then discarded).
	s.run.stopping = true
	s.run.stop()
	s.emit(Event{Kind: auditlog.KindStopping, From: from, To: StatusStopped, Actor: ActorUser,
		Message: "pipeline stopping: source stops reading, in-flight records drain"})
	s.waiters = append(s.waiters, m.reply)
}

func (s *Supervisor) forceStop(reply chan error) {
	if s.m.current() == StatusStopped && s.run != nil {
		// A graceful stop is under way and taking too long: cut it short.
		// The status stays stopped; the dropped records are read again on
		// the next start because their positions were never saved.
		s.run.forced = true
		s.run.cancel()
		s.waiters = append(s.waiters, reply)
		return
	}
	from, err := s.transition(eventDegrade)
	if err != nil {
		reply <- err
		return
	}
	s.stopWindow()
	s.takeOverRestart()
	s.leaveBreaker()
	s.state.DegradedReason = ReasonForceStop
	s.state.NextAttemptAt = time.Time{}
	s.endEpisode("degraded (" + string(ReasonForceStop) + ")")
	s.save()
	s.emit(Event{Kind: auditlog.KindDegraded, From: from, To: StatusDegraded, Actor: ActorUser, Reason: string(ReasonForceStop),
		Message: "pipeline force-stopped: in-flight records were dropped and will be read again on the next start"})
	if s.run == nil {
		reply <- nil
		return
	}
	s.run.forced = true
	s.run.cancel()
	s.waiters = append(s.waiters, reply)
}

func (s *Supervisor) onRunEnded(id int, err error) {
	r := s.run
	if r == nil || r.id != id {
		return
	}
	s.run = nil
	r.cancel()
	if r.forced || r.stopping {
		if r.forced {
			s.log.Warn("pipeline run force-stopped; in-flight records were dropped and will be read again on the next start")
		}
		if err != nil && !r.forced {
			// The drain itself failed; the stop still happened. Keep the
			// error so the user sees it, but do not restart.
			info := describeError(err, s.cfg.Clock.Now())
			s.state.LastError = &info
			s.save()
			s.log.Warn("pipeline stopped with an error while draining", zap.String("error", info.Message))
		}
		switch {
		case s.m.current() != StatusStopped:
			// Force-stopped: the degraded event was written then.
		case s.retirement != nil && s.state.StopReason == s.retirement.Reason:
			why := s.retirement
			s.emit(Event{Kind: auditlog.KindStopped, From: StatusStopped, To: StatusStopped, Actor: why.Actor, Reason: string(why.Reason), Message: why.Stopped})
		default:
			s.emit(Event{Kind: auditlog.KindStopped, From: StatusStopped, To: StatusStopped, Actor: ActorUser, Message: "pipeline stopped"})
		}
		for _, w := range s.waiters {
			w <- nil
		}
		s.waiters = nil
		return
	}
	if err == nil {
		// The run finished on its own (a source that ended): nothing to
		// recover from.
		from := s.mustTransition(eventStop)
		s.stopWindow()
		s.endEpisode("stopped")
		s.save()
		s.emit(Event{Kind: auditlog.KindStopped, From: from, To: StatusStopped, Actor: ActorSystem, Reason: string(StopReasonFinished),
			Message: "pipeline finished: its source has no more records"})
		return
	}
	s.onFault(err)
}

// onFault applies the policy to a run that ended with err.
func (s *Supervisor) onFault(err error) {
	now := s.cfg.Clock.Now()
	info := describeError(err, now)
	if info.Dependency == "" && s.cfg.DependencyOf != nil && info.Component != "" {
		info.Dependency = s.cfg.DependencyOf(info.Component)
	}
	class, _ := cerrors.ParseClass(info.Class)
	var window deadLetterWindowError
	f := Fault{Pipeline: s.cfg.PipelineID, Class: class, Code: info.Code, Message: info.Message,
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
	fault := Event{Kind: auditlog.KindFault, At: now, From: current, To: current, Actor: ActorSystem, Error: &info,
		Attempt: d.Attempt, Action: d.Action.String(), Strategy: d.Strategy, Message: faultMessage(d)}
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
		s.emit(Event{Kind: auditlog.KindDegraded, From: from, To: StatusDegraded, Actor: ActorSystem, Error: &info,
			Attempt: d.Attempt, Reason: string(d.Reason), Message: degradedMessage(d, s.cfg.Policy)})
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
		s.emit(Event{Kind: auditlog.KindRecovering, From: from, To: StatusRecovering, Actor: ActorSystem, Error: &info,
			Attempt: d.Attempt, Reason: "breaker", Action: d.Action.String(),
			Message: "pipeline recovering: waiting for dependency " + strconv.Quote(dep) + ", whose breaker is open (other pipelines failed on it too); it restarts once the canary gets a record through"})
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
	s.emit(Event{Kind: auditlog.KindRecovering, From: from, To: StatusRecovering, Actor: ActorSystem, Error: &info,
		Attempt: d.Attempt, Delay: d.Delay, NextAttemptAt: next, Strategy: d.Strategy, Action: d.Action.String(),
		Message: recoveringMessage(d)})
}

// maxDependency bounds a dependency name taken from an error.
const maxDependency = 200

// releaser is how the breaker lets this pipeline restart. The breaker
// calls it from another supervisor's goroutine: it must not block on this
// one's inbox, so a full inbox is left to a goroutine that ends once the
// message is in or the supervisor is done.
func (s *Supervisor) releaser() func(after time.Duration) {
	return func(after time.Duration) {
		msg := releaseMsg{after: after}
		select {
		case s.inbox <- msg:
		case <-s.done:
		default:
			go func() {
				select {
				case s.inbox <- msg:
				case <-s.done:
				}
			}()
		}
	}
}

// onRelease restarts a pipeline its dependency's breaker held, after a
// delay.
func (s *Supervisor) onRelease(after time.Duration) {
	if s.m.phase() != phaseHeld || s.pending != nil || s.run != nil || s.shuttingDown {
		return
	}
	dep := s.state.HeldBy
	now := s.cfg.Clock.Now()
	at := now.Add(after)
	s.mustTransition(eventRelease)
	s.state.NextAttemptAt = at
	s.scheduleRestart(at)
	s.save()
	s.emit(Event{Kind: auditlog.KindRecovering, From: StatusRecovering, To: StatusRecovering, Actor: ActorSystem,
		Error: s.state.LastError, Attempt: s.state.FailCount, Delay: at.Sub(now), NextAttemptAt: at, Reason: "breaker",
		Action:  ActionRestart.String(),
		Message: "pipeline recovering: dependency " + strconv.Quote(dep) + " is back (its canary got a record through); restart scheduled in " + at.Sub(now).Round(time.Millisecond).String()})
}

// leaveBreaker tells the breaker of the dependency the pipeline last
// failed on that it no longer waits for nor retries it.
func (s *Supervisor) leaveBreaker() {
	if s.cfg.Breakers == nil || s.state.LastError == nil || s.state.LastError.Dependency == "" {
		return
	}
	s.cfg.Breakers.Leave(s.state.LastError.Dependency, s.cfg.PipelineID)
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
		info.Rule, info.Class, info.Source = d.Rule.Name, d.Class.String(), cerrors.SourceRule.String()
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

// scheduleRestart prepares the next run and hands it to the restart
// scheduler, which launches it at due.
func (s *Supervisor) scheduleRestart(due time.Time) {
	ar := s.newActiveRun()
	launch := func(at time.Time) { go s.runLoop(ar, at) }
	s.pending = &pendingRestart{ticket: s.restarts.schedule(due, launch), run: ar, scheduled: due}
}

// takeOverRestart cancels the pending restart. If the scheduler launched it
// already, the launched run becomes the supervisor's run, for the caller
// to stop like any other (it sees the stop before it opens anything).
func (s *Supervisor) takeOverRestart() {
	p := s.pending
	if p == nil {
		return
	}
	s.pending = nil
	if s.restarts.cancel(p.ticket) {
		p.run.cancel()
		return
	}
	s.run = p.run
}

// onRestarted takes note that the scheduler launched the pending restart.
// A restart that a stop took over meanwhile is not announced: it is being
// stopped.
func (s *Supervisor) onRestarted(m restartedMsg) {
	p := s.pending
	if p == nil || p.run.id != m.id {
		return
	}
	s.pending = nil
	s.run = p.run
	if _, err := s.transition(eventRestart); err != nil {
		s.bug(eventRestart, err)
		return
	}
	s.state.NextAttemptAt = time.Time{}
	// A restart is not persisted: the persisted state (recovering, next
	// attempt time now past) already makes a process that crashes from
	// here on restart the pipeline at once, which is what it would do with
	// the restart persisted. Skipping the write keeps a fault storm's
	// restarts off the disk.
	s.emit(Event{Kind: auditlog.KindRestarted, At: m.at, From: StatusRecovering, To: StatusRecovering, Actor: ActorSystem,
		Attempt: s.state.FailCount, NextAttemptAt: p.scheduled,
		Message: fmt.Sprintf("pipeline restarted; it is running again once a record makes it end to end or it stays up for the %s probation", s.cfg.Policy.probation())})
	// The healthy window counts from the restart (a failed start ends it
	// early through the fault); the probation from when the run's
	// connectors are open (onProbation), which is no earlier than now.
	s.stopWindow()
	s.window = s.cfg.Clock.NewTimer(s.cfg.Policy.HealthyWindow - s.cfg.Clock.Now().Sub(m.at))
	if s.cfg.Policy.probation() < s.cfg.Policy.HealthyWindow {
		s.probation = s.cfg.Clock.NewTimer(s.cfg.Policy.probation())
	}
}

// onProbation acts on the probation timer: the probation passes once the
// run's connectors have been open for all of it - a run still connecting
// has proved nothing - and the timer is set again for what is left.
func (s *Supervisor) onProbation() {
	if s.run == nil || s.m.phase() != phaseProbation {
		return
	}
	left := s.cfg.Policy.probation()
	if at := s.run.openedAt.Load(); at != nil {
		left -= s.cfg.Clock.Now().Sub(*at)
	}
	if left > 0 {
		s.probation = s.cfg.Clock.NewTimer(left)
		return
	}
	s.probationPassed()
}

// onWindow acts on the healthy window's timer.
func (s *Supervisor) onWindow() {
	if s.run != nil && (s.m.phase() == phaseProbation || s.provingHealthy()) {
		s.recovered(RecoveredByWindow)
	}
}

// provingHealthy says the pipeline is running again after its probation
// while its episode is still open: the fail count resets when the healthy
// window passes or a record makes it end to end, and a failure before
// then continues the episode's backoff.
func (s *Supervisor) provingHealthy() bool {
	return s.m.current() == StatusRunning && s.state.Episode != nil && s.state.Episode.EndedAt.IsZero()
}

// probationPassed makes a restarted pipeline that stayed up for its
// probation running again, without a record end to end: an idle source
// that reconnected is healthy as far as anyone can tell. Its fail count
// and episode stay until the healthy window passes.
func (s *Supervisor) probationPassed() {
	from, err := s.transition(eventRecovered)
	if err != nil {
		s.bug(eventRecovered, err)
		return
	}
	if le := s.state.LastError; le != nil && le.Dependency != "" && s.cfg.Breakers != nil {
		// Connected and up: the dependency is back, for the pipelines its
		// breaker holds too.
		s.cfg.Breakers.Success(le.Dependency, s.cfg.PipelineID)
	}
	s.save()
	window := s.cfg.Policy.HealthyWindow
	s.emit(Event{Kind: auditlog.KindRecovered, From: from, To: StatusRunning, Actor: ActorSystem, Reason: string(RecoveredByProbation),
		Attempt: s.state.FailCount,
		Message: fmt.Sprintf("pipeline running again: its connectors stayed open for the %s probation, no record yet; fail count %d resets once it has run %s (max-retries-window) or a record makes it end to end, and a failure before then continues the backoff",
			s.cfg.Policy.probation(), s.state.FailCount, window)})
}

func (s *Supervisor) recovered(reason RecoveredReason) {
	from := s.m.current()
	if s.m.phase() == phaseProbation {
		var err error
		if from, err = s.transition(eventRecovered); err != nil {
			return
		}
	} else if !s.provingHealthy() {
		// A first record after the pipeline left recovering (stopped,
		// degraded), or of a run that is not proving itself, has nothing
		// to end.
		return
	}
	s.stopWindow()
	if le := s.state.LastError; le != nil && le.Dependency != "" && s.cfg.Breakers != nil {
		s.cfg.Breakers.Success(le.Dependency, s.cfg.PipelineID)
	}
	attempts := s.state.FailCount
	s.state.FailCount = 0
	// Remembered for flap detection: a failure within flap-window
	// continues this episode's backoff.
	s.state.LastRecoveredAt, s.state.LastEpisodeAttempts = s.cfg.Clock.Now(), attempts
	// Records go through again: whatever it failed on is behind it.
	s.state.Poison = nil
	s.endEpisode("recovered (" + string(reason) + ")")
	s.save()
	message := "pipeline recovered: running again, fail count reset"
	if from == StatusRunning {
		message = "pipeline recovered: fail count reset (it was running again after its probation)"
	}
	s.emit(Event{Kind: auditlog.KindRecovered, From: from, To: StatusRunning, Actor: ActorSystem, Reason: string(reason),
		Attempt: attempts, Message: message})
}

func (s *Supervisor) endEpisode(outcome string) {
	if e := s.state.Episode; e != nil && e.EndedAt.IsZero() {
		e.EndedAt = s.cfg.Clock.Now()
		e.Outcome = outcome
	}
}

// stopWindow stops the healthy window's timer and the probation's.
func (s *Supervisor) stopWindow() {
	if s.window != nil {
		s.window.Stop()
		s.window = nil
	}
	s.stopProbation()
}

func (s *Supervisor) stopProbation() {
	if s.probation != nil {
		s.probation.Stop()
		s.probation = nil
	}
}

// transition fires ev on the state machine, the single source of the
// status and of the sub-state of recovering: State.Status, Probation and
// HeldBy are copied from it and never set by hand (HeldBy names the
// dependency while held).
func (s *Supervisor) transition(ev event) (from Status, err error) {
	from, err = s.m.fire(ev)
	s.syncPhase()
	return from, err
}

// syncPhase copies what the machine's phase says into the state that is
// persisted and shown: the status, whether the pipeline is on probation,
// and no dependency holding it outside the held phase.
func (s *Supervisor) syncPhase() {
	p := s.m.phase()
	s.state.Status = p.status()
	s.state.Probation = p == phaseProbation
	if p != phaseHeld {
		s.state.HeldBy = ""
	}
}

// mustTransition is transition for an event the supervisor's own logic
// chose for the current status; a refusal is a bug.
func (s *Supervisor) mustTransition(ev event) Status {
	from, err := s.transition(ev)
	if err != nil {
		s.bug(ev, err)
	}
	return from
}

// bug reports a transition the state machine refused although the
// supervisor chose it: the status stays what the machine says. It panics
// in development loggers and is logged otherwise; tests fail on it.
func (s *Supervisor) bug(ev event, err error) {
	s.log.DPanic("bug: the state machine refused a transition the supervisor chose",
		zap.String("event", string(ev)), zap.Stringer("status", s.m.current()), zap.Error(err))
}

// save marks the state for persisting. With an EventRecorder it goes with
// the next event, which records the transition, in the same commit;
// otherwise it is handed to the state store at once. Either way it is
// written behind the supervisor's back: a crash before the write lands
// resumes from the state before, the same as crashing a moment earlier.
func (s *Supervisor) save() {
	s.state.UpdatedAt = s.cfg.Clock.Now()
	s.unsaved = true
	if _, ok := s.cfg.States.(EventRecorder); !ok {
		s.saveUnsaved()
	}
}

// saveUnsaved hands a state no event carried to the state store.
func (s *Supervisor) saveUnsaved() {
	if !s.unsaved {
		return
	}
	s.unsaved = false
	if err := s.cfg.States.SaveLater(s.cfg.PipelineID, s.state); err != nil {
		// The state in memory is still the truth; the next transition
		// tries again. Losing it only matters after a crash.
		s.log.Error("could not persist pipeline state", zap.Error(err))
	}
}

func (s *Supervisor) emit(e Event) {
	e.PipelineID = s.cfg.PipelineID
	if e.At.IsZero() {
		e.At = s.cfg.Clock.Now()
	}
	if rec, ok := s.cfg.States.(EventRecorder); ok {
		var st *State
		if s.unsaved {
			c := s.state.Clone()
			st, s.unsaved = &c, false
		}
		if err := rec.RecordLater(s.cfg.PipelineID, st, &e); err != nil {
			s.log.Error("could not record pipeline event", zap.String("event", string(e.Kind)), zap.Error(err))
		}
	}
	logEvent(s.log, e)
	if s.cfg.Observer != nil {
		s.cfg.Observer.PipelineEvent(e)
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
	info.Class = c.Class.String()
	info.Source = c.Source.String()
	info.Message = truncateMessage(c.Message, maxErrorMessage)
	if pos, ok := cerrors.RecordOf(cause); ok {
		info.Record = pos
	}
	if dep, ok := c.Details["dependency"].(string); ok {
		info.Dependency = truncateMessage(dep, maxDependency)
	}
	return info
}

// deadLetterWindowError is how a run error says the dead-letter queue's
// window overflowed (pkg/pipeline's DLQWindowError implements it).
type deadLetterWindowError interface {
	error
	DeadLetterWindowOverflow()
}
