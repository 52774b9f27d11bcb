package lifecycle

// The loop's side of a step: what it consults before (the snapshot), and
// the effects it carries out after, in the order the step gave them.

import (
	"time"

	"go.uber.org/zap"
)

// decide steps in and carries out the effects. A stop, a force stop or a
// retirement first settles a pending restart (takeOverRestart), so that
// the step knows whether a run is left to end.
func (s *Supervisor) decide(in input) {
	switch in.(type) {
	case stopMsg, retireMsg:
		s.takeOverRestart()
	}
	snap := s.snapshot(in)
	// Made for each step and let go after it: kept by ten thousand idle
	// supervisors, the buffers would be memory the collector's headroom
	// multiplies.
	fx := make(effects, 0, 6)
	s.step(in, &snap, &fx)
	// A step of the breaker's answer appends to fx while it is carried
	// out; its effects come after the ones before it.
	for i := 0; i < len(fx); i++ {
		s.perform(fx[i], &snap, &fx)
	}
}

// snapshot takes what the step of in may consult: now, and what in needs
// of the outside (the rules as they are now for a fault, the managed rule
// a request names, when the run's connectors opened).
func (s *Supervisor) snapshot(in input) snapshot {
	snap := snapshot{facts: &s.facts, policy: &s.cfg.Policy, now: s.cfg.Clock.Now()}
	switch m := in.(type) {
	case runEndedMsg:
		if m.err != nil {
			// Taken for every run that ended with an error; the step
			// decides whether it is a fault (a drain's error is not).
			snap.rules, snap.random = s.cfg.Policy.RuleSet(), s.cfg.Random()
		}
	case applyRuleMsg:
		snap.rule, snap.random = s.cfg.Policy.ManagedRule(m.rule), s.cfg.Random()
	case probationElapsed:
		if s.run != nil {
			snap.openedAt = s.run.openedAt.Load()
		}
	}
	return snap
}

// perform carries out e, one effect of the step taken with snap; the
// breaker's answer is stepped at once, its effects appended to fx.
func (s *Supervisor) perform(e effect, snap *snapshot, fx *effects) {
	switch e.do {
	case doEmit:
		s.emit(e.event)
	case doSave:
		s.save()
	case doStartRun:
		s.startRun()
	case doScheduleRestart:
		s.scheduleRestart(e.at)
	case doStopRun:
		e.run.stop()
	case doCancelRun:
		e.run.cancel()
	case doStopTimers:
		s.stopWindow()
	case doStartDeadline:
		s.stopDeadline()
		s.deadline, s.deadlineRun = s.cfg.Clock.TimerAt(e.at), e.run.id
	case doStopDeadline:
		s.stopDeadline()
	case doStartWindow:
		s.window = s.cfg.Clock.TimerAt(e.at)
	case doStartProbation:
		s.probation = s.cfg.Clock.TimerAt(e.at)
	case doStartProof:
		if s.proof != nil {
			s.proof.Stop()
		}
		s.proof = s.cfg.Clock.TimerAt(e.at)
	case doLeaveBreaker:
		s.cfg.Breakers.Leave(e.more.(string), s.cfg.PipelineID)
	case doBreakerSuccess:
		s.cfg.Breakers.Success(e.more.(string), s.cfg.PipelineID)
	case doAskBreaker:
		f := e.more.(*faultStep)
		dep, held := f.info.Dependency, ""
		if s.cfg.Breakers.Fault(dep, s.cfg.PipelineID, s.releaser()) {
			// The dependency's breaker is open: the canary retries it, this
			// pipeline waits until it is back.
			held = dep
		}
		s.step(breakerAnswered{step: f, held: held}, snap, fx)
	case doReply:
		r := e.more.(*replyTo)
		r.reply <- r.err
	case doAwait:
		s.waiters = append(s.waiters, e.more.(chan error))
	case doAnswerWaiters:
		for _, w := range s.waiters {
			w <- nil
		}
		s.waiters = nil
	case doAnswerApply:
		a := e.more.(*appliedRule)
		a.reply <- a.outcome
	case doWarn:
		n := e.more.(*logNote)
		s.log.Warn(n.msg, n.fields...)
	case doBug:
		// It panics in development loggers and is logged otherwise; tests
		// fail on it. The status stays what the machine says.
		n := e.more.(*logNote)
		s.log.DPanic(n.msg, n.fields...)
	default:
		s.log.DPanic("bug: an effect the loop does not know", zap.Uint8("effect", uint8(e.do)))
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
// already, the launched run becomes the supervisor's run, for the step to
// stop like any other (it sees the stop before it opens anything).
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

// stopWindow stops the healthy window's timer and the probation's.
func (s *Supervisor) stopWindow() {
	if s.window != nil {
		s.window.Stop()
		s.window = nil
	}
	if s.probation != nil {
		s.probation.Stop()
		s.probation = nil
	}
}

// stopDeadline stops the timer of a run's stop.
func (s *Supervisor) stopDeadline() {
	if s.deadline != nil {
		s.deadline.Stop()
		s.deadline = nil
	}
}
