package lifecycle

// The steps that start, stop and end runs: taking up the persisted state,
// a user's start, stop and force stop, the end of a run (a fault goes on to
// fault.go), and the supervisor's retirement.

import (
	"cmp"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
)

// stepResume takes up the initial state when the supervisor starts. The
// first event's status before is the status the audit log last recorded:
// stopped for a new pipeline (created, provisioned) and after a clean
// shutdown, the persisted status after a crash.
func (p *pipeline) stepResume(snap *snapshot, fx *effects) {
	now := snap.now
	if !snap.persisted {
		if p.state.Status != StatusRunning {
			// Remembered, so that the next process knows the pipeline.
			p.save(snap, fx)
			return
		}
		fx.emit(&auditlog.Event{Kind: auditlog.KindStarting, StatusBefore: StatusStopped, StatusAfter: StatusRunning, Actor: ActorConfig,
			Message: "pipeline starting"}, now)
		p.markRun(snap, fx)
		p.save(snap, fx)
		fx.emit(&auditlog.Event{Kind: auditlog.KindRunning, StatusBefore: StatusRunning, StatusAfter: StatusRunning, Actor: ActorConfig,
			Message: "pipeline running"}, now)
		fx.add(effect{do: doStartRun})
		return
	}
	from := p.state.Status
	if p.crashLoop(snap, fx) {
		return
	}
	// The machine starts a recovering pipeline waiting: a breaker does not
	// outlive its process (a pipeline it held restarts like any other
	// recovering one, and counts again if it fails), nor does a probation.
	p.syncPhase()
	// A clean shutdown persists running and recovering pipelines as
	// stopped for shutdown, so one persisted as running or recovering was
	// cut off; for the others the process tells.
	how := "conduit had not stopped cleanly (crash, kill or power loss)"
	switch {
	case p.state.StopReason.resumable():
		switch p.state.StopReason {
		case StopReasonShutdown:
			how = cmp.Or(snap.takeover.how(StopReasonShutdown), "conduit had stopped cleanly")
		case StopReasonHandover:
			how = cmp.Or(snap.takeover.how(StopReasonHandover), "another instance handed the pipeline over")
		default:
			how = "conduit stopped while the pipeline was being " + string(p.state.StopReason)
		}
		p.state.StopReason, p.state.ResumeStatus = "", ""
	case from == StatusRunning || from == StatusRecovering:
		how = cmp.Or(snap.takeover.how(""), how)
	case !snap.processCrashed:
		how = "conduit had stopped cleanly"
	}
	switch p.state.Status {
	case StatusRunning:
		fx.emit(&auditlog.Event{Kind: auditlog.KindResumed, StatusBefore: from, StatusAfter: StatusRunning, Actor: ActorSystem,
			Message: how + "; pipeline was running: starting it again from its last saved position"}, now)
		if p.markRun(snap, fx) || from != StatusRunning {
			p.save(snap, fx)
		}
		fx.emit(&auditlog.Event{Kind: auditlog.KindRunning, StatusBefore: StatusRunning, StatusAfter: StatusRunning, Actor: ActorSystem, Message: "pipeline running"}, now)
		fx.add(effect{do: doStartRun})
		if p.provingHealthy() {
			// It was running again after a probation: its fail count resets
			// after a healthy window of this run.
			fx.timer(doStartWindow, snap.policy.HealthyWindow, snap.now)
		}
	case StatusRecovering:
		next := CapResumeWait(*snap.policy, p.state.FailCount, p.state.NextAttemptAt, now)
		message := how + "; pipeline was recovering: next attempt at its persisted time"
		if !next.Equal(p.state.NextAttemptAt) && p.state.NextAttemptAt.After(now) {
			message = fmt.Sprintf("%s; pipeline was recovering: its persisted next attempt %s is further away than its policy allows, moved to %s",
				how, p.state.NextAttemptAt.Format(time.RFC3339), next.Format(time.RFC3339))
			fx.warn("persisted next attempt is later than the recovery policy allows (was the clock wrong?); capped",
				zap.Time("persisted_next_attempt_at", p.state.NextAttemptAt), zap.Time("next_attempt_at", next))
		}
		p.state.NextAttemptAt = next
		fx.emit(withError(&auditlog.Event{Kind: auditlog.KindResumed, StatusBefore: from, StatusAfter: StatusRecovering, Actor: ActorSystem,
			Attempt: p.state.FailCount, Delay: next.Sub(now), NextAttemptAt: next,
			Message: message}, p.state.LastError), now)
		p.save(snap, fx)
		fx.schedule(next)
	case StatusDegraded:
		fx.emit(withError(&auditlog.Event{Kind: auditlog.KindResumed, StatusBefore: from, StatusAfter: StatusDegraded, Actor: ActorSystem,
			Reason:  string(p.state.DegradedReason),
			Message: how + "; pipeline stays degraded until it is started"}, p.state.LastError), now)
	case StatusStopped:
	}
}

// stepStart starts a stopped or degraded pipeline whose last run has
// ended, resetting its fail count.
func (p *pipeline) stepStart(m startMsg, snap *snapshot, fx *effects) {
	if p.retiring() {
		// Its supervisor is ending (an update, a deletion, a shutdown);
		// the caller asks the one that takes over.
		fx.reply(m.reply, ErrSupervisorDone)
		return
	}
	if p.m.phase().ending() {
		fx.reply(m.reply, ErrStillStopping)
		return
	}
	from, err := p.transition(eventStart)
	if err != nil {
		fx.reply(m.reply, err)
		return
	}
	p.state.startedByUser()
	p.markRun(snap, fx)
	fx.emit(&auditlog.Event{Kind: auditlog.KindStarting, StatusBefore: from, StatusAfter: StatusRunning, Actor: m.actor, Message: "pipeline starting"}, snap.now)
	p.save(snap, fx)
	fx.emit(&auditlog.Event{Kind: auditlog.KindRunning, StatusBefore: StatusRunning, StatusAfter: StatusRunning, Actor: m.actor, Message: "pipeline running"}, snap.now)
	fx.add(effect{do: doStartRun})
	fx.reply(m.reply, nil)
}

// stepStop stops a running or recovering pipeline gracefully: its run, if
// any, drains and the stop is answered when it has ended.
func (p *pipeline) stepStop(reply chan error, snap *snapshot, fx *effects) {
	from, err := p.transition(eventStop)
	if err != nil {
		fx.reply(reply, err)
		return
	}
	fx.add(effect{do: doStopTimers})
	p.leaveBreaker(snap, fx)
	p.state.stopped(snap.now)
	p.save(snap, fx)
	if p.run == nil {
		p.must(eventRunEnded, fx)
		fx.emit(&auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: from, StatusAfter: StatusStopped, Actor: ActorUser, Message: "pipeline stopped"}, snap.now)
		fx.reply(reply, nil)
		return
	}
	// Asked first, then told: whoever sees the stopping event knows the
	// run was asked to stop (one still being built is then discarded).
	p.run.endBy(runDraining)
	fx.add(effect{do: doStopRun, run: p.run})
	p.armStopDeadline(snap, fx)
	fx.emit(&auditlog.Event{Kind: auditlog.KindStopping, StatusBefore: from, StatusAfter: StatusStopped, Actor: ActorUser,
		Message: "pipeline stopping: source stops reading, in-flight records drain"}, snap.now)
	fx.add(effect{do: doAwait, more: reply})
}

// stepForceStop stops a running or recovering pipeline at once, which
// degrades it, or cuts a graceful stop under way short.
func (p *pipeline) stepForceStop(reply chan error, snap *snapshot, fx *effects) {
	if p.m.phase() == phaseStopping && p.run != nil {
		// A graceful stop is under way and taking too long: cut it short.
		// The status stays stopped; the dropped records are read again on
		// the next start because their positions were never saved.
		p.run.endBy(runForced)
		fx.add(effect{do: doCancelRun, run: p.run})
		p.armStopDeadline(snap, fx)
		fx.add(effect{do: doAwait, more: reply})
		return
	}
	from, err := p.transition(eventForceStop)
	if err != nil {
		fx.reply(reply, err)
		return
	}
	fx.add(effect{do: doStopTimers})
	p.leaveBreaker(snap, fx)
	p.state.forceStopped(snap.now)
	if p.run == nil {
		p.must(eventRunEnded, fx)
	}
	p.save(snap, fx)
	fx.emit(&auditlog.Event{Kind: auditlog.KindDegraded, StatusBefore: from, StatusAfter: StatusDegraded, Actor: ActorUser, Reason: string(ReasonForceStop),
		Message: "pipeline force-stopped: in-flight records were dropped and will be read again on the next start"}, snap.now)
	if p.run == nil {
		fx.reply(reply, nil)
		return
	}
	p.run.endBy(runForced)
	fx.add(effect{do: doCancelRun, run: p.run})
	p.armStopDeadline(snap, fx)
	fx.add(effect{do: doAwait, more: reply})
}

// stepRunEnded acts on the end of the pipeline's run: the end of a stop,
// a source that ended, or a fault.
func (p *pipeline) stepRunEnded(m runEndedMsg, snap *snapshot, fx *effects) {
	r := p.run
	if r == nil || r.id != m.id {
		return
	}
	p.run = nil
	fx.add(effect{do: doCancelRun, run: r})
	if r.ending != runLive && snap.stopTimeout > 0 {
		fx.add(effect{do: doStopDeadline})
	}
	// A run that ended was not cut off by the process dying.
	p.runProved(snap, fx)
	if r.ending != runLive {
		if r.ending == runForced {
			fx.warn("pipeline run force-stopped; in-flight records were dropped and will be read again on the next start")
		}
		if m.err != nil && r.ending != runForced {
			// The drain itself failed; the stop still happened. Keep the
			// error so the user sees it, but do not restart.
			info := describeError(m.err, snap.now)
			p.state.LastError = &info
			p.save(snap, fx)
			fx.warn("pipeline stopped with an error while draining", zap.String("error", info.Message))
		}
		p.stopEnded(snap, fx)
		return
	}
	if m.err == nil {
		// The run finished on its own (a source that ended): nothing to
		// recover from.
		from := p.must(eventStop, fx)
		p.must(eventRunEnded, fx)
		fx.add(effect{do: doStopTimers})
		p.state.stopped(snap.now)
		p.save(snap, fx)
		fx.emit(&auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: from, StatusAfter: StatusStopped, Actor: ActorSystem, Reason: string(StopReasonFinished),
			Message: "pipeline finished: its source has no more records"}, snap.now)
		return
	}
	p.stepRunFailed(m.err, snap, fx)
}

// stopEnded finishes a stop or a force stop once its run has ended (or
// was abandoned): the stopped event of a stop (the degraded one was
// written when the pipeline was forced), and the answers to the requests
// that waited for it.
func (p *pipeline) stopEnded(snap *snapshot, fx *effects) {
	switch p.m.phase() {
	case phaseForceStopping:
		// The degraded event was written when it was force-stopped.
		p.must(eventRunEnded, fx)
	case phaseStopping:
		p.must(eventRunEnded, fx)
		if why := p.retirement; why != nil && p.state.StopReason == why.Reason {
			fx.emit(&auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: StatusStopped, StatusAfter: StatusStopped, Actor: why.Actor, Reason: string(why.Reason), Message: why.Stopped}, snap.now)
		} else {
			fx.emit(&auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: StatusStopped, StatusAfter: StatusStopped, Actor: ActorUser, Message: "pipeline stopped"}, snap.now)
		}
	}
	fx.add(effect{do: doAnswerWaiters})
}

// stepRetire ends the supervisor for why: a running or recovering
// pipeline is recorded as stopped with why's reason and the status it had
// (which the next process or supervisor takes up), and its run drains.
func (p *pipeline) stepRetire(why Retirement, snap *snapshot, fx *effects) {
	if p.retiring() {
		return
	}
	p.retirement = &why
	fx.add(effect{do: doStopTimers})
	if why.Reason != StopReasonShutdown {
		// A shutdown keeps the pipeline recovering for the next process;
		// an update or a deletion ends its part in the breaker.
		p.leaveBreaker(snap, fx)
	}
	if cur := p.m.current(); cur == StatusRunning || cur == StatusRecovering {
		// On a refusal the run is still stopped below; only the record
		// of it is missing.
		from := p.must(eventStop, fx)
		p.state.StopReason = why.Reason
		p.state.ResumeStatus = from
		p.save(snap, fx)
		switch {
		case p.run == nil:
			p.must(eventRunEnded, fx)
			fx.emit(&auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: from, StatusAfter: StatusStopped, Actor: why.Actor, Reason: string(why.Reason), Message: why.Stopped}, snap.now)
		case p.run.ending != runLive:
			fx.emit(&auditlog.Event{Kind: auditlog.KindStopped, StatusBefore: from, StatusAfter: StatusStopped, Actor: why.Actor, Reason: string(why.Reason), Message: why.Stopped}, snap.now)
		default:
			fx.emit(&auditlog.Event{Kind: auditlog.KindStopping, StatusBefore: from, StatusAfter: StatusStopped, Actor: why.Actor, Reason: string(why.Reason), Message: why.Stopping}, snap.now)
		}
	}
	if p.run != nil && p.run.ending == runLive {
		p.run.endBy(runDraining)
		fx.add(effect{do: doStopRun, run: p.run})
		p.armStopDeadline(snap, fx)
	}
}
