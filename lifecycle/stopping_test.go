package lifecycle

import (
	"context"
	"errors"
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
