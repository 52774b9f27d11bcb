package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/looplab/fsm"
	"go.uber.org/zap"
)

// phase is a state of a pipeline's machine: a status, and for recovering
// where in its recovery the pipeline is. The sub-states of recovering are
// states of the machine, not flags beside it, so that what may happen next
// is in one table: a restart only from waiting, a release only from held,
// running again only from probation.
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
	phaseStopped   = phase("stopped")
)

// status is the status the phase belongs to.
func (p phase) status() Status {
	switch p {
	case phaseRunning:
		return StatusRunning
	case phaseWaiting, phaseHeld, phaseProbation:
		return StatusRecovering
	case phaseDegraded:
		return StatusDegraded
	default:
		return StatusStopped
	}
}

// entryPhase is the phase a pipeline of status s starts in: a recovering
// one waits for a restart (a hold or a probation does not outlive the
// process).
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
// section 5, with recovering's sub-states).
type event string

const (
	eventStart     event = "start"     // stopped, degraded -> running
	eventFault     event = "fault"     // running, recovering -> recovering/waiting (transient error)
	eventHold      event = "hold"      // recovering/waiting -> recovering/held (the dependency's breaker is open)
	eventRelease   event = "release"   // recovering/held -> recovering/waiting (the breaker let it go)
	eventRestart   event = "restart"   // recovering/waiting -> recovering/probation (backoff elapsed)
	eventRecovered event = "recovered" // recovering/probation -> running
	eventDegrade   event = "degrade"   // running, recovering -> degraded
	eventStop      event = "stop"      // running, recovering -> stopped
	eventRetry     event = "retry"     // degraded -> recovering/waiting (a rule applied to it)
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

// machine is a pipeline's FSM. It is owned by the supervisor goroutine; the
// looplab/fsm underneath only guards the transition table.
type machine struct {
	f *fsm.FSM
}

func newMachine(initial Status) *machine {
	running, waiting, held := string(phaseRunning), string(phaseWaiting), string(phaseHeld)
	probation, degraded, stopped := string(phaseProbation), string(phaseDegraded), string(phaseStopped)
	active := []string{running, waiting, held, probation}
	return &machine{f: fsm.NewFSM(string(entryPhase(initial)), fsm.Events{
		{Name: string(eventStart), Src: []string{stopped, degraded}, Dst: running},
		{Name: string(eventFault), Src: active, Dst: waiting},
		{Name: string(eventHold), Src: []string{waiting}, Dst: held},
		{Name: string(eventRelease), Src: []string{held}, Dst: waiting},
		{Name: string(eventRestart), Src: []string{waiting}, Dst: probation},
		{Name: string(eventRecovered), Src: []string{probation}, Dst: running},
		{Name: string(eventDegrade), Src: active, Dst: degraded},
		{Name: string(eventStop), Src: active, Dst: stopped},
		{Name: string(eventRetry), Src: []string{degraded}, Dst: waiting},
	}, nil)}
}

// phase returns the machine's state.
func (m *machine) phase() phase { return phase(m.f.Current()) }

// current returns the status.
func (m *machine) current() Status { return m.phase().status() }

// can reports whether ev applies to the current phase.
func (m *machine) can(ev event) bool { return m.f.Can(string(ev)) }

// fire applies ev and returns the status before it.
func (m *machine) fire(ev event) (from Status, err error) {
	from = m.current()
	err = m.f.Event(context.Background(), string(ev))
	var noTransition fsm.NoTransitionError
	switch {
	case err == nil:
		return from, nil
	case errors.As(err, &noTransition):
		// The table allows it and it leads where the machine is: a fault
		// of a run while the pipeline already waits for a restart (a run a
		// stop took over). The library reports that as no transition.
		return from, nil
	default:
		return from, &TransitionError{Event: string(ev), From: from}
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
