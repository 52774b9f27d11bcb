package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/config"
)

var errNetwork = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")

func transientErr() error {
	return &stageErr{kind: "source", id: "pg", err: fmt.Errorf("read: %w", cerrors.WithCode(errNetwork, 503))}
}

func fatalErr() error {
	return &stageErr{kind: "destination", id: "out", err: fmt.Errorf("write: %w", cerrors.Fatal(errors.New("table orders does not exist")))}
}

func TestTransientFaultRecoversOnFirstRecord(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()

	run.fail(transientErr())
	rec := h.expect(auditlog.KindRecovering)
	if rec.Attempt != 1 || rec.Delay != time.Second || rec.StatusBefore != StatusRunning || rec.StatusAfter != StatusRecovering {
		t.Fatalf("recovering event %+v, want attempt 1 after 1s from running", rec)
	}
	if e := rec; !e.HasError() || e.ErrorCode != 503 || e.ErrorClass != "transient" || e.ErrorSource != "typed" ||
		e.Component != "pg" || e.ComponentKind != "source" || e.ErrorMessage != "read: "+errNetwork.Error() {
		t.Fatalf("error info %+v: want the cause with code, class, source and component", rec)
	}
	st := h.states.last("p1")
	if st.Status != StatusRecovering || st.FailCount != 1 || !st.NextAttemptAt.Equal(h.clock.Now().Add(time.Second)) {
		t.Fatalf("persisted %+v, want recovering, fail count 1, next attempt in 1s", st)
	}

	h.advance(999 * time.Millisecond)
	h.noRun()
	h.advance(time.Millisecond)
	restarted := h.expect(auditlog.KindRestarted)
	if restarted.Attempt != 1 {
		t.Fatalf("restarted attempt %d", restarted.Attempt)
	}
	run = h.nextRun()
	if st := h.state(); st.Status != StatusRecovering || !st.Probation {
		t.Fatalf("after the restart: %+v, want recovering on probation (not running yet)", st)
	}

	run.ack()
	recovered := h.expect(auditlog.KindRecovered)
	if recovered.Reason != string(RecoveredByRecord) || recovered.StatusAfter != StatusRunning {
		t.Fatalf("recovered %+v, want by record to running", recovered)
	}
	st = h.states.last("p1")
	if st.Status != StatusRunning || st.FailCount != 0 || st.Episode == nil || st.Episode.Outcome != "recovered (record)" {
		t.Fatalf("persisted %+v, want running with fail count 0 and the episode closed", st)
	}
	if h.clock.Pending() != 0 {
		t.Fatalf("%d timers still pending after recovery", h.clock.Pending())
	}

	// The status and fail count were reset; once the flap window has
	// passed, the next fault starts a new episode at min-delay.
	h.advance(defaultPolicy().FlapWindow)
	run.fail(transientErr())
	if rec := h.expect(auditlog.KindRecovering); rec.Attempt != 1 || rec.Delay != time.Second {
		t.Fatalf("after a reset: attempt %d delay %s, want 1 and 1s", rec.Attempt, rec.Delay)
	}
}

// A pipeline that recovers and fails again at once is flapping: it is
// running again after each first record, but its backoff continues, and
// after max-flaps such episodes it is degraded (reason flapping).
func TestFlappingPipelineSlowsDownAndDegrades(t *testing.T) {
	p := mustPolicy(config.ErrorRecoveryOverride{MaxFlaps: ptr(2), FlapWindow: ptr(time.Minute)})
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	wantDelays := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
	for flap, want := range wantDelays {
		run.fail(transientErr())
		rec := h.expect(auditlog.KindRecovering)
		if rec.Delay != want || rec.Attempt != flap+1 {
			t.Fatalf("episode %d: recovering attempt %d in %s, want attempt %d in %s", flap+1, rec.Attempt, rec.Delay, flap+1, want)
		}
		// The first episode is no flap; each later one starts within
		// flap-window of a recovery, and its recovering event says so.
		if wantReason := map[bool]string{false: "", true: string(ReasonFlapping)}[flap > 0]; rec.Reason != wantReason {
			t.Fatalf("episode %d: recovering reason %q, want %q", flap+1, rec.Reason, wantReason)
		}
		h.advance(want)
		h.expect(auditlog.KindRestarted)
		run = h.nextRun()
		run.ack()
		if e := h.expect(auditlog.KindRecovered); e.StatusAfter != StatusRunning {
			t.Fatalf("episode %d: recovered to %s, want running", flap+1, e.StatusAfter)
		}
		if st := h.state(); st.Status != StatusRunning || st.Flaps != flap {
			t.Fatalf("episode %d: %+v, want running with %d flaps", flap+1, st, flap)
		}
	}
	run.fail(transientErr())
	fault := h.expect(auditlog.KindFault)
	if !strings.Contains(fault.Message, "flap 3 in a row") {
		t.Fatalf("fault %q does not say it flapped", fault.Message)
	}
	degraded := h.expect(auditlog.KindDegraded)
	if degraded.Reason != string(ReasonFlapping) || !strings.Contains(degraded.Message, "max-flaps 2") {
		t.Fatalf("degraded %+v, want reason flapping naming max-flaps", degraded)
	}
	if st := h.states.last("p1"); st.Status != StatusDegraded || st.DegradedReason != ReasonFlapping {
		t.Fatalf("persisted %+v, want degraded for flapping", st)
	}
}

func TestCrashLoopStaysRecoveringOnSchedule(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, delay := range want {
		run.fail(transientErr())
		rec := h.expect(auditlog.KindRecovering)
		if rec.Attempt != i+1 || rec.Delay != delay {
			t.Fatalf("failure %d: attempt %d delay %s, want %d and %s", i+1, rec.Attempt, rec.Delay, i+1, delay)
		}
		h.advance(delay)
		h.expect(auditlog.KindRestarted) // never auditlog.KindRunning or auditlog.KindRecovered in between
		run = h.nextRun()
		if st := h.state(); st.Status != StatusRecovering {
			t.Fatalf("status %s during a crash loop, want recovering", st.Status)
		}
	}
	st := h.state()
	if st.Episode == nil || len(st.Episode.Attempts) != len(want) || st.FailCount != len(want) {
		t.Fatalf("episode %+v fail count %d, want %d attempts", st.Episode, st.FailCount, len(want))
	}
	if d := st.Episode.Duration(h.clock.Now()); d != 2*time.Minute+63*time.Second {
		t.Fatalf("episode lasted %s, want the sum of the delays", d)
	}
}

func TestHealthyWindowRecovers(t *testing.T) {
	p := defaultPolicy()
	p.HealthyWindow = 30 * time.Second
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(transientErr())
	h.expect(auditlog.KindRecovering)
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	h.nextRun()
	h.advance(29 * time.Second)
	if st := h.state(); st.Status != StatusRecovering {
		t.Fatalf("recovered before the window ended: %s", st.Status)
	}
	h.advance(time.Second)
	if e := h.expect(auditlog.KindRecovered); e.Reason != string(RecoveredByWindow) {
		t.Fatalf("recovered by %q, want window", e.Reason)
	}
	if st := h.state(); st.Status != StatusRunning || st.FailCount != 0 {
		t.Fatalf("state %+v after the window", st)
	}
}

func TestFatalDegradesAtOnceWithTheCause(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(fatalErr())
	e := h.expect(auditlog.KindDegraded)
	if e.Reason != string(ReasonFatal) {
		t.Fatalf("reason %q", e.Reason)
	}
	st := h.states.last("p1")
	if st.Status != StatusDegraded || st.DegradedReason != ReasonFatal {
		t.Fatalf("persisted %+v", st)
	}
	if le := st.LastError; le == nil || le.Code != 400 || le.Class != "fatal" || le.Component != "out" ||
		le.Message != "write: table orders does not exist" {
		t.Fatalf("last error %+v, want the original cause, not a wrapper", st.LastError)
	}
	h.advance(time.Hour)
	h.noRun()
}

func TestProcessorErrorsWithoutCodeAreFatal(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(&stageErr{kind: "processor", id: "p", err: errors.New("field .Payload.After.x: not a map")})
	e := h.expect(auditlog.KindDegraded)
	if e.ErrorClass != "fatal" || e.ErrorSource != "rule" || e.Component != "p" {
		t.Fatalf("error %+v, want fatal by rule from processor p", e)
	}
}

func TestRetriesExhausted(t *testing.T) {
	p := defaultPolicy()
	p.MaxRetries = 2
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	for i := 1; i <= 2; i++ {
		run.fail(transientErr())
		h.expect(auditlog.KindRecovering)
		h.advance(Delay(p, i, 0.5))
		h.expect(auditlog.KindRestarted)
		run = h.nextRun()
	}
	run.fail(transientErr())
	e := h.expect(auditlog.KindDegraded)
	if e.Reason != string(ReasonRetriesExhausted) || e.Attempt != 3 || !e.HasError() || e.ErrorCode != 503 {
		t.Fatalf("degraded %+v, want retries exhausted at attempt 3 with the last error", e)
	}
	if st := h.state(); len(st.Episode.Attempts) != 3 || st.Episode.Outcome != "degraded (retries exhausted)" {
		t.Fatalf("episode %+v", st.Episode)
	}
}

func TestMaxRetriesZeroDegradesOnFirstTransientError(t *testing.T) {
	p := defaultPolicy()
	p.MaxRetries = 0
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(transientErr())
	if e := h.expect(auditlog.KindDegraded); e.Reason != string(ReasonRetriesExhausted) {
		t.Fatalf("reason %q", e.Reason)
	}
}

func TestMaxDurationDegrades(t *testing.T) {
	p := defaultPolicy()
	p.MaxDuration = 5 * time.Second
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	run.fail(transientErr()) // +1s
	h.expect(auditlog.KindRecovering)
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	run = h.nextRun()
	run.fail(transientErr()) // +2s: attempt at 3s, fine
	h.expect(auditlog.KindRecovering)
	h.advance(2 * time.Second)
	h.expect(auditlog.KindRestarted)
	run = h.nextRun()
	run.fail(transientErr()) // +4s would end at 7s > 5s
	if e := h.expect(auditlog.KindDegraded); e.Reason != string(ReasonMaxDuration) {
		t.Fatalf("reason %q", e.Reason)
	}
}

func TestStopWhileWaitingCancelsTheAttempt(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(transientErr())
	h.expect(auditlog.KindRecovering)
	if err := h.sup.Stop(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	h.expect(auditlog.KindStopped)
	h.advance(time.Hour)
	h.noRun()
	if st := h.states.last("p1"); st.Status != StatusStopped || !st.NextAttemptAt.IsZero() {
		t.Fatalf("persisted %+v, want stopped without a next attempt", st)
	}
}

// TestStopRacingALaunchedRestart: the scheduler launched the restart, but
// the supervisor handles a stop before it hears of it. The stop wins: the
// pipeline is stopped, the launched run is stopped (or never built), and
// no restart is announced.
func TestStopRacingALaunchedRestart(t *testing.T) {
	var restarts *RestartScheduler
	var hold atomic.Bool
	release := make(chan struct{})
	h := newHarnessWith(t, defaultPolicy(), State{Status: StatusRunning}, func(c *Config) {
		restarts = NewRestartScheduler(c.Clock) // never Run: it launches only through Help
		c.Restarts = restarts
		inner := c.Observer
		c.Observer = ObserverFunc(func(e auditlog.Event) {
			inner.PipelineEvent(e)
			if e.Kind == auditlog.KindRecovering && hold.Load() {
				<-release // the supervisor goroutine waits here
			}
		})
	})
	h.expect(auditlog.KindRunning)
	hold.Store(true)
	h.nextRun().fail(transientErr())
	h.expect(auditlog.KindRecovering)
	stopped := make(chan error, 1)
	go func() { stopped <- h.sup.Stop(context.Background(), false) }()
	waitInbox(t, h.sup, 1) // the stop is queued first
	h.clock.Advance(time.Second)
	restarts.Help() // launches the run, which reports "restarted" behind the stop
	waitInbox(t, h.sup, 2)
	close(release)

	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("stop did not return")
	}
	h.expect(auditlog.KindStopping)
	h.expect(auditlog.KindStopped)
	select {
	case r := <-h.runs:
		select {
		case <-r.stopped:
		default:
			t.Fatal("the launched run was built and left running")
		}
	default: // stopped before it was built
	}
	h.advance(time.Hour)
	h.noRun()
	select {
	case e := <-h.events:
		t.Fatalf("unexpected event after the stop: %s", e.Kind)
	default:
	}
	if st := h.state(); st.Status != StatusStopped || st.Probation {
		t.Fatalf("state %+v, want stopped", st)
	}
}

// waitInbox waits until n messages are queued for the supervisor.
func waitInbox(t *testing.T, s *Supervisor, n int) {
	t.Helper()
	clocktest.Eventually(t, func() bool { return len(s.inbox) >= n }, func() string {
		return fmt.Sprintf("%d messages queued, want %d", len(s.inbox), n)
	})
}

func TestGracefulStopDrainsTheRun(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	run.waitRunning(t)
	if err := h.sup.Stop(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	select {
	case <-run.stopped:
	default:
		t.Fatal("Stop returned but the run was never asked to stop")
	}
	h.expect(auditlog.KindStopping)
	h.expect(auditlog.KindStopped)
	if st := h.state(); st.Status != StatusStopped {
		t.Fatalf("status %s", st.Status)
	}
}

func TestForceStopDegrades(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun()
	if err := h.sup.Stop(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if e := h.expect(auditlog.KindDegraded); e.Reason != string(ReasonForceStop) {
		t.Fatalf("reason %q", e.Reason)
	}
	// The run was cancelled, not drained, and its error is not a fault.
	h.syncSup()
	if st := h.state(); st.Status != StatusDegraded || st.LastError != nil {
		t.Fatalf("state %+v, want degraded by force stop without a fault", st)
	}
}

func TestStartResumesDegradedAndResetsFailCount(t *testing.T) {
	p := defaultPolicy()
	p.MaxRetries = 1
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	run.fail(transientErr())
	h.expect(auditlog.KindRecovering)
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	h.nextRun().fail(transientErr())
	h.expect(auditlog.KindDegraded)

	if err := h.sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.expect(auditlog.KindRunning)
	h.nextRun()
	if st := h.state(); st.Status != StatusRunning || st.FailCount != 0 || st.DegradedReason != "" {
		t.Fatalf("state after start %+v", st)
	}
}

func TestInvalidTransitionsReturnTypedErrors(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun()
	err := h.sup.Start(context.Background())
	var te *TransitionError
	if !errors.As(err, &te) || te.From != StatusRunning || !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("start of a running pipeline: %v, want a TransitionError from running", err)
	}
	if err := h.sup.Stop(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if err := h.sup.Stop(context.Background(), false); !errors.As(err, &te) || te.From != StatusStopped {
		t.Fatalf("stop of a stopped pipeline: %v", err)
	}
}

func TestShutdownIsNotAFault(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	// A run the shutdown finds still being built is discarded, not
	// stopped: this test is about one that runs.
	run.waitRunning(t)
	h.cancel()
	<-h.sup.Done()
	select {
	case <-run.stopped:
	default:
		t.Fatal("shutdown did not stop the run gracefully")
	}
	st := h.states.last("p1")
	if st.Status != StatusStopped || st.StopReason != StopReasonShutdown || st.ResumeStatus != StatusRunning || st.LastError != nil {
		t.Fatalf("persisted %+v after shutdown, want stopped for shutdown, to resume running, no fault", st)
	}
	if e := h.next(); e.Kind != auditlog.KindStopping || e.StatusBefore != StatusRunning || e.StatusAfter != StatusStopped || e.Reason != "shutdown" {
		t.Fatalf("first shutdown event %s %s -> %s reason %q, want stopping running -> stopped, shutdown", e.Kind, e.StatusBefore, e.StatusAfter, e.Reason)
	}
	if e := h.next(); e.Kind != auditlog.KindStopped || e.StatusBefore != StatusStopped || e.Reason != "shutdown" {
		t.Fatalf("second shutdown event %s %s -> %s reason %q, want stopped, shutdown", e.Kind, e.StatusBefore, e.StatusAfter, e.Reason)
	}

	// The next process takes it up again and says the last one stopped cleanly.
	next := newResumedHarness(t, defaultPolicy(), st)
	e := next.next()
	if e.Kind != auditlog.KindResumed || e.StatusBefore != StatusStopped || e.StatusAfter != StatusRunning || !strings.Contains(e.Message, "stopped cleanly") {
		t.Fatalf("after a clean shutdown: %s %s -> %s %q, want resumed stopped -> running, stopped cleanly", e.Kind, e.StatusBefore, e.StatusAfter, e.Message)
	}
	next.nextRun()
	if st := next.state(); st.Status != StatusRunning || st.StopReason != "" {
		t.Fatalf("resumed state %+v, want running without a stop reason", st)
	}
}

// A recovering pipeline shut down keeps its fail count and next attempt.
func TestShutdownWhileRecoveringResumesRecovering(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(transientErr())
	rec := h.expect(auditlog.KindRecovering)
	h.cancel()
	<-h.sup.Done()
	st := h.states.last("p1")
	if st.Status != StatusStopped || st.ResumeStatus != StatusRecovering || st.FailCount != 1 || !st.NextAttemptAt.Equal(rec.NextAttemptAt) {
		t.Fatalf("persisted %+v, want stopped for shutdown, resume recovering, fail count 1, next attempt %s", st, rec.NextAttemptAt)
	}
	if e := h.next(); e.Kind != auditlog.KindStopped || e.StatusBefore != StatusRecovering || e.Reason != "shutdown" {
		t.Fatalf("shutdown of a waiting pipeline: %s %s -> %s, want stopped from recovering", e.Kind, e.StatusBefore, e.StatusAfter)
	}
	next := newResumedHarness(t, defaultPolicy(), st)
	if e := next.next(); e.Kind != auditlog.KindResumed || e.StatusBefore != StatusStopped || e.StatusAfter != StatusRecovering || e.Attempt != 1 {
		t.Fatalf("resumed %s %s -> %s attempt %d, want resumed stopped -> recovering, attempt 1", e.Kind, e.StatusBefore, e.StatusAfter, e.Attempt)
	}
	next.advance(time.Second)
	next.expect(auditlog.KindRestarted)
	next.nextRun()
}

// A saved next attempt further away than the policy allows (a clock that
// ran fast when it was saved) is cut to the policy's delay.
func TestResumeCapsANextAttemptTooFarAhead(t *testing.T) {
	now := clocktest.New().Now()
	persisted := State{Status: StatusRecovering, FailCount: 2, NextAttemptAt: now.AddDate(1, 0, 0),
		Episode: &Episode{StartedAt: now.Add(-time.Minute)}, UpdatedAt: now}
	h := newResumedHarness(t, defaultPolicy(), persisted)
	e := h.expect(auditlog.KindResumed)
	if e.Delay > defaultPolicy().MaxDelay || !strings.Contains(e.Message, "further away than its policy allows") {
		t.Fatalf("resumed with delay %s (%q), want at most max-delay %s and a message saying it was capped", e.Delay, e.Message, defaultPolicy().MaxDelay)
	}
	h.advance(defaultPolicy().MaxDelay)
	h.expect(auditlog.KindRestarted)
	h.nextRun()
}

func TestResumeRecoveringWaitsForPersistedAttemptTime(t *testing.T) {
	clockStart := clocktest.New().Now()
	// Attempt 3 of the default policy waits 4s; the process died 1s into it.
	persisted := State{
		Status:        StatusRecovering,
		FailCount:     3,
		NextAttemptAt: clockStart.Add(3 * time.Second),
		Episode:       &Episode{StartedAt: clockStart.Add(-time.Minute)},
	}
	h := newResumedHarness(t, defaultPolicy(), persisted)
	if e := h.expect(auditlog.KindResumed); e.Delay != 3*time.Second || e.Attempt != 3 || !e.NextAttemptAt.Equal(persisted.NextAttemptAt) {
		t.Fatalf("resumed %+v, want the next attempt at its persisted time, in 3s", e)
	}
	h.advance(2 * time.Second)
	h.noRun()
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	h.nextRun().fail(transientErr())
	// The episode continues: the fail count goes on from the persisted 3.
	if e := h.expect(auditlog.KindRecovering); e.Attempt != 4 || e.Delay != 8*time.Second {
		t.Fatalf("after resume: attempt %d delay %s, want 4 and 8s", e.Attempt, e.Delay)
	}
}

func TestResumeOverdueAttemptRestartsAtOnce(t *testing.T) {
	persisted := State{Status: StatusRecovering, FailCount: 1, NextAttemptAt: clocktest.New().Now().Add(-time.Hour),
		Episode: &Episode{StartedAt: clocktest.New().Now().Add(-2 * time.Hour)}}
	h := newResumedHarness(t, defaultPolicy(), persisted)
	h.expect(auditlog.KindResumed)
	h.expect(auditlog.KindRestarted)
	h.nextRun()
}

func TestDegradedAndStoppedStayAfterRestart(t *testing.T) {
	for _, status := range []Status{StatusDegraded, StatusStopped} {
		t.Run(status.String(), func(t *testing.T) {
			h := newResumedHarness(t, defaultPolicy(), State{Status: status})
			h.advance(time.Hour)
			h.noRun()
			if st := h.state(); st.Status != status {
				t.Fatalf("status %s, want %s", st.Status, status)
			}
		})
	}
}

func TestFactoryErrorIsAFault(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusStopped})
	h.factory = func(RunHooks) (Run, error) {
		return nil, &stageErr{kind: "destination", id: "out", err: cerrors.Fatal(errors.New("plugin not found"))}
	}
	if err := h.sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.expect(auditlog.KindRunning)
	if e := h.expect(auditlog.KindDegraded); !e.HasError() || e.Component != "out" || e.ErrorClass != "fatal" {
		t.Fatalf("degraded %+v", e)
	}
}

// A pipeline persisted as running was running when the process died: it
// is resumed from running and the event says the process had not stopped
// cleanly. A new one starts from stopped.
func TestStartupSaysWhereAPipelineComesFrom(t *testing.T) {
	persisted := newResumedHarness(t, defaultPolicy(), State{Status: StatusRunning, UpdatedAt: time.Unix(1_700_000_000, 0)})
	if e := persisted.next(); e.Kind != auditlog.KindResumed || e.StatusBefore != StatusRunning || e.StatusAfter != StatusRunning || !strings.Contains(e.Message, "not stopped cleanly") {
		t.Fatalf("first event of a persisted running pipeline: %s %s -> %s %q; want resumed running -> running, not stopped cleanly", e.Kind, e.StatusBefore, e.StatusAfter, e.Message)
	}
	persisted.nextRun()

	fresh := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	if e := fresh.next(); e.Kind != auditlog.KindStarting || e.StatusBefore != StatusStopped || e.StatusAfter != StatusRunning {
		t.Fatalf("first event of a new pipeline: %s %s -> %s; want starting stopped -> running", e.Kind, e.StatusBefore, e.StatusAfter)
	}
	if e := fresh.next(); e.Kind != auditlog.KindRunning || e.StatusBefore != StatusRunning {
		t.Fatalf("second event of a new pipeline: %s from %s; want running from running", e.Kind, e.StatusBefore)
	}
	fresh.nextRun()

	// A new pipeline its file keeps stopped is remembered, without events.
	stopped := newHarness(t, defaultPolicy(), State{Status: StatusStopped})
	stopped.syncSup()
	if st := stopped.states.last("p1"); st.Status != StatusStopped {
		t.Fatalf("new stopped pipeline persisted %+v, want stopped", st)
	}
}

// A huge error message is kept at a bounded size in the state and events.
func TestHugeErrorMessageIsBounded(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(cerrors.Transient(errors.New(strings.Repeat("x", 1<<20))))
	e := h.expect(auditlog.KindRecovering)
	if n := len(e.ErrorMessage); n > maxErrorMessage || !strings.HasSuffix(e.ErrorMessage, "[...]") {
		t.Fatalf("error message of %d bytes, want at most %d and marked as cut", n, maxErrorMessage)
	}
	if st := h.states.last("p1"); len(st.LastError.Message) > maxErrorMessage {
		t.Fatalf("persisted last error of %d bytes", len(st.LastError.Message))
	}
}

// discardRun records whether it was discarded instead of run.
type discardRun struct {
	fakeRun
	discarded chan struct{}
}

func (r *discardRun) Discard() { close(r.discarded) }

// A run built after a stop was requested is not run but discarded, so that
// it gives back what building it took.
func TestRunStoppedWhileBuildingIsDiscarded(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusStopped})
	building, proceed := make(chan struct{}), make(chan struct{})
	run := &discardRun{fakeRun: fakeRun{end: make(chan error, 1), stopped: make(chan struct{})}, discarded: make(chan struct{})}
	h.factory = func(RunHooks) (Run, error) {
		close(building)
		<-proceed
		return run, nil
	}
	if err := h.sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-building
	h.expect(auditlog.KindRunning)
	stopped := make(chan error, 1)
	go func() { stopped <- h.sup.Stop(context.Background(), false) }()
	h.expect(auditlog.KindStopping) // the run is asked to stop before it is built
	close(proceed)
	select {
	case <-run.discarded:
	case <-time.After(guard):
		t.Fatal("the run built after the stop was not discarded")
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// A record that fails the same way on quarantine-after runs in a row is
// handed to the next run to dead-letter; any other failure in between
// starts the count over.
func TestPoisonRecordIsQuarantinedAfterRunsInARow(t *testing.T) {
	p := mustPolicy(config.ErrorRecoveryOverride{QuarantineAfter: ptr(3), MinDelay: ptr(time.Second), BackoffFactor: ptr(1.0)})
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	onRecord := func(pos string, i int) error {
		return &stageErr{kind: "destination", id: "pg", err: cerrors.ForRecord([]byte(pos),
			cerrors.WithCode(fmt.Errorf("lock timeout (try %d)", i), 503))}
	}
	fail := func(err error) *fakeRun {
		t.Helper()
		run.fail(err)
		h.expect(auditlog.KindRecovering)
		h.advance(time.Second)
		h.expect(auditlog.KindRestarted)
		return h.nextRun()
	}
	run = fail(onRecord("42", 1))
	run = fail(onRecord("42", 2))
	if run.hooks.Quarantine != nil {
		t.Fatal("quarantined after 2 runs; quarantine-after is 3")
	}
	// A failure elsewhere starts the count over.
	run = fail(transientErr())
	run = fail(onRecord("42", 3))
	run = fail(onRecord("42", 4))
	if run.hooks.Quarantine != nil {
		t.Fatal("the count did not start over after a failure that named no record")
	}
	run.fail(onRecord("42", 5))
	fault := h.expect(auditlog.KindFault)
	if !strings.Contains(fault.Message, "record quarantined: 3 runs in a row") {
		t.Fatalf("fault %q does not say the record was quarantined", fault.Message)
	}
	h.expect(auditlog.KindRecovering)
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	run = h.nextRun()
	q := run.hooks.Quarantine
	if q == nil || string(q.Position) != "42" || q.Runs != 3 || q.Error.Component != "pg" || !strings.Contains(q.Error.Message, "lock timeout") {
		t.Fatalf("the run after the third failure got quarantine %+v, want record 42", q)
	}
	if st := h.states.last("p1"); st.Poison == nil || !st.Poison.Quarantined {
		t.Fatalf("persisted %+v, want the poison record quarantined (it must survive a crash)", st.Poison)
	}
	// Once records go through again, the poison is forgotten.
	run.ack()
	h.expect(auditlog.KindRecovered)
	if st := h.state(); st.Poison != nil {
		t.Fatalf("poison %+v kept after recovery", st.Poison)
	}
}

// A pipeline whose configuration changed is retired: its run drains as in
// a shutdown, and the events say why and who.
func TestRetireDrainsAndSaysWhy(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	run.waitRunning(t)
	why := Retirement{Reason: StopReasonUpdated, Actor: ActorConfig, Stopping: "draining for the update", Stopped: "stopped for the update"}
	if err := h.sup.Retire(context.Background(), why); err != nil {
		t.Fatal(err)
	}
	<-h.sup.Done()
	select {
	case <-run.stopped:
	default:
		t.Fatal("retire did not stop the run gracefully")
	}
	if st := h.states.last("p1"); st.Status != StatusStopped || st.StopReason != StopReasonUpdated {
		t.Fatalf("persisted %+v, want stopped for the update", st)
	}
	for _, want := range []struct {
		kind auditlog.Kind
		msg  string
	}{{auditlog.KindStopping, why.Stopping}, {auditlog.KindStopped, why.Stopped}} {
		if e := h.next(); e.Kind != want.kind || e.Actor != ActorConfig || e.Reason != "updated" || e.Message != want.msg {
			t.Fatalf("event %s by %s reason %q %q, want %s by config, updated, %q", e.Kind, e.Actor, e.Reason, e.Message, want.kind, want.msg)
		}
	}
	// Retiring an ended supervisor is not an error.
	if err := h.sup.Retire(context.Background(), why); err != nil {
		t.Fatalf("retire after the end: %v", err)
	}
}

// A process that ends between retiring a pipeline for an update and
// recording the new one leaves the old state: found with the same
// configuration, the pipeline takes up the status it had.
func TestRetiredStateIsTakenUpAgain(t *testing.T) {
	for _, reason := range []StopReason{StopReasonUpdated, StopReasonDeleted} {
		h := newResumedHarness(t, defaultPolicy(), State{Status: StatusStopped, StopReason: reason, ResumeStatus: StatusRunning})
		if e := h.next(); e.Kind != auditlog.KindResumed || e.StatusAfter != StatusRunning || !strings.Contains(e.Message, string(reason)) {
			t.Fatalf("%s: first event %s -> %s %q, want resumed running naming the %s", reason, e.Kind, e.StatusAfter, e.Message, reason)
		}
		h.nextRun()
	}
}

// A rule applied to a degraded pipeline restarts it on the rule's
// schedule when its last error matches; other pipelines are left alone.
func TestApplyRuleRestartsADegradedPipeline(t *testing.T) {
	ctx := context.Background()
	managed := NewManagedRules()
	resolved, err := config.ErrorRecoveryOverride{}.Resolve(config.Default().Pipelines.ErrorRecovery)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPolicies().WithManaged(managed).From(resolved)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	h.nextRun().fail(fatalErr())
	h.expect(auditlog.KindDegraded)

	if o, err := h.sup.ApplyRule(ctx, "missing-table", "api"); err != nil || o.Restarted {
		t.Fatalf("a rule that is not loaded: %+v %v", o, err)
	}
	managed.Set([]config.Rule{
		{Name: "other", Action: config.ActionRetry, Match: config.RuleMatch{Message: "timeout"}},
		{Name: "missing-table", Action: config.ActionRetry, Match: config.RuleMatch{Message: "does not exist", Class: "fatal"},
			Policy: config.ErrorRecoveryOverride{Strategy: ptr("fixed"), MinDelay: ptr(30 * time.Second)}},
	})
	if o, _ := h.sup.ApplyRule(ctx, "other", "api"); o.Restarted || !strings.Contains(o.Why, "does not match") {
		t.Fatalf("a rule its error does not match: %+v", o)
	}
	o, err := h.sup.ApplyRule(ctx, "missing-table", "api")
	if err != nil || !o.Restarted {
		t.Fatalf("apply: %+v %v", o, err)
	}
	e := h.expect(auditlog.KindRecovering)
	if e.Actor != "api" || e.Delay != 30*time.Second || e.StatusBefore != StatusDegraded || !strings.Contains(e.Message, `rule "missing-table" applied by api`) {
		t.Fatalf("event %+v", e)
	}
	if st := h.state(); st.Status != StatusRecovering || st.DegradedReason != "" || st.Episode.RuleCounts["missing-table"] != 1 {
		t.Fatalf("state %+v", st)
	}
	h.noRun()
	h.advance(30 * time.Second)
	h.nextRun()
	if o, _ := h.sup.ApplyRule(ctx, "missing-table", "api"); o.Restarted || !strings.Contains(o.Why, "not degraded") {
		t.Fatalf("applied to a pipeline that is not degraded: %+v", o)
	}

	// A force stop is a person's decision: a rule does not undo it.
	f := newHarness(t, p, State{Status: StatusDegraded, DegradedReason: ReasonForceStop,
		LastError: &ErrorInfo{Code: 400, Class: "fatal", Message: "table orders does not exist"}})
	if o, _ := f.sup.ApplyRule(ctx, "missing-table", "api"); o.Restarted || !strings.Contains(o.Why, "force-stopped") {
		t.Fatalf("applied to a force-stopped pipeline: %+v", o)
	}
}

// A rule that asks for no delay gets the floor from Decide, and the
// supervisor waits it on the (fake) clock before restarting.
func TestZeroDelayRuleRestartsAfterTheFloor(t *testing.T) {
	zero := time.Duration(0)
	fixed := config.StrategyFixed
	p := mustPolicy(config.ErrorRecoveryOverride{Rules: []config.Rule{{Name: "hot", Action: config.ActionRetry,
		Match:  config.RuleMatch{Codes: []config.CodeRange{{From: 100, To: 599}}},
		Policy: config.ErrorRecoveryOverride{Strategy: &fixed, MinDelay: &zero}}}})
	d := decide(p, History{}, Fault{Pipeline: "p1", Class: cerrors.ClassTransient, Code: 503}, time.Now(), 0)
	if d.Rule == nil || d.Rule.Name != "hot" || d.Action != ActionRestart || d.Delay != config.RestartDelayFloor {
		t.Fatalf("decision %+v, want a restart by rule hot after the floor %v", d, config.RestartDelayFloor)
	}

	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	for attempt := 1; attempt <= 3; attempt++ {
		run.fail(transientErr())
		if rec := h.expect(auditlog.KindRecovering); rec.Delay != config.RestartDelayFloor {
			t.Fatalf("attempt %d: recovering after %v, want the floor %v", attempt, rec.Delay, config.RestartDelayFloor)
		}
		h.advance(config.RestartDelayFloor - time.Millisecond)
		h.noRun()
		h.advance(time.Millisecond)
		h.expect(auditlog.KindRestarted)
		run = h.nextRun()
	}
}

// An idle source that reconnected sends no record: after its probation
// the pipeline is running again, while its fail count resets only after
// the healthy window, and a failure before then continues the backoff.
func TestIdleRestartIsRunningAfterProbation(t *testing.T) {
	p := mustPolicy(config.ErrorRecoveryOverride{Probation: ptr(30 * time.Second), MaxRetriesWindow: ptr(5 * time.Minute)})
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()

	run.fail(transientErr())
	h.expect(auditlog.KindRecovering)
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	run = h.nextRun()
	// Connecting takes 5s: the probation counts from when it is open.
	h.advance(5 * time.Second)
	run.open()
	h.advance(30*time.Second - time.Millisecond)
	if st := h.state(); st.Status != StatusRecovering || !st.Probation {
		t.Fatalf("before the probation passed: %+v, want recovering on probation", st)
	}
	h.advance(time.Millisecond)
	e := h.expect(auditlog.KindRecovered)
	if e.Reason != string(RecoveredByProbation) || e.StatusBefore != StatusRecovering || e.StatusAfter != StatusRunning || e.Attempt != 1 ||
		!strings.Contains(e.Message, "30s probation") {
		t.Fatalf("recovered %+v, want by probation from recovering to running, fail count 1", e)
	}
	st := h.states.last("p1")
	if st.Status != StatusRunning || st.Probation || st.FailCount != 1 || st.Episode == nil || !st.Episode.EndedAt.IsZero() {
		t.Fatalf("persisted %+v, want running, fail count 1 kept, episode open", st)
	}

	// Failing again before the healthy window continues the backoff.
	run.fail(transientErr())
	if rec := h.expect(auditlog.KindRecovering); rec.Attempt != 2 || rec.Delay != 2*time.Second || rec.StatusBefore != StatusRunning {
		t.Fatalf("a failure after the probation: %+v, want attempt 2 after 2s", rec)
	}
	h.advance(2 * time.Second)
	h.expect(auditlog.KindRestarted)
	run = h.nextRun()
	run.open()
	h.advance(30 * time.Second)
	if e := h.expect(auditlog.KindRecovered); e.Reason != string(RecoveredByProbation) || e.Attempt != 2 {
		t.Fatalf("second probation: %+v", e)
	}

	// Up for the healthy window from the restart: fail count reset.
	h.advance(5*time.Minute - 30*time.Second - time.Millisecond)
	if st := h.state(); st.FailCount != 2 {
		t.Fatalf("before the healthy window: fail count %d, want 2", st.FailCount)
	}
	h.advance(time.Millisecond)
	e = h.expect(auditlog.KindRecovered)
	if e.Reason != string(RecoveredByWindow) || e.StatusBefore != StatusRunning || e.StatusAfter != StatusRunning || e.Attempt != 2 {
		t.Fatalf("recovered %+v, want by window from running, after 2 attempts", e)
	}
	st = h.states.last("p1")
	if st.Status != StatusRunning || st.FailCount != 0 || st.Episode == nil || st.Episode.Outcome != "recovered (window)" {
		t.Fatalf("persisted %+v, want running with fail count 0 and the episode closed", st)
	}
	if h.clock.Pending() != 0 {
		t.Fatalf("%d timers still pending after the healthy window", h.clock.Pending())
	}
}

// A first record after the probation ends the episode at once, as it
// does during the probation.
func TestRecordAfterProbationResetsFailCount(t *testing.T) {
	p := mustPolicy(config.ErrorRecoveryOverride{Probation: ptr(10 * time.Second)})
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	run.fail(transientErr())
	h.expect(auditlog.KindRecovering)
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	run = h.nextRun()
	run.open()
	h.advance(10 * time.Second)
	h.expect(auditlog.KindRecovered)
	run.ack()
	if e := h.expect(auditlog.KindRecovered); e.Reason != string(RecoveredByRecord) || e.StatusBefore != StatusRunning {
		t.Fatalf("recovered %+v, want by record", e)
	}
	if st := h.state(); st.FailCount != 0 || st.Episode.Outcome != "recovered (record)" {
		t.Fatalf("%+v, want fail count 0", st)
	}
	if h.clock.Pending() != 0 {
		t.Fatalf("%d timers still pending", h.clock.Pending())
	}
}

// A pipeline that passes its probation and fails again, over and over,
// still runs out of retries: the probation does not reset the count.
func TestFailingAfterEachProbationStillEscalates(t *testing.T) {
	p := mustPolicy(config.ErrorRecoveryOverride{Probation: ptr(10 * time.Second), MaxRetries: ptr(2)})
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	for attempt := 1; attempt <= 2; attempt++ {
		run.fail(transientErr())
		rec := h.expect(auditlog.KindRecovering)
		h.advance(rec.Delay)
		h.expect(auditlog.KindRestarted)
		run = h.nextRun()
		run.open()
		h.advance(10 * time.Second)
		if e := h.expect(auditlog.KindRecovered); e.Reason != string(RecoveredByProbation) {
			t.Fatalf("attempt %d: %+v", attempt, e)
		}
	}
	run.fail(transientErr())
	h.expect(auditlog.KindFault)
	if e := h.expect(auditlog.KindDegraded); e.Reason != string(ReasonRetriesExhausted) || e.Attempt != 3 {
		t.Fatalf("degraded %+v, want retries exhausted at attempt 3", e)
	}
}

// A probation as long as the healthy window or longer is the healthy
// window: one step, as before there was a probation.
func TestProbationAtTheHealthyWindowIsOneStep(t *testing.T) {
	p := mustPolicy(config.ErrorRecoveryOverride{Probation: ptr(time.Hour), MaxRetriesWindow: ptr(time.Minute)})
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	run.fail(transientErr())
	h.expect(auditlog.KindRecovering)
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	h.nextRun().open()
	h.advance(time.Minute)
	if e := h.expect(auditlog.KindRecovered); e.Reason != string(RecoveredByWindow) || e.StatusBefore != StatusRecovering {
		t.Fatalf("recovered %+v, want by window from recovering", e)
	}
	if st := h.state(); st.FailCount != 0 || st.Status != StatusRunning {
		t.Fatalf("%+v, want running with fail count 0", st)
	}
}

// A run still connecting has proved nothing: no probation passes before
// its connectors are open.
func TestProbationCountsFromOpenConnectors(t *testing.T) {
	p := mustPolicy(config.ErrorRecoveryOverride{Probation: ptr(10 * time.Second)})
	h := newHarness(t, p, State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	run.fail(transientErr())
	h.expect(auditlog.KindRecovering)
	h.advance(time.Second)
	h.expect(auditlog.KindRestarted)
	run = h.nextRun()
	h.advance(time.Minute)
	if st := h.state(); st.Status != StatusRecovering || !st.Probation {
		t.Fatalf("a minute into a run that never opened: %+v, want recovering on probation", st)
	}
	run.open()
	h.advance(10 * time.Second)
	if e := h.expect(auditlog.KindRecovered); e.Reason != string(RecoveredByProbation) {
		t.Fatalf("recovered %+v, want by probation", e)
	}
}

// windowErr is what pkg/pipeline returns when the dead-letter queue's
// window overflows.
type windowErr struct{ err error }

func (e *windowErr) Error() string {
	return "dead-letter queue window overflowed: 2 nacks in the last 10 records; last nacked record: " + e.err.Error()
}
func (e *windowErr) Unwrap() error             { return e.err }
func (e *windowErr) DeadLetterWindowOverflow() {}

// A pipeline the dead-letter queue's window stopped is degraded for that
// reason, its last error saying so with the record's error as detail.
func TestDeadLetterWindowOverflowSaysSo(t *testing.T) {
	h := newHarness(t, defaultPolicy(), State{Status: StatusRunning})
	h.expect(auditlog.KindRunning)
	run := h.nextRun()
	rejected := cerrors.WithCode(errors.New("row rejected"), 400)
	run.fail(&stageErr{kind: "destination", id: "dst", err: &windowErr{err: rejected}})
	fault := h.expect(auditlog.KindFault)
	if !fault.HasError() || !strings.HasPrefix(fault.ErrorMessage, "dead-letter queue window overflowed: 2 nacks in the last 10") ||
		!strings.HasSuffix(fault.ErrorMessage, "row rejected") || fault.ErrorCode != 400 {
		t.Fatalf("fault error %+v, want the window first and the record's error as detail", fault)
	}
	degraded := h.expect(auditlog.KindDegraded)
	if degraded.Reason != string(ReasonDeadLetterWindow) || !strings.Contains(degraded.Message, "dead-letter queue window overflowed") {
		t.Fatalf("degraded %+v, want reason %q", degraded, ReasonDeadLetterWindow)
	}
	if st := h.states.last("p1"); st.DegradedReason != ReasonDeadLetterWindow || !strings.HasPrefix(st.LastError.Message, "dead-letter queue window overflowed") {
		t.Fatalf("persisted %+v, want the window as the reason and in the last error", st)
	}
}

// The crash-loop guard's mark of a run that moves no record (an idle
// source) is cleared once the run lived crashLoopProof, so a process killed
// now and then for other reasons never holds an idle pipeline.
func TestCrashLoopGuardProvesAnIdleRunAfterAWhile(t *testing.T) {
	// The last process died during the run once before: the resume counts
	// a second death in a row, below the limit of 3.
	h := newHarnessWith(t, defaultPolicy(), State{Status: StatusRunning, Run: true, Crashes: 1},
		func(c *Config) { c.Persisted, c.CrashLoopAfter = true, 3 })
	h.expect(auditlog.KindResumed)
	h.nextRun()
	if st := h.state(); !st.Run || st.Crashes != 2 {
		t.Fatalf("state after the resume: Run %v Crashes %d, want the run marked and 2 deaths", st.Run, st.Crashes)
	}
	h.advance(crashLoopProof - time.Second)
	if st := h.state(); !st.Run {
		t.Fatalf("the run was proved before it lived crashLoopProof: Run %v Crashes %d", st.Run, st.Crashes)
	}
	h.advance(time.Second)
	h.syncSup()
	if st := h.state(); st.Run || st.Crashes != 0 {
		t.Fatalf("state after the run lived crashLoopProof: Run %v Crashes %d, want neither", st.Run, st.Crashes)
	}
	if saved := h.states.last("p1"); saved.Run || saved.Crashes != 0 {
		t.Fatalf("persisted state: Run %v Crashes %d, want the mark cleared on disk too", saved.Run, saved.Crashes)
	}
}
