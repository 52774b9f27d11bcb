package lifecycle

// The steps back to running: the scheduled restart, the probation, the
// healthy window and recovery.

import (
	"fmt"
	"time"

	"github.com/conduitry/conduit/auditlog"
)

// stepRestarted takes note that the scheduler launched the pending
// restart. A restart that a stop took over meanwhile is not announced: it
// is being stopped.
func (p *pipeline) stepRestarted(m restartedMsg, snap *snapshot, fx *effects) {
	pr := p.pending
	if pr == nil || pr.run.id != m.id {
		return
	}
	p.pending = nil
	p.run = pr.run
	if _, err := p.transition(eventRestart); err != nil {
		fx.bug(eventRestart, err, p.m.current())
		return
	}
	p.state.NextAttemptAt = time.Time{}
	// A restart is not persisted for its own sake: the persisted state
	// (recovering, next attempt time now past) already makes a process
	// that crashes from here on restart the pipeline at once, which is
	// what it would do with the restart persisted. Only the crash-loop
	// guard's mark of the run is (crashloop.go); it rides with the
	// restarted event, which is written anyway.
	if p.markRun(snap, fx) {
		p.save(snap, fx)
	}
	probation := snap.policy.probation()
	fx.emit(&auditlog.Event{Kind: auditlog.KindRestarted, Time: m.at, StatusBefore: StatusRecovering, StatusAfter: StatusRecovering, Actor: ActorSystem,
		Attempt: p.state.FailCount, NextAttemptAt: pr.scheduled,
		Message: fmt.Sprintf("pipeline restarted; it is running again once a record makes it end to end or it stays up for the %s probation", probation)}, snap.now)
	// The healthy window counts from the restart (a failed start ends it
	// early through the fault); the probation from when the run's
	// connectors are open (stepProbation), which is no earlier than now.
	fx.add(effect{do: doStopTimers})
	fx.timer(doStartWindow, snap.policy.HealthyWindow-snap.now.Sub(m.at), snap.now)
	if probation < snap.policy.HealthyWindow {
		fx.timer(doStartProbation, probation, snap.now)
	}
}

// stepProbation acts on the probation timer: the probation passes once
// the run's connectors have been open for all of it - a run still
// connecting has proved nothing - and the timer is set again for what is
// left.
func (p *pipeline) stepProbation(snap *snapshot, fx *effects) {
	if p.run == nil || p.m.phase() != phaseProbation {
		return
	}
	left := snap.policy.probation()
	if at := snap.openedAt; at != nil {
		left -= snap.now.Sub(*at)
	}
	if left > 0 {
		fx.timer(doStartProbation, left, snap.now)
		return
	}
	p.probationPassed(snap, fx)
}

// probationPassed makes a restarted pipeline that stayed up for its
// probation running again, without a record end to end: an idle source
// that reconnected is healthy as far as anyone can tell. Its fail count
// and episode stay until the healthy window passes.
func (p *pipeline) probationPassed(snap *snapshot, fx *effects) {
	from, err := p.transition(eventRecovered)
	if err != nil {
		fx.bug(eventRecovered, err, p.m.current())
		return
	}
	// Connected and up: the dependency is back, for the pipelines its
	// breaker holds too.
	p.breakerSuccess(snap, fx)
	p.save(snap, fx)
	fx.emit(&auditlog.Event{Kind: auditlog.KindRecovered, StatusBefore: from, StatusAfter: StatusRunning, Actor: ActorSystem, Reason: string(RecoveredByProbation),
		Attempt: p.state.FailCount,
		Message: fmt.Sprintf("pipeline running again: its connectors stayed open for the %s probation, no record yet; fail count %d resets once it has run %s (max-retries-window) or a record makes it end to end, and a failure before then continues the backoff",
			snap.policy.probation(), p.state.FailCount, snap.policy.HealthyWindow)}, snap.now)
}

// recovered ends the episode of a pipeline on probation or proving itself
// healthy: a record made it end to end, or the healthy window passed.
func (p *pipeline) recovered(reason RecoveredReason, snap *snapshot, fx *effects) {
	from := p.m.current()
	if p.m.phase() == phaseProbation {
		var err error
		if from, err = p.transition(eventRecovered); err != nil {
			return
		}
	} else if !p.provingHealthy() {
		// A first record after the pipeline left recovering (stopped,
		// degraded), or of a run that is not proving itself, has nothing
		// to end.
		return
	}
	fx.add(effect{do: doStopTimers})
	p.breakerSuccess(snap, fx)
	attempts := p.state.recovered(snap.now, reason)
	p.save(snap, fx)
	message := "pipeline recovered: running again, fail count reset"
	if from == StatusRunning {
		message = "pipeline recovered: fail count reset (it was running again after its probation)"
	}
	fx.emit(&auditlog.Event{Kind: auditlog.KindRecovered, StatusBefore: from, StatusAfter: StatusRunning, Actor: ActorSystem, Reason: string(reason),
		Attempt: attempts, Message: message}, snap.now)
}
