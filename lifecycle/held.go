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

// stepRelease restarts a pipeline its dependency's breaker held, after a
// delay.
func (p *pipeline) stepRelease(after time.Duration, snap *snapshot, fx *effects) {
	if p.m.phase() != phaseHeld || p.pending != nil || p.run != nil || p.retiring() {
		return
	}
	dep := p.state.HeldBy
	now := snap.now
	at := now.Add(after)
	p.must(eventRelease, fx)
	p.state.NextAttemptAt = at
	fx.schedule(at)
	p.save(snap, fx)
	fx.emit(withError(&auditlog.Event{Kind: auditlog.KindRecovering, StatusBefore: StatusRecovering, StatusAfter: StatusRecovering, Actor: ActorSystem,
		Attempt: p.state.FailCount, Delay: at.Sub(now), NextAttemptAt: at, Reason: "breaker",
		Action:  ActionRestart.String(),
		Message: "pipeline recovering: dependency " + strconv.Quote(dep) + " is back (its canary got a record through); restart scheduled in " + at.Sub(now).Round(time.Millisecond).String()}, p.state.LastError), now)
}
