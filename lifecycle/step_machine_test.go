package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/config"
)

// TestStep drives the supervisor's one step input by input, from a phase
// and a state, and checks the phase it leads to, the state it leaves and
// the effects it asks for, in their order: a state is saved before the
// event that records it, a run is asked to stop before the stopping event,
// a restart is scheduled before the fault is announced, and a request is
// answered last. Nothing here runs a goroutine or reads a clock.
func TestStep(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	policy := mustPolicy(config.ErrorRecoveryOverride{Probation: ptr(30 * time.Second)})
	retry503 := mustPolicy(config.ErrorRecoveryOverride{Rules: []config.Rule{{Name: "retry-503", Action: config.ActionRetry,
		Match:  config.RuleMatch{Codes: []config.CodeRange{{From: 503, To: 503}}},
		Policy: config.ErrorRecoveryOverride{Strategy: ptr("fixed"), MinDelay: ptr(30 * time.Second)}}}})
	unavailable := ErrorInfo{At: now.Add(-time.Minute), Code: 503, Class: cerrors.ClassTransient, Source: cerrors.SourceTyped,
		Message: "unavailable", Component: "src", ComponentKind: cerrors.ComponentSource, Dependency: "db"}
	fatal := ErrorInfo{At: now.Add(-time.Minute), Code: 503, Class: cerrors.ClassFatal, Source: cerrors.SourceRule, Message: "unavailable",
		Component: "src", ComponentKind: cerrors.ComponentSource}
	open := func() *Episode {
		return &Episode{StartedAt: now.Add(-time.Minute), Attempts: []Attempt{{Number: 1, FailedAt: now.Add(-time.Minute), Error: unavailable}}}
	}
	reply := make(chan error, 1)
	applied := make(chan ApplyOutcome, 1)
	shutdown := Retirement{Reason: StopReasonShutdown, Actor: ActorSystem, Stopping: "draining for shutdown", Stopped: "stopped for shutdown"}
	update := Retirement{Reason: StopReasonUpdated, Actor: ActorConfig, Stopping: "draining for update", Stopped: "stopped for update"}

	tests := []struct {
		name string
		// phase, state, run, pending: where the pipeline is.
		phase   phase
		state   State
		run     runEnding // with a run (id 1) when hasRun
		hasRun  bool
		pending bool // a restart (run id 2) waits for its time
		retired *Retirement
		// snapshot beyond now and the policy
		policy   *Policy
		rules    bool
		rule     string
		openedAt time.Duration // before now; 0: not open
		// stopTimeout, crashLoopAfter, persisted: the facts of Config.
		stopTimeout    time.Duration
		crashLoopAfter int
		persisted      bool
		in             input
		// what the step leads to
		want    phase
		effects string
		check   func(t *testing.T, p *pipeline, fx effects)
	}{{
		name: "a user starts a degraded pipeline: its failures no longer count", phase: phaseDegraded,
		state: State{Status: StatusDegraded, FailCount: 3, Flaps: 2, DegradedReason: ReasonFatal, Poison: &PoisonRecord{Runs: 2}},
		in:    startMsg{actor: ActorUser, reply: reply}, want: phaseRunning,
		effects: "emit:starting save emit:running start-run reply:<nil>",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if st := p.state; st.FailCount != 0 || st.Flaps != 0 || st.DegradedReason != "" || st.Poison != nil || !st.UpdatedAt.Equal(now) {
				t.Errorf("state %+v", st)
			}
		},
	}, {
		name: "starting a running pipeline is refused", phase: phaseRunning, state: State{Status: StatusRunning}, hasRun: true,
		in: startMsg{actor: ActorUser, reply: reply}, want: phaseRunning, effects: "reply:cannot start a running pipeline",
	}, {
		name: "starting while the stopped run still drains says so", phase: phaseStopping, state: State{Status: StatusStopped},
		hasRun: true, run: runDraining,
		in: startMsg{actor: ActorUser, reply: reply}, want: phaseStopping, effects: "reply:" + ErrStillStopping.Error(),
	}, {
		name: "starting a pipeline whose supervisor ends is refused", phase: phaseStopped, state: State{Status: StatusStopped}, retired: &update,
		in: startMsg{actor: ActorUser, reply: reply}, want: phaseStopped, effects: "reply:" + ErrSupervisorDone.Error(),
	}, {
		name: "a stop drains the run: asked first, then told, answered when it ended", phase: phaseRunning,
		state: State{Status: StatusRunning}, hasRun: true,
		in: stopMsg{reply: reply}, want: phaseStopping,
		effects: "stop-timers save stop-run emit:stopping await",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.run.ending != runDraining {
				t.Errorf("run ending %v, want draining", p.run.ending)
			}
		},
	}, {
		name: "a stop of a waiting pipeline leaves its breaker and ends the episode", phase: phaseWaiting,
		state: State{Status: StatusRecovering, FailCount: 1, NextAttemptAt: now.Add(time.Second), LastError: &unavailable, Episode: open()},
		in:    stopMsg{reply: reply}, want: phaseStopped,
		effects: "stop-timers leave-breaker:db save emit:stopped reply:<nil>",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if st := p.state; !st.NextAttemptAt.IsZero() || st.Episode.Outcome != "stopped" || !st.Episode.EndedAt.Equal(now) {
				t.Errorf("state %+v, episode %+v", st, st.Episode)
			}
		},
	}, {
		name: "stopping a stopped pipeline is refused", phase: phaseStopped, state: State{Status: StatusStopped},
		in: stopMsg{reply: reply}, want: phaseStopped, effects: "reply:cannot stop a stopped pipeline",
	}, {
		name: "a force stop degrades at once and cuts the run", phase: phaseProbation,
		state: State{Status: StatusRecovering, Probation: true, FailCount: 2, Episode: open()}, hasRun: true,
		in: stopMsg{force: true, reply: reply}, want: phaseForceStopping,
		effects: "stop-timers save emit:degraded cancel-run await",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.DegradedReason != ReasonForceStop || p.state.Status != StatusDegraded || p.run.ending != runForced {
				t.Errorf("state %+v, run ending %v", p.state, p.run.ending)
			}
		},
	}, {
		name: "a force stop cuts a graceful stop under way short", phase: phaseStopping, state: State{Status: StatusStopped},
		hasRun: true, run: runDraining,
		in: stopMsg{force: true, reply: reply}, want: phaseStopping, effects: "cancel-run await",
	}, {
		name: "a force stop without a run", phase: phaseHeld, state: State{Status: StatusRecovering, HeldBy: "db", LastError: &unavailable},
		in: stopMsg{force: true, reply: reply}, want: phaseDegraded,
		effects: "stop-timers leave-breaker:db save emit:degraded reply:<nil>",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.HeldBy != "" {
				t.Errorf("still held by %q", p.state.HeldBy)
			}
		},
	}, {
		name: "the drained run ended: stopped, the stop is answered", phase: phaseStopping, state: State{Status: StatusStopped},
		hasRun: true, run: runDraining,
		in: runEndedMsg{id: 1}, want: phaseStopped, effects: "cancel-run emit:stopped answer-waiters",
	}, {
		name: "a drain that failed keeps its error and restarts nothing", phase: phaseStopping, state: State{Status: StatusStopped},
		hasRun: true, run: runDraining,
		in: runEndedMsg{id: 1, err: errors.New("flush failed")}, want: phaseStopped, effects: "cancel-run save warn emit:stopped answer-waiters",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.LastError == nil || p.state.LastError.Message != "flush failed" {
				t.Errorf("last error %+v", p.state.LastError)
			}
		},
	}, {
		name: "a retirement's drained run ends with the retirement's stopped event", phase: phaseStopping,
		state: State{Status: StatusStopped, StopReason: StopReasonShutdown, ResumeStatus: StatusRunning}, hasRun: true, run: runDraining, retired: &shutdown,
		in: runEndedMsg{id: 1}, want: phaseStopped, effects: "cancel-run emit:stopped answer-waiters",
		check: func(t *testing.T, _ *pipeline, fx effects) {
			if e := fx[1].event; e.Message != "stopped for shutdown" || e.Reason != string(StopReasonShutdown) {
				t.Errorf("stopped event %+v", e)
			}
		},
	}, {
		name: "the force-stopped run ended: degraded, nothing more to say", phase: phaseForceStopping, state: State{Status: StatusDegraded},
		hasRun: true, run: runForced,
		in: runEndedMsg{id: 1, err: errForcedStep}, want: phaseDegraded, effects: "cancel-run warn answer-waiters",
	}, {
		name: "a run of an earlier start ending is no news", phase: phaseRunning, state: State{Status: StatusRunning}, hasRun: true,
		in: runEndedMsg{id: 7, err: errors.New("x")}, want: phaseRunning, effects: "",
	}, {
		name: "a source that ended stops the pipeline", phase: phaseRunning, state: State{Status: StatusRunning}, hasRun: true,
		in: runEndedMsg{id: 1}, want: phaseStopped, effects: "cancel-run stop-timers save emit:stopped",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if p.run != nil || fx[3].event.Reason != string(StopReasonFinished) {
				t.Errorf("run %v, event %+v", p.run, fx[3].event)
			}
		},
	}, {
		name: "a transient fault: the restart is scheduled before the fault is announced", phase: phaseRunning,
		state: State{Status: StatusRunning}, hasRun: true, rules: true,
		in: runEndedMsg{id: 1, err: cerrors.WithCode(errors.New("unavailable"), 503)}, want: phaseWaiting,
		effects: "cancel-run stop-timers schedule emit:fault save emit:recovering",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if st := p.state; st.FailCount != 1 || !st.NextAttemptAt.Equal(now.Add(time.Second)) || st.Episode == nil || st.LastError.Code != 503 {
				t.Errorf("state %+v", st)
			}
			if !fx[2].at.Equal(now.Add(time.Second)) || !fx[3].event.Time.Equal(now) {
				t.Errorf("scheduled at %v, fault at %v", fx[2].at, fx[3].event.Time)
			}
		},
	}, {
		name: "a fatal fault degrades: announced before the transition", phase: phaseProbation,
		state: State{Status: StatusRecovering, Probation: true, FailCount: 1, Episode: open()}, hasRun: true, rules: true,
		in: runEndedMsg{id: 1, err: cerrors.WithCode(errors.New("bad request"), 400)}, want: phaseDegraded,
		effects: "cancel-run stop-timers emit:fault save emit:degraded",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.DegradedReason != ReasonFatal || p.state.Episode.EndedAt.IsZero() {
				t.Errorf("state %+v", p.state)
			}
		},
	}, {
		name: "a fault on a dependency asks its breaker before anything changes", phase: phaseRunning,
		state: State{Status: StatusRunning}, hasRun: true, rules: true,
		in:   runEndedMsg{id: 1, err: cerrors.WithDetails(errors.New("down"), 503, map[string]any{"dependency": "db"})},
		want: phaseRunning, effects: "cancel-run ask-breaker:db",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if p.state.FailCount != 0 || p.state.LastError != nil || fx[1].more.(*faultStep).decision.Action != ActionRestart {
				t.Errorf("state %+v before the breaker answered, decision %+v", p.state, fx[1].more.(*faultStep).decision)
			}
		},
	}, {
		name: "the breaker holds the restart: held, nothing scheduled", phase: phaseRunning, state: State{Status: StatusRunning},
		in:   breakerAnswered{step: &faultStep{decision: Decision{Action: ActionRestart, Attempt: 1, Delay: time.Second}, info: unavailable}, held: "db"},
		want: phaseHeld, effects: "stop-timers emit:fault save emit:recovering",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if p.state.HeldBy != "db" || !p.state.NextAttemptAt.IsZero() || fx[3].event.Reason != "breaker" {
				t.Errorf("state %+v, event %+v", p.state, fx[3].event)
			}
		},
	}, {
		name: "the breaker lets it go: scheduled as any restart", phase: phaseRunning, state: State{Status: StatusRunning},
		in:   breakerAnswered{step: &faultStep{decision: Decision{Action: ActionRestart, Attempt: 1, Delay: time.Second}, info: unavailable}},
		want: phaseWaiting, effects: "stop-timers schedule emit:fault save emit:recovering",
	}, {
		name: "a fault while the supervisor ends schedules nothing", phase: phaseRunning, state: State{Status: StatusRunning}, retired: &update,
		in:   breakerAnswered{step: &faultStep{decision: Decision{Action: ActionRestart, Attempt: 1, Delay: time.Second}, info: unavailable}},
		want: phaseWaiting, effects: "stop-timers emit:fault save emit:recovering",
	}, {
		name: "the scheduler launched the restart: on probation, its timers set", phase: phaseWaiting,
		state: State{Status: StatusRecovering, FailCount: 1, NextAttemptAt: now, Episode: open()}, pending: true,
		in: restartedMsg{id: 2, at: now.Add(-time.Second)}, want: phaseProbation,
		effects: "emit:restarted stop-timers window:4m59s probation:30s",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if p.run == nil || p.run.id != 2 || p.pending != nil || !p.state.NextAttemptAt.IsZero() || !p.state.Probation {
				t.Errorf("run %v, pending %v, state %+v", p.run, p.pending, p.state)
			}
			if !fx[0].event.Time.Equal(now.Add(-time.Second)) {
				t.Errorf("restarted at %v", fx[0].event.Time)
			}
		},
	}, {
		name: "a restart a stop took over is not announced", phase: phaseStopped, state: State{Status: StatusStopped},
		in: restartedMsg{id: 2, at: now}, want: phaseStopped, effects: "",
	}, {
		name: "a first record on probation: recovered, the breaker told", phase: phaseProbation,
		state: State{Status: StatusRecovering, Probation: true, FailCount: 2, LastError: &unavailable, Episode: open()}, hasRun: true,
		in: firstAckMsg{id: 1}, want: phaseRunning, effects: "stop-timers breaker-success:db save emit:recovered",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if st := p.state; st.FailCount != 0 || st.LastEpisodeAttempts != 2 || !st.LastRecoveredAt.Equal(now) || st.Episode.Outcome != "recovered (record)" {
				t.Errorf("state %+v", st)
			}
		},
	}, {
		name: "the probation timer while connecting: set again for what is left", phase: phaseProbation,
		state: State{Status: StatusRecovering, Probation: true, FailCount: 1, Episode: open()}, hasRun: true, openedAt: 10 * time.Second,
		in: probationElapsed{}, want: phaseProbation, effects: "probation:20s",
	}, {
		name: "the probation over: running again, the fail count kept", phase: phaseProbation,
		state: State{Status: StatusRecovering, Probation: true, FailCount: 1, Episode: open()}, hasRun: true, openedAt: time.Minute,
		in: probationElapsed{}, want: phaseRunning, effects: "save emit:recovered",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if p.state.FailCount != 1 || fx[1].event.Reason != string(RecoveredByProbation) {
				t.Errorf("state %+v, event %+v", p.state, fx[1].event)
			}
		},
	}, {
		name: "the healthy window after the probation resets the fail count", phase: phaseRunning,
		state: State{Status: StatusRunning, FailCount: 1, Episode: open()}, hasRun: true,
		in: windowElapsed{}, want: phaseRunning, effects: "stop-timers save emit:recovered",
	}, {
		name: "the breaker releases a held pipeline: its restart is scheduled", phase: phaseHeld,
		state: State{Status: StatusRecovering, HeldBy: "db", FailCount: 2, LastError: &unavailable},
		in:    releaseMsg{after: 2 * time.Second}, want: phaseWaiting, effects: "schedule save emit:recovering",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.HeldBy != "" || !p.state.NextAttemptAt.Equal(now.Add(2*time.Second)) {
				t.Errorf("state %+v", p.state)
			}
		},
	}, {
		name: "a managed rule applied to a degraded pipeline schedules its restart", phase: phaseDegraded,
		state: State{Status: StatusDegraded, DegradedReason: ReasonFatal, FailCount: 3, LastError: &fatal}, policy: &retry503, rule: "retry-503",
		in: applyRuleMsg{rule: "retry-503", actor: ActorUser, reply: applied}, want: phaseWaiting, effects: "schedule save emit:recovering answer-apply",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if o := fx[3].more.(*appliedRule).outcome; !o.Restarted || !o.NextAttemptAt.Equal(now.Add(30*time.Second)) || p.state.FailCount != 1 {
				t.Errorf("outcome %+v, state %+v", o, p.state)
			}
		},
	}, {
		name: "a rule applied to a running pipeline only answers", phase: phaseRunning, state: State{Status: StatusRunning}, hasRun: true,
		policy: &retry503, rule: "retry-503",
		in: applyRuleMsg{rule: "retry-503", actor: ActorUser, reply: applied}, want: phaseRunning, effects: "answer-apply",
	}, {
		name: "a shutdown drains a running pipeline and keeps it for the next process", phase: phaseRunning,
		state: State{Status: StatusRunning, LastError: &unavailable}, hasRun: true,
		in: retireMsg{why: shutdown}, want: phaseStopping, effects: "stop-timers save emit:stopping stop-run",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if st := p.state; st.StopReason != StopReasonShutdown || st.ResumeStatus != StatusRunning || !p.retiring() || p.run.ending != runDraining {
				t.Errorf("state %+v, retiring %v", st, p.retiring())
			}
		},
	}, {
		name: "an update of a waiting pipeline ends its part in the breaker", phase: phaseWaiting,
		state: State{Status: StatusRecovering, FailCount: 1, LastError: &unavailable},
		in:    retireMsg{why: update}, want: phaseStopped, effects: "stop-timers leave-breaker:db save emit:stopped",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.ResumeStatus != StatusRecovering || p.state.FailCount != 1 {
				t.Errorf("state %+v", p.state)
			}
		},
	}, {
		name: "a retirement of a degraded pipeline changes nothing", phase: phaseDegraded, state: State{Status: StatusDegraded},
		in: retireMsg{why: shutdown}, want: phaseDegraded, effects: "stop-timers",
	}, {
		name: "a kill cuts the run off, the status stays", phase: phaseStopping, state: State{Status: StatusStopped}, hasRun: true, run: runDraining,
		in: killMsg{}, want: phaseStopping, effects: "cancel-run",
	}, {
		name: "a stop's drain has a deadline", phase: phaseRunning, state: State{Status: StatusRunning}, hasRun: true,
		stopTimeout: 3 * time.Second,
		in:          stopMsg{reply: reply}, want: phaseStopping,
		effects: "stop-timers save stop-run deadline:3s emit:stopping await",
	}, {
		name: "a force stop has a deadline for the run to end", phase: phaseRunning, state: State{Status: StatusRunning}, hasRun: true,
		stopTimeout: 3 * time.Second,
		in:          stopMsg{force: true, reply: reply}, want: phaseForceStopping,
		effects: "stop-timers save emit:degraded cancel-run deadline:3s await",
	}, {
		name: "a retirement's drain has a deadline", phase: phaseRunning, state: State{Status: StatusRunning}, hasRun: true,
		stopTimeout: 3 * time.Second,
		in:          retireMsg{why: update}, want: phaseStopping,
		effects: "stop-timers save emit:stopping stop-run deadline:3s",
	}, {
		name: "a user's stop past its deadline is forced: a force stop, degraded, saying why", phase: phaseStopping,
		state: State{Status: StatusStopped}, hasRun: true, run: runDraining, stopTimeout: 3 * time.Second,
		in: stopOverdue{id: 1}, want: phaseForceStopping,
		effects: "cancel-run save emit:degraded deadline:3s",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if p.run == nil || p.run.ending != runForced || p.state.DegradedReason != ReasonForceStop || !p.state.Stopping {
				t.Errorf("state %+v, run %+v", p.state, p.run)
			}
			if le := p.state.LastError; le == nil || !strings.Contains(le.Message, "graceful stop did not finish within 3s") {
				t.Errorf("last error %+v", p.state.LastError)
			}
		},
	}, {
		name: "a retirement past its deadline is forced and stays stopped for its reason", phase: phaseStopping,
		state: State{Status: StatusStopped, StopReason: StopReasonUpdated, ResumeStatus: StatusRunning}, hasRun: true, run: runDraining,
		retired: &update, stopTimeout: 3 * time.Second,
		in: stopOverdue{id: 1}, want: phaseStopping, effects: "cancel-run warn deadline:3s",
	}, {
		name: "a forced run that does not end by the next deadline is abandoned: the stop is over", phase: phaseForceStopping,
		state: State{Status: StatusDegraded, DegradedReason: ReasonForceStop}, hasRun: true, run: runForced, stopTimeout: 3 * time.Second,
		in: stopOverdue{id: 1}, want: phaseDegraded, effects: "warn answer-waiters",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.run != nil || p.state.Stopping {
				t.Errorf("run %+v, state %+v: the abandoned run is still the pipeline's", p.run, p.state)
			}
		},
	}, {
		name: "an abandoned retirement's run: stopped for its reason", phase: phaseStopping,
		state: State{Status: StatusStopped, StopReason: StopReasonShutdown, ResumeStatus: StatusRunning}, hasRun: true, run: runForced,
		retired: &shutdown, stopTimeout: 3 * time.Second,
		in: stopOverdue{id: 1}, want: phaseStopped, effects: "warn emit:stopped answer-waiters",
	}, {
		name: "the deadline of a run that ended in time does nothing", phase: phaseRunning, state: State{Status: StatusRunning},
		hasRun: true, stopTimeout: 3 * time.Second,
		in: stopOverdue{id: 7}, want: phaseRunning, effects: "",
	}, {
		name: "a run ending in time stops its deadline", phase: phaseStopping, state: State{Status: StatusStopped},
		hasRun: true, run: runDraining, stopTimeout: 3 * time.Second,
		in: runEndedMsg{id: 1}, want: phaseStopped, effects: "cancel-run stop-deadline emit:stopped answer-waiters",
	}, {
		name: "crash-loop guard: a start marks the run", phase: phaseStopped, state: State{Status: StatusStopped, Crashes: 2},
		crashLoopAfter: 3,
		in:             startMsg{actor: ActorUser, reply: reply}, want: phaseRunning,
		effects: "proof:1m0s emit:starting save emit:running start-run reply:<nil>",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if !p.state.Run || p.state.Crashes != 0 {
				t.Errorf("state %+v: want the run marked, the deaths a user's start cleared", p.state)
			}
		},
	}, {
		name: "crash-loop guard: a process that died during the run counts it", phase: phaseRunning,
		state: State{Status: StatusRunning, Run: true, Crashes: 1}, crashLoopAfter: 3, persisted: true,
		in: resumeInput{}, want: phaseRunning, effects: "save emit:resumed proof:1m0s save emit:running start-run",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if !p.state.Run || p.state.Crashes != 2 {
				t.Errorf("state %+v: want 2 deaths and the new run marked", p.state)
			}
		},
	}, {
		name: "crash-loop guard: the last deaths in a row reach the limit: degraded, not run", phase: phaseRunning,
		state: State{Status: StatusRunning, Run: true, Crashes: 2}, crashLoopAfter: 3, persisted: true,
		in: resumeInput{}, want: phaseDegraded, effects: "save emit:degraded",
		check: func(t *testing.T, p *pipeline, fx effects) {
			if st := p.state; st.Run || st.Crashes != 3 || st.DegradedReason != ReasonCrashLoop || st.LastError == nil ||
				!strings.Contains(st.LastError.Message, "3 times in a row") {
				t.Errorf("state %+v", st)
			}
			if e := fx[1].event; e.StatusBefore != StatusRunning || e.Reason != string(ReasonCrashLoop) || e.Actor != ActorSystem {
				t.Errorf("event %+v", e)
			}
		},
	}, {
		name: "crash-loop guard: a recovering pipeline killed during its restarted run is held too", phase: phaseWaiting,
		state:          State{Status: StatusRecovering, FailCount: 2, Run: true, Crashes: 2, NextAttemptAt: now.Add(-time.Second), Episode: open()},
		crashLoopAfter: 3, persisted: true,
		in: resumeInput{}, want: phaseDegraded, effects: "save emit:degraded",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if st := p.state; !st.NextAttemptAt.IsZero() || st.Episode.Outcome != "degraded (crash loop)" {
				t.Errorf("state %+v", st)
			}
		},
	}, {
		name: "crash-loop guard off: the deaths are counted, the pipeline runs", phase: phaseRunning,
		state: State{Status: StatusRunning, Run: true, Crashes: 5}, persisted: true,
		in: resumeInput{}, want: phaseRunning, effects: "save emit:resumed emit:running start-run",
	}, {
		name: "crash-loop guard: a clean shutdown is no death", phase: phaseRunning,
		state:          State{Status: StatusStopped, StopReason: StopReasonShutdown, ResumeStatus: StatusRunning, Crashes: 2},
		crashLoopAfter: 3, persisted: true,
		in: resumeInput{}, want: phaseRunning, effects: "emit:resumed proof:1m0s save emit:running start-run",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if !p.state.Run || p.state.Crashes != 2 {
				t.Errorf("state %+v", p.state)
			}
		},
	}, {
		name: "crash-loop guard: a record end to end proves the run", phase: phaseRunning,
		state: State{Status: StatusRunning, Run: true, Crashes: 2}, hasRun: true, crashLoopAfter: 3,
		in: firstAckMsg{id: 1}, want: phaseRunning, effects: "save",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.Run || p.state.Crashes != 0 {
				t.Errorf("state %+v", p.state)
			}
		},
	}, {
		name: "crash-loop guard: a run that lived crashLoopProof without a record is proved too (an idle source)", phase: phaseRunning,
		state: State{Status: StatusRunning, Run: true, Crashes: 2}, hasRun: true, crashLoopAfter: 3,
		in: proofElapsed{}, want: phaseRunning, effects: "save",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.Run || p.state.Crashes != 0 {
				t.Errorf("state %+v: want the mark and the deaths cleared", p.state)
			}
		},
	}, {
		name: "crash-loop guard: the proof's timer of a run that already ended does nothing", phase: phaseStopped,
		state: State{Status: StatusStopped, Crashes: 1}, crashLoopAfter: 3,
		in: proofElapsed{}, want: phaseStopped, effects: "",
	}, {
		name: "crash-loop guard: a run that ended was no death", phase: phaseRunning,
		state: State{Status: StatusRunning, Run: true, Crashes: 1}, hasRun: true, crashLoopAfter: 3,
		in: runEndedMsg{id: 1}, want: phaseStopped, effects: "cancel-run save stop-timers save emit:stopped",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if p.state.Run || p.state.Crashes != 0 {
				t.Errorf("state %+v", p.state)
			}
		},
	}, {
		name: "crash-loop guard: a restart marks its run", phase: phaseWaiting,
		state: State{Status: StatusRecovering, FailCount: 1, NextAttemptAt: now}, pending: true, crashLoopAfter: 3,
		in: restartedMsg{id: 2, at: now}, want: phaseProbation, effects: "proof:1m0s save emit:restarted stop-timers window:5m0s probation:30s",
		check: func(t *testing.T, p *pipeline, _ effects) {
			if !p.state.Run {
				t.Errorf("state %+v", p.state)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := pipelineAt(t, tt.phase, tt.state.Clone())
			if tt.hasRun {
				p.run = &activeRun{id: 1, ending: tt.run}
			}
			if tt.pending {
				p.pending = &pendingRestart{run: &activeRun{id: 2}, scheduled: now}
			}
			p.retirement = tt.retired
			pol := &policy
			if tt.policy != nil {
				pol = tt.policy
			}
			snap := snapshot{facts: &facts{pipelineID: "orders", breakers: true, stopTimeout: tt.stopTimeout, crashLoopAfter: tt.crashLoopAfter,
				persisted: tt.persisted}, policy: pol, now: now, random: 0.5}
			if tt.rules {
				snap.rules = pol.RuleSet()
			}
			if tt.rule != "" {
				snap.rule = pol.ManagedRule(tt.rule)
				if snap.rule == nil {
					snap.rule = findRule(t, pol, tt.rule)
				}
			}
			if tt.openedAt > 0 {
				at := now.Add(-tt.openedAt)
				snap.openedAt = &at
			}
			var fx effects
			p.step(tt.in, &snap, &fx)
			if got := p.m.phase(); got != tt.want {
				t.Errorf("phase %s, want %s", got, tt.want)
			}
			if p.state.Status != p.m.current() {
				t.Errorf("state says %s, the machine %s", p.state.Status, p.m.current())
			}
			if got := describeEffects(fx, now); got != tt.effects {
				t.Errorf("effects\n got %s\nwant %s", got, tt.effects)
			}
			for _, e := range fx {
				if e.do == doEmit && e.event.Kind != auditlog.KindRestarted && !e.event.Time.Equal(now) {
					t.Errorf("%s event at %v, want the snapshot's now", e.event.Kind, e.event.Time)
				}
			}
			if tt.check != nil {
				tt.check(t, p, fx)
			}
		})
	}
}

// errForcedStep is how a cancelled run ends in these tables.
var errForcedStep = errors.New("context canceled")

// pipelineAt returns a pipeline whose machine is in ph, with st.
func pipelineAt(t *testing.T, ph phase, st State) *pipeline {
	t.Helper()
	p := &pipeline{m: newMachine(ph.status()), state: st}
	switch ph {
	case phaseHeld:
		mustFire(t, p.m, eventHold)
	case phaseProbation:
		mustFire(t, p.m, eventRestart)
	case phaseStopping, phaseForceStopping:
		p.m = newMachine(StatusRunning)
		ev := eventStop
		if ph == phaseForceStopping {
			ev = eventForceStop
		}
		mustFire(t, p.m, ev)
	}
	if p.m.phase() != ph {
		t.Fatalf("setting up %s: machine in %s", ph, p.m.phase())
	}
	return p
}

// findRule returns the rule of p called name (the pipeline's own rules
// stand in for a managed one here).
func findRule(t *testing.T, p *Policy, name string) *Rule {
	t.Helper()
	for _, rules := range p.RuleSet() {
		for i := range rules {
			if rules[i].Name == name {
				return &rules[i]
			}
		}
	}
	t.Fatalf("no rule %s", name)
	return nil
}

// describeEffects writes effects as the tables above expect them (a
// timer as how long after now it fires).
func describeEffects(fx effects, now time.Time) string {
	names := map[effectKind]string{doSave: "save", doStartRun: "start-run", doScheduleRestart: "schedule", doStopRun: "stop-run",
		doCancelRun: "cancel-run", doStopTimers: "stop-timers", doAwait: "await", doAnswerWaiters: "answer-waiters",
		doAnswerApply: "answer-apply", doWarn: "warn", doBug: "bug", doStopDeadline: "stop-deadline"}
	var out []string
	for _, e := range fx {
		switch e.do {
		case doEmit:
			out = append(out, "emit:"+string(e.event.Kind))
		case doReply:
			out = append(out, "reply:"+errText(e.more.(*replyTo).err))
		case doStartWindow:
			out = append(out, "window:"+e.at.Sub(now).String())
		case doStartProbation:
			out = append(out, "probation:"+e.at.Sub(now).String())
		case doStartProof:
			out = append(out, "proof:"+e.at.Sub(now).String())
		case doStartDeadline:
			out = append(out, "deadline:"+e.at.Sub(now).String())
		case doLeaveBreaker:
			out = append(out, "leave-breaker:"+e.more.(string))
		case doBreakerSuccess:
			out = append(out, "breaker-success:"+e.more.(string))
		case doAskBreaker:
			out = append(out, "ask-breaker:"+e.more.(*faultStep).info.Dependency)
		default:
			out = append(out, names[e.do])
		}
	}
	return strings.Join(out, " ")
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
