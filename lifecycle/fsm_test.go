package lifecycle

import (
	"errors"
	"testing"
)

// The machine's table, phase by phase: every event either leads where the
// table says or is refused with a *TransitionError naming the status. A
// restart comes only after waiting, a release only while held, running
// again only after a probation, a fault or a degradation only of a phase
// with a run, a start only once a stopped or force-stopped run has ended.
func TestMachineTable(t *testing.T) {
	phases := []phase{phaseRunning, phaseWaiting, phaseHeld, phaseProbation, phaseDegraded, phaseForceStopping, phaseStopped, phaseStopping}
	events := []event{eventStart, eventFault, eventHold, eventRelease, eventRestart, eventRecovered, eventDegrade, eventStop,
		eventForceStop, eventRunEnded, eventRetry}
	active := map[phase]bool{phaseRunning: true, phaseWaiting: true, phaseHeld: true, phaseProbation: true}
	withRun := map[phase]bool{phaseRunning: true, phaseProbation: true}
	want := func(from phase, ev event) (phase, bool) {
		switch ev {
		case eventStart:
			return phaseRunning, from == phaseStopped || from == phaseDegraded
		case eventFault:
			return phaseWaiting, withRun[from]
		case eventHold:
			return phaseHeld, from == phaseWaiting
		case eventRelease:
			return phaseWaiting, from == phaseHeld
		case eventRestart:
			return phaseProbation, from == phaseWaiting
		case eventRecovered:
			return phaseRunning, from == phaseProbation
		case eventDegrade:
			return phaseDegraded, withRun[from]
		case eventStop:
			return phaseStopping, active[from]
		case eventForceStop:
			return phaseForceStopping, active[from]
		case eventRunEnded:
			if from == phaseForceStopping {
				return phaseDegraded, true
			}
			return phaseStopped, from == phaseStopping
		case eventRetry:
			return phaseWaiting, from == phaseDegraded
		}
		t.Fatalf("event %s not in the test", ev)
		return "", false
	}
	for _, from := range phases {
		for _, ev := range events {
			m := newMachine(from.status())
			// Walk to the phase from the status's entry phase.
			switch from {
			case phaseHeld:
				mustFire(t, m, eventHold)
			case phaseProbation:
				mustFire(t, m, eventRestart)
			case phaseStopping:
				m = newMachine(StatusRunning)
				mustFire(t, m, eventStop)
			case phaseForceStopping:
				m = newMachine(StatusRunning)
				mustFire(t, m, eventForceStop)
			}
			if m.phase() != from {
				t.Fatalf("setting up %s: machine in %s", from, m.phase())
			}
			dst, ok := want(from, ev)
			before, err := m.fire(ev)
			if before != from.status() {
				t.Errorf("%s in %s: status before %s, want %s", ev, from, before, from.status())
			}
			switch {
			case ok && err != nil:
				t.Errorf("%s in %s: %v, want %s", ev, from, err, dst)
			case ok && m.phase() != dst:
				t.Errorf("%s in %s: now %s, want %s", ev, from, m.phase(), dst)
			case !ok:
				var te *TransitionError
				if !errors.As(err, &te) || !errors.Is(err, ErrInvalidTransition) || te.From != from.status() || m.phase() != from {
					t.Errorf("%s in %s: %v, now %s; want a refusal naming %s, the phase unchanged", ev, from, err, m.phase(), from.status())
				}
			}
		}
	}
}

func mustFire(t *testing.T, m *machine, ev event) {
	t.Helper()
	if _, err := m.fire(ev); err != nil {
		t.Fatal(err)
	}
}

// Each status starts in one phase: a recovering pipeline waits for its
// restart, whatever sub-state it was persisted in.
func TestEntryPhase(t *testing.T) {
	for status, want := range map[Status]phase{StatusRunning: phaseRunning, StatusRecovering: phaseWaiting,
		StatusDegraded: phaseDegraded, StatusStopped: phaseStopped} {
		if got := newMachine(status).phase(); got != want || got.status() != status {
			t.Errorf("%s starts in %s (status %s), want %s", status, got, got.status(), want)
		}
	}
}
