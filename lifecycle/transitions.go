package lifecycle

// What starts, stops and ends runs: taking up the persisted state, a
// user's start and stop, and the end of a run (a fault goes on to fault.go).

import (
	"cmp"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
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
		s.emit(auditlog.Event{Kind: auditlog.KindStarting, StatusBefore: StatusStopped, StatusAfter: StatusRunning, Actor: ActorConfig,
			Message: "pipeline starting"})
		s.save()
		s.emit(auditlog.Event{Kind: auditlog.KindRunning, StatusBefore: StatusRunning, StatusAfter: StatusRunning, Actor: ActorConfig,
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
		s.state.StopReason, s.state.ResumeStatus = "", ""
	case from == StatusRunning || from == StatusRecovering:
		how = cmp.Or(s.cfg.Takeover.how(""), how)
	case !s.cfg.ProcessCrashed:
		how = "conduit had stopped cleanly"
	}
	switch s.state.Status {
	case StatusRunning:
		s.emit(auditlog.Event{Kind: auditlog.KindResumed, StatusBefore: from, StatusAfter: StatusRunning, Actor: ActorSystem,
			Message: how + "; pipeline was running: starting it again from its last saved position"})
		if from != StatusRunning {
			s.save()
		}
		s.emit(auditlog.Event{Kind: auditlog.KindRunning, StatusBefore: StatusRunning, StatusAfter: StatusRunning, Actor: ActorSystem, Message: "pipeline running"})
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
		s.emit(withError(auditlog.Event{Kind: auditlog.KindResumed, StatusBefore: from, StatusAfter: StatusRecovering, Actor: ActorSystem,
			Attempt: s.state.FailCount, Delay: next.Sub(now), NextAttemptAt: next,
			Message: message}, s.state.LastError))
		s.save()
		s.scheduleRestart(next)
	case StatusDegraded:
		s.emit(withError(auditlog.Event{Kind: auditlog.KindResumed, StatusBefore: from, StatusAfter: StatusDegraded, Actor: ActorSystem,
			Reason:  string(s.state.DegradedReason),
			Message: how + "; pipeline stays degraded until it is started"}, s.state.LastError))
	case StatusStopped:
	}
}

func (s *Supervisor) onStart(actor auditlog.Actor) error {
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
	s.state.startedByUser()
	s.emit(auditlog.Event{Kind: auditlog.KindStarting, StatusBefore: from, StatusAfter: StatusRunning, Actor: actor, Message: "pipeline starting"})
	s.save()
	s.emit(auditlog.Event{Kind: auditlog.KindRunning, StatusBefore: StatusRunning, StatusAfter: StatusRunning, Actor: actor, Message: "pipeline running"})
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
	s.state.stopped(s.cfg.Clock.Now())
	s.save()
	if s.run == nil {
		s.emit(auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: from, StatusAfter: StatusStopped, Actor: ActorUser, Message: "pipeline stopped"})
		m.reply <- nil
		return
	}
	// Asked first, then told: whoever sees the stopping event knows the
	// run was asked to stop (one still being built is then discarded).
	s.run.endBy(runDraining)
	s.run.stop()
	s.emit(auditlog.Event{Kind: auditlog.KindStopping, StatusBefore: from, StatusAfter: StatusStopped, Actor: ActorUser,
		Message: "pipeline stopping: source stops reading, in-flight records drain"})
	s.waiters = append(s.waiters, m.reply)
}

func (s *Supervisor) forceStop(reply chan error) {
	if s.m.current() == StatusStopped && s.run != nil {
		// A graceful stop is under way and taking too long: cut it short.
		// The status stays stopped; the dropped records are read again on
		// the next start because their positions were never saved.
		s.run.endBy(runForced)
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
	s.state.forceStopped(s.cfg.Clock.Now())
	s.save()
	s.emit(auditlog.Event{Kind: auditlog.KindDegraded, StatusBefore: from, StatusAfter: StatusDegraded, Actor: ActorUser, Reason: string(ReasonForceStop),
		Message: "pipeline force-stopped: in-flight records were dropped and will be read again on the next start"})
	if s.run == nil {
		reply <- nil
		return
	}
	s.run.endBy(runForced)
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
	if r.ending != runLive {
		if r.ending == runForced {
			s.log.Warn("pipeline run force-stopped; in-flight records were dropped and will be read again on the next start")
		}
		if err != nil && r.ending != runForced {
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
			s.emit(auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: StatusStopped, StatusAfter: StatusStopped, Actor: why.Actor, Reason: string(why.Reason), Message: why.Stopped})
		default:
			s.emit(auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: StatusStopped, StatusAfter: StatusStopped, Actor: ActorUser, Message: "pipeline stopped"})
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
		s.state.stopped(s.cfg.Clock.Now())
		s.save()
		s.emit(auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: from, StatusAfter: StatusStopped, Actor: ActorSystem, Reason: string(StopReasonFinished),
			Message: "pipeline finished: its source has no more records"})
		return
	}
	s.onFault(err)
}
