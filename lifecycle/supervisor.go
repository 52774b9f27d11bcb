package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/pkg/clock"
)

// StateSaver persists state; *StateStore implements it. SaveLater must not
// wait for the disk: the supervisor calls it on every transition, and its
// schedule must not depend on how long writes take.
type StateSaver interface {
	SaveLater(pipelineID string, st State) error
}

// EventRecorder is the optional ability of a StateSaver to persist a
// state together with the event that records the transition to it, in one
// commit, so that what the audit log says happened is what a restart
// resumes from (pkg/supervision writes both through the store's one writer).
// A supervisor whose StateSaver has it hands every event to RecordLater,
// with the state the event leads to when the event changed it (st is nil
// otherwise); a state changed without an event is saved with SaveLater.
// RecordLater must not wait for the disk either.
type EventRecorder interface {
	// e is the supervisor's: read it, do not keep it. (A pointer: the
	// supervisor's goroutine is deep here, at every transition of ten
	// thousand pipelines, and every copy of an event costs stack.)
	RecordLater(pipelineID string, st *State, e *auditlog.Event) error
}

// Takeover is what an instance of a cluster that takes a pipeline up
// knows of its last holder, for the resumed event.
type Takeover struct {
	// From is the instance that held the pipeline's lease last; empty:
	// not a takeover.
	From string
	// Self: From is this instance (a process with its id).
	Self bool
}

// how says how the pipeline's last run ended, for a pipeline its state
// says was stopped for reason (empty: cut off while running or
// recovering); "" when t says nothing.
func (t Takeover) how(reason StopReason) string {
	switch {
	case t.From == "":
		return ""
	case reason == StopReasonShutdown && !t.Self:
		return "instance " + t.From + " shut down and handed the pipeline over"
	case reason == StopReasonHandover && t.Self:
		return "this instance had stopped the pipeline when it could not renew its lease, and took it up again"
	case reason == StopReasonHandover:
		return "instance " + t.From + " handed the pipeline over"
	case reason == "" && t.Self:
		return "this instance, or an earlier process with its id, stopped renewing the pipeline's lease (it was killed, paused or cut off from the database), and took it up again"
	case reason == "":
		return "instance " + t.From + " stopped renewing the pipeline's lease (it was killed, paused or cut off from the database)"
	}
	return ""
}

// Config is what a Supervisor is built from.
type Config struct {
	PipelineID string
	Policy     Policy
	NewRun     RunFactory
	States     StateSaver
	Clock      clock.Clock
	Logger     *zap.Logger
	// Observer, if set, receives every event (audit log, metrics, the
	// process's exit-on-degraded).
	Observer Observer
	// Random returns numbers in [0,1) for jitter; default math/rand/v2.
	Random func() float64
	// ConfigHash is stored with the state (see State.ConfigHash).
	ConfigHash string
	// Restarts launches this supervisor's restarts. A process with many
	// pipelines shares one (see RestartScheduler); nil gives the
	// supervisor its own, which Run runs.
	Restarts *RestartScheduler
	// Persisted says that the initial state is what an earlier process
	// persisted, to be taken up again ("resumed"); otherwise it was built
	// from the pipeline file (a new pipeline, or a changed configuration)
	// and the pipeline starts from stopped.
	Persisted bool
	// ProcessCrashed says that the earlier process did not shut down
	// cleanly (a crash, a kill, a power loss); the resumed events say so.
	ProcessCrashed bool
	// AfterShutdown says, in the stopped event of a shutdown, what becomes
	// of the pipeline; empty: it is taken up again when conduit starts.
	AfterShutdown string
	// Takeover says, for the resumed event, how an instance of a cluster
	// came to take the pipeline up; zero: it did not.
	Takeover Takeover
	// PluginOf returns the plugin of the pipeline's connector or processor
	// id, which recovery rules may match; nil: none known.
	PluginOf func(componentID string) string
	// DependencyOf returns the dependency a connector names (`dependency:`
	// in the pipeline file); nil: none.
	DependencyOf func(componentID string) string
	// Breakers hold the pipelines that fail on a shared dependency while
	// it is down; nil: no breakers.
	Breakers *Breakers
	// StopTimeout bounds every stop of a run (a user's, a shutdown, an
	// update, a deletion; pipelines.graceful-stop-timeout): a run that has
	// not drained by then is forced (its context is cancelled), and one
	// that has still not ended StopTimeout after it was forced - code that
	// ignores its context - is abandoned: the pipeline is stopped without
	// it, and whatever of it still runs is left to finish or to end with
	// the process. A user's graceful stop that had to be forced leaves the
	// pipeline degraded (force stop), as a force stop does. 0: no bound.
	StopTimeout time.Duration
	// CrashLoopAfter is the crash-loop guard (pipelines.crash-loop-after):
	// a pipeline whose runs were cut off by the process dying that many
	// times in a row, each before the run had moved a record end to end
	// or ended, starts degraded instead of running again. 0: no guard.
	CrashLoopAfter int
}

// Supervisor keeps one pipeline alive. One goroutine (Run) owns its state;
// the other methods send it messages and wait for the answer.
type Supervisor struct {
	cfg   Config
	log   *zap.Logger
	inbox chan message
	done  chan struct{}

	// restarts is Config.Restarts, or this supervisor's own when that is
	// nil (Run runs it then).
	restarts *RestartScheduler

	// facts is what steps know of the pipeline from cfg.
	facts facts

	// Owned by the Run goroutine: the pipeline's state, which steps
	// change (step.go), and what carrying out their effects needs.
	pipeline
	// unsaved is set while state has changed since it was last handed to
	// the StateSaver; the next event carries it (see EventRecorder).
	unsaved bool
	runSeq  int
	// window is the healthy window's timer after a restart, probation the
	// probation's, from when the restarted run's connectors are open.
	window, probation clock.Timer
	// deadline is the timer of the stop of run deadlineRun
	// (Config.StopTimeout).
	deadline    clock.Timer
	deadlineRun int
	// proof is the crash-loop guard's timer of the run started last
	// (doStartProof).
	proof   clock.Timer
	waiters []chan error // stop requests waiting for the run to end
}

type pendingRestart struct {
	ticket    *restartTicket
	run       *activeRun
	scheduled time.Time
}

// ErrSupervisorDone is returned by requests to a supervisor whose Run has
// returned.
var ErrSupervisorDone = errors.New("pipeline supervisor has shut down")

// ErrStillStopping is returned by Start while the previous run is still
// shutting down.
var ErrStillStopping = errors.New("the previous run of this pipeline is still stopping; try again in a moment")

// New returns a supervisor that takes up initial, the persisted state (or a
// fresh one for a new pipeline: Status running or stopped as the pipeline
// file says).
func New(cfg Config, initial State) (*Supervisor, error) {
	if cfg.PipelineID == "" || cfg.NewRun == nil || cfg.States == nil {
		return nil, errors.New("lifecycle: supervisor needs a pipeline id, a run factory and a state saver")
	}
	if !initial.Status.Valid() {
		return nil, fmt.Errorf("lifecycle: pipeline %s: invalid initial status %v", cfg.PipelineID, initial.Status)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Random == nil {
		cfg.Random = rand.Float64
	}
	initial.ConfigHash = cfg.ConfigHash
	status := initial.StartStatus()
	restarts := cfg.Restarts
	if restarts == nil {
		restarts = NewRestartScheduler(cfg.Clock)
	}
	return &Supervisor{
		cfg:      cfg,
		log:      cfg.Logger.With(zap.String("pipeline_id", cfg.PipelineID)),
		inbox:    make(chan message, 16),
		done:     make(chan struct{}),
		restarts: restarts,
		facts: facts{pipelineID: cfg.PipelineID, persisted: cfg.Persisted, processCrashed: cfg.ProcessCrashed,
			takeover: cfg.Takeover, pluginOf: cfg.PluginOf, dependencyOf: cfg.DependencyOf, breakers: cfg.Breakers != nil,
			stopTimeout: cfg.StopTimeout, crashLoopAfter: cfg.CrashLoopAfter},
		pipeline: pipeline{m: newMachine(status), state: initial.Clone()},
	}, nil
}

// Run takes up the initial state (starting a running pipeline, scheduling
// a recovering one at its persisted next attempt time) and then serves
// requests until ctx is done. Then it stops the active run gracefully - a
// process shutdown is not a fault: a running or recovering pipeline is
// persisted as stopped with reason shutdown and the status it had, which
// the next process takes up - and returns once the run has ended. Kill
// forces that stop.
func (s *Supervisor) Run(ctx context.Context) {
	defer close(s.done)
	defer s.stopWindow()
	defer s.stopDeadline()
	if s.cfg.Restarts == nil {
		defer s.restarts.Start()()
	}
	s.decide(resumeInput{})
	s.saveUnsaved()
	ctxDone := ctx.Done()
	for !s.retiring() || s.run != nil {
		var windowC, probationC, deadlineC, proofC <-chan time.Time
		if s.proof != nil {
			proofC = s.proof.C()
		}
		if s.window != nil {
			windowC = s.window.C()
		}
		if s.deadline != nil {
			deadlineC = s.deadline.C()
		}
		if s.probation != nil {
			probationC = s.probation.C()
		}
		select {
		case msg := <-s.inbox:
			s.handle(msg)
			s.restarts.Help()
		case <-windowC:
			s.window = nil
			s.decide(windowElapsed{})
		case <-probationC:
			s.probation = nil
			s.decide(probationElapsed{})
		case <-deadlineC:
			s.deadline = nil
			s.decide(stopOverdue{id: s.deadlineRun})
		case <-proofC:
			s.proof = nil
			s.decide(proofElapsed{})
		case <-ctxDone:
			ctxDone = nil
			s.shutdown()
		}
		s.saveUnsaved()
	}
	for _, w := range s.waiters {
		w <- nil
	}
}

// shutdown stops the pipeline because the process is shutting down: its
// run drains gracefully, and it is persisted as stopped with reason
// shutdown and the status it had, so that the next process takes it up
// again (a recovering pipeline keeps its fail count and next attempt).
// Degraded and stopped pipelines have nothing to stop.
func (s *Supervisor) shutdown() {
	s.decide(retireMsg{why: Retirement{Reason: StopReasonShutdown, Actor: ActorSystem,
		Stopping: "pipeline stopping: conduit is shutting down; source stops reading, in-flight records drain",
		Stopped:  "pipeline stopped: conduit is shutting down; " + cmp.Or(s.cfg.AfterShutdown, "it is taken up again when conduit starts")}})
}

// Retirement says why a supervisor ends for good: the process shuts down,
// or the pipeline's configuration was updated or deleted while it runs.
type Retirement struct {
	Reason StopReason
	Actor  auditlog.Actor
	// Stopping and Stopped are the messages of the stopping and stopped
	// events.
	Stopping, Stopped string
}

// Retire ends the supervisor as a shutdown does, for another reason: the
// run drains gracefully and the pipeline is recorded as stopped with
// why's reason and the status it had. Run returns once the run has ended
// (Done). A supervisor that already ended is left as it is.
func (s *Supervisor) Retire(ctx context.Context, why Retirement) error {
	err := s.send(ctx, retireMsg{why: why})
	if errors.Is(err, ErrSupervisorDone) {
		return nil
	}
	return err
}

// Start starts a stopped or degraded pipeline (resetting its fail count).
// Starting a running or recovering pipeline returns a *TransitionError; a
// pipeline whose last run is still stopping, ErrStillStopping; a pipeline
// whose supervisor is retiring (an update, a deletion, a shutdown),
// ErrSupervisorDone.
func (s *Supervisor) Start(ctx context.Context) error {
	reply := make(chan error, 1)
	if err := s.send(ctx, startMsg{actor: ActorUser, reply: reply}); err != nil {
		return err
	}
	return s.await(ctx, reply)
}

// Stop stops a running or recovering pipeline: gracefully (in-flight
// records drain, status stopped) or, with force, at once (in-flight records
// are dropped and read again later, status degraded). It returns when the
// run has ended, or when ctx is done. A graceful stop is bounded by
// Config.StopTimeout: then it is forced, which degrades the pipeline
// (force stop; its LastError says why), and a forced run that still does
// not end is abandoned.
func (s *Supervisor) Stop(ctx context.Context, force bool) error {
	reply := make(chan error, 1)
	if err := s.send(ctx, stopMsg{force: force, reply: reply}); err != nil {
		return err
	}
	return s.await(ctx, reply)
}

// State returns a copy of the pipeline's current state.
func (s *Supervisor) State(ctx context.Context) (State, error) {
	reply := make(chan State, 1)
	if err := s.send(ctx, stateMsg{reply: reply}); err != nil {
		return State{}, err
	}
	return answer(ctx, s, reply)
}

// Kill cancels the active run at once; it is how a process shutdown that
// takes too long is forced. It does not change the pipeline's status.
func (s *Supervisor) Kill() {
	select {
	case s.inbox <- killMsg{}:
	case <-s.done:
	}
}

// Done is closed when Run has returned.
func (s *Supervisor) Done() <-chan struct{} { return s.done }
