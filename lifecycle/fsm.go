package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/looplab/fsm"
)

// event is what moves a pipeline between states (the table of DESIGN.md
// section 5).
type event string

const (
	eventStart     event = "start"     // stopped, degraded -> running
	eventFault     event = "fault"     // running, recovering -> recovering (transient error)
	eventRestart   event = "restart"   // recovering -> recovering (backoff elapsed)
	eventRecovered event = "recovered" // recovering -> running
	eventDegrade   event = "degrade"   // running, recovering -> degraded
	eventStop      event = "stop"      // running, recovering -> stopped
	eventRetry     event = "retry"     // degraded -> recovering (a rule applied to it)
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
	running, recovering := StatusRunning.String(), StatusRecovering.String()
	degraded, stopped := StatusDegraded.String(), StatusStopped.String()
	return &machine{f: fsm.NewFSM(initial.String(), fsm.Events{
		{Name: string(eventStart), Src: []string{stopped, degraded}, Dst: running},
		{Name: string(eventFault), Src: []string{running, recovering}, Dst: recovering},
		{Name: string(eventRestart), Src: []string{recovering}, Dst: recovering},
		{Name: string(eventRecovered), Src: []string{recovering}, Dst: running},
		{Name: string(eventDegrade), Src: []string{running, recovering}, Dst: degraded},
		{Name: string(eventStop), Src: []string{running, recovering}, Dst: stopped},
		{Name: string(eventRetry), Src: []string{degraded}, Dst: recovering},
	}, nil)}
}

// current returns the state. The names are ours, so parsing cannot fail.
func (m *machine) current() Status {
	s, _ := ParseStatus(m.f.Current())
	return s
}

// can reports whether ev applies to the current state.
func (m *machine) can(ev event) bool { return m.f.Can(string(ev)) }

// fire applies ev and returns the state before it.
func (m *machine) fire(ev event) (from Status, err error) {
	from = m.current()
	err = m.f.Event(context.Background(), string(ev))
	var noTransition fsm.NoTransitionError
	switch {
	case err == nil, errors.As(err, &noTransition):
		// recovering -> recovering is a real event for us (a restart or
		// another fault), a self-transition for the library.
		return from, nil
	default:
		return from, &TransitionError{Event: string(ev), From: from}
	}
}
