package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
)

// slowDrainRun is a run whose graceful stop takes until the test lets it
// end (a destination flushing a large batch).
type slowDrainRun struct {
	stopAsked chan struct{}
	drained   chan struct{}
}

func newSlowDrainRun() *slowDrainRun {
	return &slowDrainRun{stopAsked: make(chan struct{}), drained: make(chan struct{})}
}

func (r *slowDrainRun) Run(ctx context.Context) error {
	select {
	case <-r.drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *slowDrainRun) Stop() { close(r.stopAsked) }

// startedSlowDrain runs a supervisor whose runs are slowDrainRuns, sent to
// runs as they are built, and starts its stopped pipeline: run is the
// first run.
func startedSlowDrain(t *testing.T) (h *harness, runs chan *slowDrainRun, run *slowDrainRun) {
	h, runs = slowDrainHarness(t)
	if err := h.sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.expect(auditlog.KindRunning)
	return h, runs, <-runs
}

func slowDrainHarness(t *testing.T) (*harness, chan *slowDrainRun) {
	runs := make(chan *slowDrainRun, 10)
	h := newHarnessWith(t, defaultPolicy(), State{Status: StatusStopped}, func(c *Config) {
		c.NewRun = func(RunHooks) (Run, error) {
			r := newSlowDrainRun()
			runs <- r
			return r, nil
		}
	})
	return h, runs
}

// While a stopped pipeline's run still drains, the pipeline is stopped
// (its phase stopped/stopping) and a start is refused with
// ErrStillStopping, not taken: two runs of one pipeline would read the
// same records. Once the run has ended, the stop is answered and a start
// runs the pipeline again.
func TestStartWhileTheStoppedRunDrains(t *testing.T) {
	h, runs, run := startedSlowDrain(t)
	ctx := context.Background()
	stopped := make(chan error, 1)
	go func() { stopped <- h.sup.Stop(ctx, false) }()
	waitClosed(t, run.stopAsked, "the run was never asked to stop")
	h.expect(auditlog.KindStopping)
	if st := h.state(); st.Status != StatusStopped {
		t.Fatalf("status %s while the run drains, want stopped", st.Status)
	}
	if err := h.sup.Start(ctx); !errors.Is(err, ErrStillStopping) {
		t.Fatalf("start while the run drains: %v, want ErrStillStopping", err)
	}
	select {
	case err := <-stopped:
		t.Fatalf("the stop was answered (%v) before the run ended", err)
	default:
	}
	close(run.drained)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	h.expect(auditlog.KindStopped)
	if err := h.sup.Start(ctx); err != nil {
		t.Fatalf("start once the run ended: %v", err)
	}
	h.expect(auditlog.KindRunning)
	close((<-runs).drained)
}

// A start sent to a supervisor that retires (its pipeline's file changed,
// the pipeline was deleted, the process shuts down) while its run drains
// is refused, saying so.
func TestStartOfARetiringSupervisorIsRefused(t *testing.T) {
	h, _, run := startedSlowDrain(t)
	ctx := context.Background()
	if err := h.sup.Retire(ctx, Retirement{Reason: StopReasonUpdated, Actor: ActorConfig, Stopping: "updating", Stopped: "updated"}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, run.stopAsked, "the run was never asked to stop")
	h.expect(auditlog.KindStopping)
	if err := h.sup.Start(ctx); !errors.Is(err, ErrSupervisorDone) {
		t.Fatalf("start of a retiring supervisor: %v, want ErrSupervisorDone", err)
	}
	close(run.drained)
	select {
	case <-h.sup.Done():
	case <-time.After(guard):
		t.Fatal("the retired supervisor did not end once its run had")
	}
}

// waitClosed waits until ch is closed, failing the test with what after
// the guard.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatal(what)
	}
}

// stuckRun is a run that never ends, whatever it is asked: a processor in
// an endless loop that ignores its context. release lets its goroutine go
// at the end of the test.
type stuckRun struct {
	running chan struct{}
	release chan struct{}
	ctx     context.Context
}

func (r *stuckRun) Run(ctx context.Context) error {
	r.ctx = ctx
	close(r.running)
	<-r.release
	return nil
}

func (r *stuckRun) Stop() {}

// newStuckHarness runs a stopped pipeline whose runs never end, with a
// StopTimeout of 3s; runs gives each run as it is built.
func newStuckHarness(t *testing.T) (*harness, chan *stuckRun) {
	t.Helper()
	runs := make(chan *stuckRun, 2)
	h := newHarnessWith(t, defaultPolicy(), State{Status: StatusStopped}, func(c *Config) {
		c.StopTimeout = 3 * time.Second
		c.NewRun = func(RunHooks) (Run, error) {
			r := &stuckRun{running: make(chan struct{}), release: make(chan struct{})}
			t.Cleanup(func() { close(r.release) })
			runs <- r
			return r, nil
		}
	})
	return h, runs
}

// A graceful stop of a run that never ends is bounded by StopTimeout: the
// status says stopping meanwhile; at the deadline the run is forced (the
// user's stop becomes a force stop: degraded, saying why), and when the
// forced run still has not ended by the next deadline it is abandoned: the
// stop is answered and the pipeline starts again.
func TestStopOfARunThatNeverEndsIsBounded(t *testing.T) {
	h, runs := newStuckHarness(t)
	ctx := context.Background()
	if err := h.sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.expect(auditlog.KindRunning)
	waitClosed(t, (<-runs).running, "the run never ran")
	stopped := make(chan error, 1)
	go func() { stopped <- h.sup.Stop(ctx, false) }()
	h.expect(auditlog.KindStopping)
	if st := h.state(); st.Status != StatusStopped || !st.Stopping {
		t.Fatalf("while the run drains: status %s, stopping %v; want stopped and stopping", st.Status, st.Stopping)
	}
	h.advance(3 * time.Second)
	e := h.expect(auditlog.KindDegraded)
	if e.Reason != string(ReasonForceStop) || !strings.Contains(e.Message, "did not finish within 3s") {
		t.Fatalf("forced stop event %+v", e)
	}
	if st := h.state(); st.Status != StatusDegraded || !st.Stopping {
		t.Fatalf("forced, the run not ended: status %s, stopping %v; want degraded and stopping", st.Status, st.Stopping)
	}
	select {
	case err := <-stopped:
		t.Fatalf("the stop was answered (%v) before the run ended or was abandoned", err)
	default:
	}
	h.advance(3 * time.Second)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(guard):
		t.Fatal("the stop of a run that never ends was never answered")
	}
	if st := h.state(); st.Status != StatusDegraded || st.Stopping || st.LastError == nil {
		t.Fatalf("after the run was abandoned: %+v", st)
	}
	if err := h.sup.Start(ctx); err != nil {
		t.Fatalf("start after the abandoned run: %v", err)
	}
	h.expect(auditlog.KindRunning)
	waitClosed(t, (<-runs).running, "the new run never ran")
}

// A retirement (an update, a deletion, a shutdown) of a run that never
// ends is bounded the same way: the supervisor ends, so the reconciler and
// the process's shutdown are not kept waiting for ever.
func TestRetirementOfARunThatNeverEndsIsBounded(t *testing.T) {
	h, runs := newStuckHarness(t)
	ctx := context.Background()
	if err := h.sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.expect(auditlog.KindRunning)
	run := <-runs
	waitClosed(t, run.running, "the run never ran")
	if err := h.sup.Retire(ctx, Retirement{Reason: StopReasonUpdated, Actor: ActorConfig, Stopping: "updating", Stopped: "updated"}); err != nil {
		t.Fatal(err)
	}
	h.expect(auditlog.KindStopping)
	h.advance(3 * time.Second)
	// Forced: its context is cancelled (and the next deadline set).
	waitClosed(t, run.ctx.Done(), "the overdue run was not forced")
	h.advance(3 * time.Second)
	if e := h.expect(auditlog.KindStopped); e.Reason != string(StopReasonUpdated) {
		t.Fatalf("stopped event %+v", e)
	}
	waitClosed(t, h.sup.Done(), "the supervisor of an abandoned run never ended")
}
