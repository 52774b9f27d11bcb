package lifecycle

// Every stop is bounded (Config.StopTimeout, pipelines.graceful-stop-timeout):
// a user's stop, a force stop, a shutdown, an update or a deletion. A run
// asked to drain that has not ended by its deadline is forced (its context
// is cancelled); a forced run that has not ended a further StopTimeout later
// is abandoned - code that ignores its context (a script in an endless
// loop, a connector call that never returns) cannot keep the pipeline
// stopping for ever, nor keep a start, an update or the process's shutdown
// waiting for it. Until the run has ended or was abandoned the pipeline
// shows that it is stopping (State.Stopping).

import (
	"errors"
	"fmt"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
)

// armStopDeadline sets the deadline of the stop of the pipeline's run,
// StopTimeout from now; none without a bound.
func (p *pipeline) armStopDeadline(snap *snapshot, fx *effects) {
	if snap.stopTimeout > 0 && p.run != nil {
		fx.add(effect{do: doStartDeadline, at: snap.now.Add(snap.stopTimeout), run: p.run})
	}
}

// stepStopOverdue acts on the deadline of the stop of run id: a run that
// still drains is forced, one that was forced already is abandoned.
func (p *pipeline) stepStopOverdue(id int, snap *snapshot, fx *effects) {
	r := p.run
	if r == nil || r.id != id || r.ending == runLive {
		// The run ended in time (its deadline is stale).
		return
	}
	if r.ending == runDraining {
		p.forceOverdueStop(snap, fx)
		return
	}
	// Forced, and still not ended: whatever runs of it ignores its
	// context. The pipeline goes on without it; the run's goroutine is
	// left behind, and what it reports when it ends is ignored (its id is
	// no longer the pipeline's run).
	p.run = nil
	p.runProved(snap, fx)
	fx.warn(fmt.Sprintf("pipeline run abandoned: it did not end within %s of being forced (a processor or connector ignores cancellation); "+
		"what still runs of it is left to finish on its own or to end with conduit", snap.stopTimeout))
	p.stopEnded(snap, fx)
}

// forceOverdueStop forces a graceful stop that outlasted its deadline. A
// user's stop becomes a force stop, which degrades the pipeline (the
// table of DESIGN.md section 5: running, recovering -> force stop ->
// degraded), so that whoever stopped it sees that in-flight records were
// dropped; a retirement (a shutdown, an update, a deletion) keeps its
// stopped status and reason, which the next supervisor takes up.
func (p *pipeline) forceOverdueStop(snap *snapshot, fx *effects) {
	r := p.run
	r.endBy(runForced)
	fx.add(effect{do: doCancelRun, run: r})
	message := fmt.Sprintf("graceful stop did not finish within %s (pipelines.graceful-stop-timeout): forced; in-flight records were dropped and will be read again on the next start", snap.stopTimeout)
	if p.m.phase() == phaseStopping && p.retirement == nil {
		from := p.must(eventStopOverdue, fx)
		p.state.forceStopped(snap.now)
		// Kept as the pipeline's last error: what a human must look at
		// (a processor or connector that does not drain) before starting
		// it again.
		info := describeError(cerrors.Fatal(errors.New(message)), snap.now)
		p.state.LastError = &info
		p.save(snap, fx)
		fx.emit(&auditlog.Event{Kind: auditlog.KindDegraded, StatusBefore: from, StatusAfter: StatusDegraded, Actor: ActorSystem,
			Reason: string(ReasonForceStop), Message: "pipeline force-stopped: " + message}, snap.now)
	} else {
		fx.warn("pipeline stop forced: " + message)
	}
	p.armStopDeadline(snap, fx)
}
