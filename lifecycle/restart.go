package lifecycle

// Restarts and getting back to running: the scheduled restart, the
// probation, the healthy window and recovery.

import (
	"fmt"
	"time"

	"github.com/conduitry/conduit/auditlog"
)

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
	s.emit(auditlog.Event{Kind: auditlog.KindRestarted, Time: m.at, StatusBefore: StatusRecovering, StatusAfter: StatusRecovering, Actor: ActorSystem,
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
	s.emit(auditlog.Event{Kind: auditlog.KindRecovered, StatusBefore: from, StatusAfter: StatusRunning, Actor: ActorSystem, Reason: string(RecoveredByProbation),
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
	attempts := s.state.recovered(s.cfg.Clock.Now(), reason)
	s.save()
	message := "pipeline recovered: running again, fail count reset"
	if from == StatusRunning {
		message = "pipeline recovered: fail count reset (it was running again after its probation)"
	}
	s.emit(auditlog.Event{Kind: auditlog.KindRecovered, StatusBefore: from, StatusAfter: StatusRunning, Actor: ActorSystem, Reason: string(reason),
		Attempt: attempts, Message: message})
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
