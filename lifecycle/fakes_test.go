package lifecycle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fakeRun is a run the test drives: fail ends it with an error, ack
// reports progress, and it records Stop and force.
type fakeRun struct {
	hooks   RunHooks
	end     chan error
	stopped chan struct{}
	once    sync.Once
	// running is closed when Run is called: the supervisor built the run
	// and runs it (a run stopped before is discarded instead).
	running     chan struct{}
	runningOnce sync.Once
}

// waitRunning waits until the supervisor runs r.
func (r *fakeRun) waitRunning(t *testing.T) {
	t.Helper()
	select {
	case <-r.running:
	case <-time.After(guard):
		t.Fatal("the run was never run")
	}
}

var errForced = errors.New("force-stopped")

func (r *fakeRun) Run(ctx context.Context) error {
	r.runningOnce.Do(func() { close(r.running) })
	select {
	case err := <-r.end:
		return err
	case <-r.stopped:
		return nil
	case <-ctx.Done():
		return errForced
	}
}

func (r *fakeRun) Stop() { r.once.Do(func() { close(r.stopped) }) }

func (r *fakeRun) fail(err error) { r.end <- err }

func (r *fakeRun) ack() { r.hooks.OnAck(1) }

// open says the run's connectors are open, as pkg/pipeline's engine does.
func (r *fakeRun) open() { r.hooks.OnOpen() }

// memStates keeps the last saved state per pipeline.
type memStates struct {
	mu    sync.Mutex
	saved map[string]State
	saves int
}

func (m *memStates) SaveLater(id string, st State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.saved == nil {
		m.saved = map[string]State{}
	}
	m.saved[id] = st.Clone()
	m.saves++
	return nil
}

func (m *memStates) last(id string) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saved[id]
}

// stageErr stands in for pkg/pipeline's StageError.
type stageErr struct {
	kind, id string
	err      error
}

func (e *stageErr) Error() string { return e.kind + " " + e.id + ": " + e.err.Error() }
func (e *stageErr) Unwrap() error { return e.err }
func (e *stageErr) Component() (kind cerrors.ComponentKind, id string) {
	return cerrors.ComponentKind(e.kind), e.id
}

// harness runs one supervisor with fakes.
type harness struct {
	t       *testing.T
	clock   *clocktest.Clock
	states  *memStates
	sup     *Supervisor
	runs    chan *fakeRun
	events  chan auditlog.Event
	factory func(RunHooks) (Run, error)
	cancel  context.CancelFunc
}

func newHarness(t *testing.T, p Policy, initial State) *harness {
	t.Helper()
	return newHarnessWith(t, p, initial, nil)
}

// newResumedHarness runs a supervisor on a state an earlier process
// persisted (Config.Persisted).
func newResumedHarness(t *testing.T, p Policy, persisted State) *harness {
	t.Helper()
	return newHarnessWith(t, p, persisted, func(c *Config) { c.Persisted = true })
}

// newHarnessWith is newHarness with a chance to change the supervisor's
// config before it starts.
func newHarnessWith(t *testing.T, p Policy, initial State, customize func(*Config)) *harness {
	t.Helper()
	bugs, logs := observer.New(zap.ErrorLevel)
	h := &harness{
		t:      t,
		clock:  clocktest.New(),
		states: &memStates{},
		runs:   make(chan *fakeRun, 100),
		events: make(chan auditlog.Event, 1000),
	}
	cfg := Config{
		PipelineID: "p1",
		Policy:     p,
		NewRun: func(hooks RunHooks) (Run, error) {
			if h.factory != nil {
				return h.factory(hooks)
			}
			r := &fakeRun{hooks: hooks, end: make(chan error, 1), stopped: make(chan struct{}), running: make(chan struct{})}
			h.runs <- r
			return r, nil
		},
		States:   h.states,
		Clock:    h.clock,
		Observer: ObserverFunc(func(e auditlog.Event) { h.events <- e }),
		Random:   func() float64 { return 0.5 }, // no jitter offset
		Logger:   zap.New(bugs),
	}
	t.Cleanup(func() {
		// A transition the state machine refused is a bug in the
		// supervisor, whatever the test looked at.
		for _, e := range logs.FilterMessageSnippet("bug:").All() {
			t.Errorf("%s: %v", e.Message, e.ContextMap())
		}
	})
	if customize != nil {
		customize(&cfg)
	}
	sup, err := New(cfg, initial)
	if err != nil {
		t.Fatal(err)
	}
	h.sup = sup
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go sup.Run(ctx)
	t.Cleanup(func() {
		cancel()
		select {
		case <-sup.Done():
		case <-time.After(5 * time.Second):
			t.Error("supervisor did not shut down")
		}
	})
	return h
}

const guard = 5 * time.Second

// nextRun returns the run the supervisor started next.
func (h *harness) nextRun() *fakeRun {
	h.t.Helper()
	select {
	case r := <-h.runs:
		return r
	case <-time.After(guard):
		h.t.Fatal("no run was started")
		return nil
	}
}

// noRun asserts that no run was started so far.
func (h *harness) noRun() {
	h.t.Helper()
	h.syncSup()
	select {
	case <-h.runs:
		h.t.Fatal("a run was started when none should be")
	default:
	}
}

// next returns the next event, whatever its kind.
func (h *harness) next() auditlog.Event {
	h.t.Helper()
	select {
	case e := <-h.events:
		return e
	case <-time.After(guard):
		h.t.Fatal("no event")
		return auditlog.Event{}
	}
}

// expect returns the next event, which must be of kind.
func (h *harness) expect(kind auditlog.Kind) auditlog.Event {
	h.t.Helper()
	for {
		e := h.next()
		if e.Kind == kind {
			return e
		}
		if e.Kind == auditlog.KindStarting || e.Kind == auditlog.KindFault {
			// Announcements that precede the transition event.
			continue
		}
		h.t.Fatalf("got event %s (%s -> %s: %s), want %s", e.Kind, e.StatusBefore, e.StatusAfter, e.Message, kind)
	}
}

func (h *harness) syncSup() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := h.sup.sync(ctx); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) state() State {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	st, err := h.sup.State(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// advance lets the supervisor finish what it is doing (so its timers are
// set) and moves the clock. The restart scheduler arms its timer at the
// due time, so it fires on time whenever its goroutine armed it.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.syncSup()
	h.clock.Advance(d)
}
