package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
)

// Run is one run of a pipeline: fresh connectors, from open to teardown.
type Run interface {
	// Run moves records until Stop or a failure. It returns nil after a
	// graceful stop and the error that ended it otherwise. Cancelling ctx
	// is a force stop.
	Run(ctx context.Context) error
	// Stop asks for a graceful stop and returns at once.
	Stop()
}

// Discarder is an optional ability of a Run: Discard is called, instead of
// Run, for a run that was built but stopped before it ran, so it can give
// back what building it took.
type Discarder interface {
	Discard()
}

// RunHooks let a run tell its supervisor about progress.
type RunHooks struct {
	// OnAck is called after records were acknowledged end to end. It is
	// cheap: only the first call of a run sends anything.
	OnAck func(records int)
	// OnOpen is called once the run's connectors are open (or failed to
	// open): a restarted run's probation counts from then. It only notes
	// the time; it never waits for the supervisor.
	OnOpen func()
	// Quarantine is the record this run sends to the dead-letter queue
	// instead of processing it (nil: none): runs failed on it the same way
	// quarantine-after times in a row.
	Quarantine *PoisonRecord
}

// RunFactory builds a new run. It is called for every start and restart,
// so every attempt gets fresh connectors. An error is treated like a run
// that failed at once.
type RunFactory func(hooks RunHooks) (Run, error)

// componentError is how a run error says which connector or processor it
// came from (pkg/pipeline's StageError implements it).
type componentError interface {
	error
	Component() (kind cerrors.ComponentKind, id string)
	Unwrap() error
}

// activeRun is one run, from launch to end. Its goroutine builds the Run
// (NewRun) and runs it; the supervisor may ask it to stop before it is
// built, so the built Run is handed over under mu.
type activeRun struct {
	id     int
	ctx    context.Context
	cancel context.CancelFunc
	hooks  RunHooks
	acked  atomic.Bool
	// openedAt is when the run's connectors were open (nil: not yet).
	// The supervisor reads it when the probation's timer fires rather
	// than being sent a message: in a fault storm every restarted run
	// would otherwise wake its supervisor once more, between its restart
	// and its first record.
	openedAt atomic.Pointer[time.Time]

	// ending is how the supervisor is ending the run, if it is; owned by
	// the supervisor goroutine.
	ending runEnding

	mu            sync.Mutex
	built         Run
	stopRequested bool
}

// runEnding is how the supervisor ends a run: not at all (it runs until
// it ends by itself), by a graceful stop (its records drain), or by
// cancelling its context (forced; a graceful stop can be cut short so).
type runEnding int

const (
	runLive runEnding = iota
	runDraining
	runForced
)

// endBy notes that the supervisor ends the run by e: forced supersedes a
// graceful stop, never the other way around.
func (a *activeRun) endBy(e runEnding) {
	a.ending = max(a.ending, e)
}

// stop asks the run to stop gracefully, now if it is built, or as soon as
// it is.
func (a *activeRun) stop() {
	a.mu.Lock()
	a.stopRequested = true
	r := a.built
	a.mu.Unlock()
	if r != nil {
		r.Stop()
	}
}

func (a *activeRun) stopRequestedNow() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopRequested
}

// setBuilt hands over the built run; it reports false when a stop came
// first, and the run should not start at all.
func (a *activeRun) setBuilt(r Run) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.built = r
	return !a.stopRequested
}

func (s *Supervisor) newActiveRun() *activeRun {
	s.runSeq++
	ar := &activeRun{id: s.runSeq}
	ar.ctx, ar.cancel = context.WithCancel(context.Background())
	var quarantine *PoisonRecord
	if p := s.state.Poison; p != nil && p.Quarantined {
		c := *p
		quarantine = &c
	}
	ar.hooks = RunHooks{Quarantine: quarantine, OnAck: func(int) {
		if ar.acked.CompareAndSwap(false, true) {
			select {
			case s.inbox <- firstAckMsg{id: ar.id}:
			case <-s.done:
			}
		}
	}, OnOpen: func() {
		if ar.openedAt.Load() == nil {
			now := s.cfg.Clock.Now()
			ar.openedAt.CompareAndSwap(nil, &now)
		}
	}}
	return ar
}

// startRun launches a run at once (a start, not a restart).
func (s *Supervisor) startRun() {
	ar := s.newActiveRun()
	s.run = ar
	go s.runLoop(ar, time.Time{})
}

// runLoop is a run's goroutine. A restart (restartedAt set) first tells
// the supervisor it was launched, so that every message of the run comes
// after that one. Building the run here, not on the supervisor goroutine
// or the scheduler's, keeps both of them quick in a storm.
func (s *Supervisor) runLoop(ar *activeRun, restartedAt time.Time) {
	defer ar.cancel()
	s.restarts.Help()
	if !restartedAt.IsZero() {
		handed := make(chan struct{})
		select {
		case s.inbox <- restartedMsg{id: ar.id, at: restartedAt, handed: handed}:
		case <-s.done:
			return
		}
		select {
		case <-handed:
		case <-s.done:
			return
		}
	}
	var err error
	if ar.ctx.Err() == nil && !ar.stopRequestedNow() {
		r, buildErr := s.cfg.NewRun(ar.hooks)
		if buildErr != nil {
			// Reported like a run that failed at once, so that events keep
			// their order: the start, then the fault.
			r = failedRun{buildErr}
		}
		if ar.setBuilt(r) {
			err = r.Run(ar.ctx)
		} else if d, ok := r.(Discarder); ok {
			d.Discard()
		}
	}
	select {
	case s.inbox <- runEndedMsg{id: ar.id, err: err}:
	case <-s.done:
	}
}

// failedRun stands in for a run whose factory failed.
type failedRun struct{ err error }

func (f failedRun) Run(context.Context) error { return f.err }

func (failedRun) Stop() {}
