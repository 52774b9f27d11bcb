package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/looplab/fsm"
)

// phase is a state of a pipeline's machine: a status, and where in it the
// pipeline is. The sub-states are states of the machine, not flags beside
// it, so that what may happen next is in one table: a restart only from
// waiting, a release only from held, running again only from probation, a
// start only once the last run has ended.
type phase string

const (
	phaseRunning = phase("running")
	// phaseWaiting: a run failed; its restart is scheduled.
	phaseWaiting = phase("recovering/waiting")
	// phaseHeld: a run failed on a dependency whose breaker is open; the
	// pipeline restarts when the breaker releases it.
	phaseHeld = phase("recovering/held")
	// phaseProbation: restarted; not yet proved (no record end to end,
	// the probation not over).
	phaseProbation = phase("recovering/probation")
	phaseDegraded  = phase("degraded")
	// phaseForceStopping: force-stopped (degraded); its cancelled run has
	// not ended yet.
	phaseForceStopping = phase("degraded/stopping")
	phaseStopped       = phase("stopped")
	// phaseStopping: stopped (by a user, a shutdown, an update); its run
	// drains, or is being cut short, and has not ended yet.
	phaseStopping = phase("stopped/stopping")
)

// status is the status the phase belongs to.
func (p phase) status() Status {
	switch p {
	case phaseRunning:
		return StatusRunning
	case phaseWaiting, phaseHeld, phaseProbation:
		return StatusRecovering
	case phaseDegraded, phaseForceStopping:
		return StatusDegraded
	default:
		return StatusStopped
	}
}

// ending reports whether the pipeline was stopped or force-stopped and its
// last run has not ended yet.
func (p phase) ending() bool { return p == phaseStopping || p == phaseForceStopping }

// entryPhase is the phase a pipeline of status s starts in: a recovering
// one waits for a restart (a hold or a probation does not outlive the
// process, nor does a run).
func entryPhase(s Status) phase {
	switch s {
	case StatusRunning:
		return phaseRunning
	case StatusRecovering:
		return phaseWaiting
	case StatusDegraded:
		return phaseDegraded
	default:
		return phaseStopped
	}
}

// event is what moves a pipeline between phases (the table of DESIGN.md
// section 5, with the sub-states).
type event string

const (
	eventStart     event = "start"      // stopped, degraded -> running
	eventFault     event = "fault"      // running, recovering/probation -> recovering/waiting (a run failed, transient)
	eventHold      event = "hold"       // recovering/waiting -> recovering/held (the dependency's breaker is open)
	eventRelease   event = "release"    // recovering/held -> recovering/waiting (the breaker let it go)
	eventRestart   event = "restart"    // recovering/waiting -> recovering/probation (backoff elapsed)
	eventRecovered event = "recovered"  // recovering/probation -> running
	eventDegrade   event = "degrade"    // running, recovering/probation -> degraded (a run failed, the decision degrades)
	eventStop      event = "stop"       // running, recovering -> stopped/stopping
	eventForceStop event = "force-stop" // running, recovering -> degraded/stopping
	eventRunEnded  event = "run-ended"  // stopped/stopping -> stopped, degraded/stopping -> degraded
	// eventStopOverdue: a user's graceful stop outlasted the graceful-stop
	// timeout and is forced, which makes it a force stop.
	eventStopOverdue event = "stop-overdue" // stopped/stopping -> degraded/stopping
	eventRetry       event = "retry"        // degraded -> recovering/waiting (a rule applied to it)
	// eventCrashLoop: the crash-loop guard holds a pipeline a process takes
	// up running or recovering (crashloop.go).
	eventCrashLoop event = "crash-loop" // running, recovering/waiting -> degraded
)

// ErrInvalidTransition is wrapped by every *TransitionError.
var ErrInvalidTransition = errors.New("invalid transition")

// TransitionError is returned when an event does not apply to the current
// state, e.g. stopping a stopped pipeline. The API maps it to "failed
// precondition".
type TransitionError struct {
	Event string
	From  Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("cannot %s a %s pipeline", e.Event, e.From)
}

func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// machine is a pipeline's FSM, part of the pipeline's state that a step
// changes. The looplab/fsm underneath guards the transition table.
type machine struct {
	f *fsm.FSM
}

func newMachine(initial Status) *machine {
	running, waiting, held := string(phaseRunning), string(phaseWaiting), string(phaseHeld)
	probation, degraded, stopped := string(phaseProbation), string(phaseDegraded), string(phaseStopped)
	stopping, forceStopping := string(phaseStopping), string(phaseForceStopping)
	active := []string{running, waiting, held, probation}
	withRun := []string{running, probation}
	return &machine{f: fsm.NewFSM(string(entryPhase(initial)), fsm.Events{
		{Name: string(eventStart), Src: []string{stopped, degraded}, Dst: running},
		{Name: string(eventFault), Src: withRun, Dst: waiting},
		{Name: string(eventHold), Src: []string{waiting}, Dst: held},
		{Name: string(eventRelease), Src: []string{held}, Dst: waiting},
		{Name: string(eventRestart), Src: []string{waiting}, Dst: probation},
		{Name: string(eventRecovered), Src: []string{probation}, Dst: running},
		{Name: string(eventDegrade), Src: withRun, Dst: degraded},
		{Name: string(eventStop), Src: active, Dst: stopping},
		{Name: string(eventForceStop), Src: active, Dst: forceStopping},
		{Name: string(eventStopOverdue), Src: []string{stopping}, Dst: forceStopping},
		{Name: string(eventRunEnded), Src: []string{stopping}, Dst: stopped},
		{Name: string(eventRunEnded), Src: []string{forceStopping}, Dst: degraded},
		{Name: string(eventRetry), Src: []string{degraded}, Dst: waiting},
		{Name: string(eventCrashLoop), Src: []string{running, waiting}, Dst: degraded},
	}, nil)}
}

// phase returns the machine's state.
func (m *machine) phase() phase { return phase(m.f.Current()) }

// current returns the status.
func (m *machine) current() Status { return m.phase().status() }

// fire applies ev and returns the status before it. No event of the table
// leads back to the phase it left, so every error is a refusal.
func (m *machine) fire(ev event) (from Status, err error) {
	from = m.current()
	if err := m.f.Event(context.Background(), string(ev)); err != nil {
		return from, &TransitionError{Event: string(ev), From: from}
	}
	return from, nil
}

// transition fires ev on the state machine, the single source of the
// status and of its sub-state: State.Status, Probation and HeldBy are
// copied from it and never set by hand (HeldBy names the dependency while
// held).
func (p *pipeline) transition(ev event) (from Status, err error) {
	from, err = p.m.fire(ev)
	p.syncPhase()
	return from, err
}

// syncPhase copies what the machine's phase says into the state that is
// persisted and shown: the status, whether the pipeline is on probation,
// and no dependency holding it outside the held phase.
func (p *pipeline) syncPhase() {
	ph := p.m.phase()
	p.state.Status = ph.status()
	p.state.Probation = ph == phaseProbation
	p.state.Stopping = ph.ending()
	if ph != phaseHeld {
		p.state.HeldBy = ""
	}
}

// must is transition for an event the step chose itself; a refusal is a
// bug, which the loop reports (doBug).
func (p *pipeline) must(ev event, fx *effects) Status {
	from, err := p.transition(ev)
	if err != nil {
		fx.bug(ev, err, p.m.current())
	}
	return from
}
