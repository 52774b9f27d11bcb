package lifecycle

// The held phase: a pipeline whose dependency's breaker is open waits for
// the breaker to release it.

import (
	"strconv"
	"time"

	"github.com/conduitry/conduit/auditlog"
)

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
	if s.m.phase() != phaseHeld || s.pending != nil || s.run != nil || s.retiring() {
		return
	}
	dep := s.state.HeldBy
	now := s.cfg.Clock.Now()
	at := now.Add(after)
	s.mustTransition(eventRelease)
	s.state.NextAttemptAt = at
	s.scheduleRestart(at)
	s.save()
	s.emit(withError(auditlog.Event{Kind: auditlog.KindRecovering, StatusBefore: StatusRecovering, StatusAfter: StatusRecovering, Actor: ActorSystem,
		Attempt: s.state.FailCount, Delay: at.Sub(now), NextAttemptAt: at, Reason: "breaker",
		Action:  ActionRestart.String(),
		Message: "pipeline recovering: dependency " + strconv.Quote(dep) + " is back (its canary got a record through); restart scheduled in " + at.Sub(now).Round(time.Millisecond).String()}, s.state.LastError))
}

// leaveBreaker tells the breaker of the dependency the pipeline last
// failed on that it no longer waits for nor retries it.
func (s *Supervisor) leaveBreaker() {
	if s.cfg.Breakers == nil || s.state.LastError == nil || s.state.LastError.Dependency == "" {
		return
	}
	s.cfg.Breakers.Leave(s.state.LastError.Dependency, s.cfg.PipelineID)
}
