package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
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
}

// RunFactory builds a new run. It is called for every start and restart,
// so every attempt gets fresh connectors. An error is treated like a run
// that failed at once.
type RunFactory func(hooks RunHooks) (Run, error)

// StateSaver persists state; *StateStore implements it. SaveLater must not
// wait for the disk: the supervisor calls it on every transition, and its
// schedule must not depend on how long writes take.
type StateSaver interface {
	SaveLater(pipelineID string, st State) error
}

// EventRecorder is the optional ability of a StateSaver to persist a
// state together with the event that records the transition to it, in one
// commit, so that what the audit log says happened is what a restart
// resumes from (pkg/conduit writes both through the store's one writer).
// A supervisor whose StateSaver has it hands every event to RecordLater,
// with the state the event leads to when the event changed it (st is nil
// otherwise); a state changed without an event is saved with SaveLater.
// RecordLater must not wait for the disk either.
type EventRecorder interface {
	RecordLater(pipelineID string, st *State, e Event) error
}

// componentError is how a run error says which connector or processor it
// came from (pkg/pipeline's StageError implements it).
type componentError interface {
	error
	Component() (kind, id string)
	Unwrap() error
}

// Config is what a Supervisor is built from.
type Config struct {
	PipelineID string
	Policy     Policy
	NewRun     RunFactory
	States     StateSaver
	Clock      Clock
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

	// Owned by the Run goroutine.
	m     *machine
	state State
	// unsaved is set while state has changed since it was last handed to
	// the StateSaver; the next event carries it (see EventRecorder).
	unsaved bool
	// run is the run that was launched: its goroutine reports its end.
	run *activeRun
	// pending is the restart waiting for its time, not launched as far as
	// this goroutine knows (the scheduler may be launching it right now;
	// takeOverRestart settles which).
	pending *pendingRestart
	runSeq  int
	// window is the probation timer: the healthy window after a restart.
	window       Timer
	waiters      []chan error // stop requests waiting for the run to end
	shuttingDown bool
}

type pendingRestart struct {
	ticket    *restartTicket
	run       *activeRun
	scheduled time.Time
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

	// Owned by the supervisor goroutine.
	stopping bool // a graceful stop was requested
	forced   bool // its context was cancelled on purpose

	mu            sync.Mutex
	built         Run
	stopRequested bool
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

// message is the closed set of requests the supervisor goroutine handles.
type message interface{ isMessage() }

type startMsg struct {
	actor string
	reply chan error
}
type stopMsg struct {
	force bool
	reply chan error
}
type runEndedMsg struct {
	id  int
	err error
}
type firstAckMsg struct{ id int }

// restartedMsg is the first thing a restarted run sends: the scheduler
// launched it at at.
type restartedMsg struct {
	id int
	at time.Time
}
type stateMsg struct{ reply chan State }
type syncMsg struct{ reply chan struct{} }
type killMsg struct{}

func (startMsg) isMessage()     {}
func (stopMsg) isMessage()      {}
func (runEndedMsg) isMessage()  {}
func (firstAckMsg) isMessage()  {}
func (restartedMsg) isMessage() {}
func (stateMsg) isMessage()     {}
func (syncMsg) isMessage()      {}
func (killMsg) isMessage()      {}

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
	if initial.Status < StatusRunning || initial.Status > StatusStopped {
		return nil, fmt.Errorf("lifecycle: pipeline %s: invalid initial status %v", cfg.PipelineID, initial.Status)
	}
	if cfg.Clock == nil {
		cfg.Clock = RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Random == nil {
		cfg.Random = rand.Float64
	}
	initial.ConfigHash = cfg.ConfigHash
	status := initial.Status
	if initial.StopReason == StopReasonShutdown {
		// Stopped only because the process shut down: the machine starts
		// where the pipeline was, and resume says so.
		status = StatusRunning
		if initial.ResumeStatus == StatusRecovering {
			status = StatusRecovering
		}
	}
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
		m:        newMachine(status),
		state:    initial.Clone(),
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
	if s.cfg.Restarts == nil {
		defer s.restarts.Start()()
	}
	s.resume()
	s.saveUnsaved()
	ctxDone := ctx.Done()
	for !s.shuttingDown || s.run != nil {
		var windowC <-chan time.Time
		if s.window != nil {
			windowC = s.window.C()
		}
		select {
		case msg := <-s.inbox:
			s.handle(msg)
			s.restarts.Help()
		case <-windowC:
			s.window = nil
			if s.state.Probation && s.run != nil {
				s.recovered(RecoveredByWindow)
			}
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
	s.shuttingDown = true
	s.stopWindow()
	s.takeOverRestart()
	if cur := s.m.current(); cur == StatusRunning || cur == StatusRecovering {
		// On a refusal the run is still stopped below; only the record
		// of it is missing.
		if from, err := s.m.fire(eventStop); err != nil {
			s.log.Error("shutdown refused by the state machine", zap.Error(err))
		} else {
			s.recordShutdown(from)
			if s.run == nil || s.run.stopping {
				s.emitShutdownStopped(from)
			} else {
				s.emit(Event{Kind: auditlog.KindStopping, From: from, To: StatusStopped, Actor: ActorSystem, Reason: string(StopReasonShutdown),
					Message: "pipeline stopping: conduit is shutting down; source stops reading, in-flight records drain"})
			}
		}
	}
	if s.run != nil && !s.run.stopping {
		s.run.stopping = true
		s.run.stop()
	}
}

// recordShutdown persists a pipeline stopped by the shutdown, with the
// status the next process takes up.
func (s *Supervisor) recordShutdown(from Status) {
	s.state.Status = StatusStopped
	s.state.StopReason = StopReasonShutdown
	s.state.ResumeStatus = from
	s.state.Probation = false
	s.save()
}

func (s *Supervisor) emitShutdownStopped(from Status) {
	s.emit(Event{Kind: auditlog.KindStopped, From: from, To: StatusStopped, Actor: ActorSystem, Reason: string(StopReasonShutdown),
		Message: "pipeline stopped: conduit is shutting down; it is taken up again when conduit starts"})
}

// Start starts a stopped or degraded pipeline (resetting its fail count).
// Starting a running or recovering pipeline returns a *TransitionError.
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
// run has ended, or when ctx is done.
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
	select {
	case st := <-reply:
		return st, nil
	case <-ctx.Done():
		return State{}, ctx.Err()
	}
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

// sync returns once every message sent before it was handled (tests).
func (s *Supervisor) sync(ctx context.Context) error {
	reply := make(chan struct{})
	if err := s.send(ctx, syncMsg{reply: reply}); err != nil {
		return err
	}
	select {
	case <-reply:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Supervisor) send(ctx context.Context, m message) error {
	select {
	case s.inbox <- m:
		return nil
	case <-s.done:
		return ErrSupervisorDone
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Supervisor) await(ctx context.Context, reply chan error) error {
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Supervisor) handle(msg message) {
	switch m := msg.(type) {
	case startMsg:
		m.reply <- s.onStart(m.actor)
	case stopMsg:
		s.onStop(m)
	case runEndedMsg:
		s.onRunEnded(m.id, m.err)
	case firstAckMsg:
		if s.run != nil && s.run.id == m.id && s.state.Probation {
			s.recovered(RecoveredByRecord)
		}
	case restartedMsg:
		s.onRestarted(m)
	case stateMsg:
		m.reply <- s.state.Clone()
	case syncMsg:
		close(m.reply)
	case killMsg:
		if s.run != nil && !s.run.forced {
			s.run.forced = true
			s.run.cancel()
		}
	default:
		panic(fmt.Sprintf("lifecycle: unknown message %T", msg))
	}
}

// resume takes up the initial state when the supervisor starts. The first
// event's status before is the status the audit log last recorded: stopped
// for a new pipeline (created, provisioned) and after a clean shutdown,
// the persisted status after a crash.
func (s *Supervisor) resume() {
	if !s.cfg.Persisted {
		if s.state.Status != StatusRunning {
			// Remembered, so that the next process knows the pipeline.
			s.save()
			return
		}
		s.emit(Event{Kind: auditlog.KindStarting, From: StatusStopped, To: StatusRunning, Actor: ActorConfig,
			Message: "pipeline starting"})
		s.save()
		s.emit(Event{Kind: auditlog.KindRunning, From: StatusRunning, To: StatusRunning, Actor: ActorConfig,
			Message: "pipeline running"})
		s.startRun()
		return
	}
	from := s.state.Status
	// A clean shutdown persists running and recovering pipelines as
	// stopped for shutdown, so one persisted as running or recovering was
	// cut off; for the others the process tells.
	how := "conduit had not stopped cleanly (crash, kill or power loss)"
	switch {
	case s.state.StopReason == StopReasonShutdown:
		how = "conduit had stopped cleanly"
		s.state.Status = s.m.current()
		s.state.StopReason, s.state.ResumeStatus = "", 0
	case from == StatusRunning || from == StatusRecovering:
	case !s.cfg.ProcessCrashed:
		how = "conduit had stopped cleanly"
	}
	switch s.state.Status {
	case StatusRunning:
		s.emit(Event{Kind: auditlog.KindResumed, From: from, To: StatusRunning, Actor: ActorSystem,
			Message: how + "; pipeline was running: starting it again from its last saved position"})
		if from != StatusRunning {
			s.save()
		}
		s.emit(Event{Kind: auditlog.KindRunning, From: StatusRunning, To: StatusRunning, Actor: ActorSystem, Message: "pipeline running"})
		s.startRun()
	case StatusRecovering:
		now := s.cfg.Clock.Now()
		next := CapResumeWait(s.cfg.Policy, s.state.FailCount, s.state.NextAttemptAt, now)
		message := how + "; pipeline was recovering: next attempt at its persisted time"
		if !next.Equal(s.state.NextAttemptAt) && s.state.NextAttemptAt.After(now) {
			message = fmt.Sprintf("%s; pipeline was recovering: its persisted next attempt %s is further away than its policy allows, moved to %s",
				how, s.state.NextAttemptAt.Format(time.RFC3339), next.Format(time.RFC3339))
			s.log.Warn("persisted next attempt is later than the recovery policy allows (was the clock wrong?); capped",
				zap.Time("persisted_next_attempt_at", s.state.NextAttemptAt), zap.Time("next_attempt_at", next))
		}
		s.state.Probation = false
		s.state.NextAttemptAt = next
		s.emit(Event{Kind: auditlog.KindResumed, From: from, To: StatusRecovering, Actor: ActorSystem,
			Attempt: s.state.FailCount, Delay: next.Sub(now), NextAttemptAt: next, Error: s.state.LastError,
			Message: message})
		s.save()
		s.scheduleRestart(next)
	case StatusDegraded:
		s.emit(Event{Kind: auditlog.KindResumed, From: from, To: StatusDegraded, Actor: ActorSystem,
			Reason: string(s.state.DegradedReason), Error: s.state.LastError,
			Message: how + "; pipeline stays degraded until it is started"})
	case StatusStopped:
	}
}

func (s *Supervisor) onStart(actor string) error {
	if !s.m.can(eventStart) {
		return &TransitionError{Event: string(eventStart), From: s.m.current()}
	}
	if s.run != nil {
		return ErrStillStopping
	}
	from, err := s.m.fire(eventStart)
	if err != nil {
		return err
	}
	s.state.Status = StatusRunning
	s.state.FailCount = 0
	s.state.NextAttemptAt = time.Time{}
	s.state.Probation = false
	s.state.DegradedReason = ""
	s.emit(Event{Kind: auditlog.KindStarting, From: from, To: StatusRunning, Actor: actor, Message: "pipeline starting"})
	s.save()
	s.emit(Event{Kind: auditlog.KindRunning, From: StatusRunning, To: StatusRunning, Actor: actor, Message: "pipeline running"})
	s.startRun()
	return nil
}

func (s *Supervisor) onStop(m stopMsg) {
	if m.force {
		s.forceStop(m.reply)
		return
	}
	from, err := s.m.fire(eventStop)
	if err != nil {
		m.reply <- err
		return
	}
	s.stopWindow()
	s.takeOverRestart()
	s.state.Status = StatusStopped
	s.state.NextAttemptAt = time.Time{}
	s.state.Probation = false
	s.endEpisode("stopped")
	s.save()
	if s.run == nil {
		s.emit(Event{Kind: auditlog.KindStopped, From: from, To: StatusStopped, Actor: ActorUser, Message: "pipeline stopped"})
		m.reply <- nil
		return
	}
	s.emit(Event{Kind: auditlog.KindStopping, From: from, To: StatusStopped, Actor: ActorUser,
		Message: "pipeline stopping: source stops reading, in-flight records drain"})
	s.run.stopping = true
	s.run.stop()
	s.waiters = append(s.waiters, m.reply)
}

func (s *Supervisor) forceStop(reply chan error) {
	if s.m.current() == StatusStopped && s.run != nil {
		// A graceful stop is under way and taking too long: cut it short.
		// The status stays stopped; the dropped records are read again on
		// the next start because their positions were never saved.
		s.run.forced = true
		s.run.cancel()
		s.waiters = append(s.waiters, reply)
		return
	}
	from, err := s.m.fire(eventDegrade)
	if err != nil {
		reply <- err
		return
	}
	s.stopWindow()
	s.takeOverRestart()
	s.state.Status = StatusDegraded
	s.state.DegradedReason = ReasonForceStop
	s.state.NextAttemptAt = time.Time{}
	s.state.Probation = false
	s.endEpisode("degraded (" + string(ReasonForceStop) + ")")
	s.save()
	s.emit(Event{Kind: auditlog.KindDegraded, From: from, To: StatusDegraded, Actor: ActorUser, Reason: string(ReasonForceStop),
		Message: "pipeline force-stopped: in-flight records were dropped and will be read again on the next start"})
	if s.run == nil {
		reply <- nil
		return
	}
	s.run.forced = true
	s.run.cancel()
	s.waiters = append(s.waiters, reply)
}

func (s *Supervisor) onRunEnded(id int, err error) {
	r := s.run
	if r == nil || r.id != id {
		return
	}
	s.run = nil
	r.cancel()
	if r.forced || r.stopping {
		if r.forced {
			s.log.Warn("pipeline run force-stopped; in-flight records were dropped and will be read again on the next start")
		}
		if err != nil && !r.forced {
			// The drain itself failed; the stop still happened. Keep the
			// error so the user sees it, but do not restart.
			info := describeError(err, s.cfg.Clock.Now())
			s.state.LastError = &info
			s.save()
			s.log.Warn("pipeline stopped with an error while draining", zap.String("error", info.Message))
		}
		switch {
		case s.m.current() != StatusStopped:
			// Force-stopped: the degraded event was written then.
		case s.state.StopReason == StopReasonShutdown:
			s.emitShutdownStopped(StatusStopped)
		default:
			s.emit(Event{Kind: auditlog.KindStopped, From: StatusStopped, To: StatusStopped, Actor: ActorUser, Message: "pipeline stopped"})
		}
		for _, w := range s.waiters {
			w <- nil
		}
		s.waiters = nil
		return
	}
	if err == nil {
		// The run finished on its own (a source that ended): nothing to
		// recover from.
		from, _ := s.m.fire(eventStop)
		s.stopWindow()
		s.state.Status = StatusStopped
		s.state.Probation = false
		s.endEpisode("stopped")
		s.save()
		s.emit(Event{Kind: auditlog.KindStopped, From: from, To: StatusStopped, Actor: ActorSystem, Reason: string(StopReasonFinished),
			Message: "pipeline finished: its source has no more records"})
		return
	}
	s.onFault(err)
}

// onFault applies the policy to a run that ended with err.
func (s *Supervisor) onFault(err error) {
	now := s.cfg.Clock.Now()
	info := describeError(err, now)
	s.state.LastError = &info
	class, _ := cerrors.ParseClass(info.Class)
	var episodeStart time.Time
	if s.state.Episode != nil && s.state.Episode.EndedAt.IsZero() {
		episodeStart = s.state.Episode.StartedAt
	}
	d := Decide(s.cfg.Policy, History{FailCount: s.state.FailCount, EpisodeStart: episodeStart}, class, now, s.cfg.Random())
	current := s.m.current()
	// The fault is announced first, but after the restart is scheduled:
	// writing the event durably must not delay the schedule.
	fault := Event{Kind: auditlog.KindFault, At: now, From: current, To: current, Actor: ActorSystem, Error: &info,
		Attempt: d.Attempt, Message: "pipeline run failed"}
	s.stopWindow()

	if d.Action == ActionDegrade {
		s.emit(fault)
		from, _ := s.m.fire(eventDegrade)
		s.state.Status = StatusDegraded
		s.state.DegradedReason = d.Reason
		s.state.NextAttemptAt = time.Time{}
		s.state.Probation = false
		if s.state.Episode != nil && s.state.Episode.EndedAt.IsZero() {
			s.state.Episode.add(Attempt{Number: d.Attempt, FailedAt: now, Error: info})
		}
		s.endEpisode("degraded (" + string(d.Reason) + ")")
		s.save()
		s.emit(Event{Kind: auditlog.KindDegraded, From: from, To: StatusDegraded, Actor: ActorSystem, Error: &info,
			Attempt: d.Attempt, Reason: string(d.Reason), Message: degradedMessage(d.Reason, s.cfg.Policy)})
		return
	}

	from, _ := s.m.fire(eventFault)
	next := now.Add(d.Delay)
	if episodeStart.IsZero() {
		s.state.Episode = &Episode{StartedAt: now}
	}
	s.state.Episode.add(Attempt{Number: d.Attempt, FailedAt: now, Error: info, Delay: d.Delay, NextAttemptAt: next})
	s.state.Status = StatusRecovering
	s.state.FailCount = d.Attempt
	s.state.NextAttemptAt = next
	s.state.Probation = false
	if !s.shuttingDown {
		// Scheduled from the decision, not from when the state is on disk:
		// in a fault storm the saves queue up, and the schedule must not
		// slip behind them.
		s.scheduleRestart(next)
	}
	s.emit(fault)
	s.save()
	s.emit(Event{Kind: auditlog.KindRecovering, From: from, To: StatusRecovering, Actor: ActorSystem, Error: &info,
		Attempt: d.Attempt, Delay: d.Delay, NextAttemptAt: next, Message: "pipeline recovering: restart scheduled"})
}

func degradedMessage(r DegradeReason, p Policy) string {
	switch r {
	case ReasonRetriesExhausted:
		return fmt.Sprintf("pipeline degraded: %d restarts did not help (max-retries %d)", p.MaxRetries, p.MaxRetries)
	case ReasonMaxDuration:
		return fmt.Sprintf("pipeline degraded: recovery would take longer than max-duration %s", p.MaxDuration)
	default:
		return "pipeline degraded: fatal error, it needs a human"
	}
}

// scheduleRestart prepares the next run and hands it to the restart
// scheduler, which launches it at due.
func (s *Supervisor) scheduleRestart(due time.Time) {
	ar := s.newActiveRun()
	launch := func(at time.Time) { go s.runLoop(ar, at) }
	s.pending = &pendingRestart{ticket: s.restarts.schedule(due, launch), run: ar, scheduled: due}
}

// takeOverRestart cancels the pending restart. If the scheduler launched it
// already, the launched run becomes the supervisor's run, for the caller
// to stop like any other (it sees the stop before it opens anything).
func (s *Supervisor) takeOverRestart() {
	p := s.pending
	if p == nil {
		return
	}
	s.pending = nil
	if s.restarts.cancel(p.ticket) {
		p.run.cancel()
		return
	}
	s.run = p.run
}

// onRestarted takes note that the scheduler launched the pending restart.
// A restart that a stop took over meanwhile is not announced: it is being
// stopped.
func (s *Supervisor) onRestarted(m restartedMsg) {
	p := s.pending
	if p == nil || p.run.id != m.id {
		return
	}
	s.pending = nil
	s.run = p.run
	if _, err := s.m.fire(eventRestart); err != nil {
		s.log.Error("restart refused by the state machine", zap.Error(err))
		return
	}
	s.state.NextAttemptAt = time.Time{}
	s.state.Probation = true
	// A restart is not persisted: the persisted state (recovering, next
	// attempt time now past) already makes a process that crashes from
	// here on restart the pipeline at once, which is what it would do with
	// the restart persisted. Skipping the write keeps a fault storm's
	// restarts off the disk.
	s.emit(Event{Kind: auditlog.KindRestarted, At: m.at, From: StatusRecovering, To: StatusRecovering, Actor: ActorSystem,
		Attempt: s.state.FailCount, NextAttemptAt: p.scheduled,
		Message: "pipeline restarted; it is running again once a record makes it end to end or the healthy window passes"})
	// Probation lasts the healthy window from the restart (a failed start
	// ends it early through the fault).
	s.stopWindow()
	s.window = s.cfg.Clock.NewTimer(s.cfg.Policy.HealthyWindow - s.cfg.Clock.Now().Sub(m.at))
}

func (s *Supervisor) recovered(reason RecoveredReason) {
	from, err := s.m.fire(eventRecovered)
	if err != nil {
		return
	}
	s.stopWindow()
	attempts := s.state.FailCount
	s.state.Status = StatusRunning
	s.state.FailCount = 0
	s.state.Probation = false
	s.endEpisode("recovered (" + string(reason) + ")")
	s.save()
	s.emit(Event{Kind: auditlog.KindRecovered, From: from, To: StatusRunning, Actor: ActorSystem, Reason: string(reason),
		Attempt: attempts, Message: "pipeline recovered: running again, fail count reset"})
}

func (s *Supervisor) endEpisode(outcome string) {
	if e := s.state.Episode; e != nil && e.EndedAt.IsZero() {
		e.EndedAt = s.cfg.Clock.Now()
		e.Outcome = outcome
	}
}

func (s *Supervisor) newActiveRun() *activeRun {
	s.runSeq++
	ar := &activeRun{id: s.runSeq}
	ar.ctx, ar.cancel = context.WithCancel(context.Background())
	ar.hooks = RunHooks{OnAck: func(int) {
		if ar.acked.CompareAndSwap(false, true) {
			select {
			case s.inbox <- firstAckMsg{id: ar.id}:
			case <-s.done:
			}
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
		select {
		case s.inbox <- restartedMsg{id: ar.id, at: restartedAt}:
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
func (failedRun) Stop()                       {}

func (s *Supervisor) stopWindow() {
	if s.window != nil {
		s.window.Stop()
		s.window = nil
	}
}

// save marks the state for persisting. With an EventRecorder it goes with
// the next event, which records the transition, in the same commit;
// otherwise it is handed to the state store at once. Either way it is
// written behind the supervisor's back: a crash before the write lands
// resumes from the state before, the same as crashing a moment earlier.
func (s *Supervisor) save() {
	s.state.UpdatedAt = s.cfg.Clock.Now()
	s.unsaved = true
	if _, ok := s.cfg.States.(EventRecorder); !ok {
		s.saveUnsaved()
	}
}

// saveUnsaved hands a state no event carried to the state store.
func (s *Supervisor) saveUnsaved() {
	if !s.unsaved {
		return
	}
	s.unsaved = false
	if err := s.cfg.States.SaveLater(s.cfg.PipelineID, s.state); err != nil {
		// The state in memory is still the truth; the next transition
		// tries again. Losing it only matters after a crash.
		s.log.Error("could not persist pipeline state", zap.Error(err))
	}
}

func (s *Supervisor) emit(e Event) {
	e.PipelineID = s.cfg.PipelineID
	if e.At.IsZero() {
		e.At = s.cfg.Clock.Now()
	}
	if rec, ok := s.cfg.States.(EventRecorder); ok {
		var st *State
		if s.unsaved {
			c := s.state.Clone()
			st, s.unsaved = &c, false
		}
		if err := rec.RecordLater(s.cfg.PipelineID, st, e); err != nil {
			s.log.Error("could not record pipeline event", zap.String("event", string(e.Kind)), zap.Error(err))
		}
	}
	logEvent(s.log, e)
	if s.cfg.Observer != nil {
		s.cfg.Observer.PipelineEvent(e)
	}
}

// describeError turns the error that ended a run into what the user sees:
// the cause (not the engine's wrapper), its classification and the
// component it came from (processor errors classify as such).
func describeError(err error, now time.Time) ErrorInfo {
	info := ErrorInfo{At: now}
	cause := err
	var comp componentError
	if errors.As(err, &comp) {
		info.ComponentKind, info.Component = comp.Component()
		cause = comp.Unwrap()
	}
	var c cerrors.Classification
	if info.ComponentKind == "processor" {
		c = cerrors.ClassifyProcessor(cause)
	} else {
		c = cerrors.Classify(cause)
	}
	info.Code = c.Code
	info.Class = c.Class.String()
	info.Source = c.Source.String()
	info.Message = truncateMessage(c.Message, maxErrorMessage)
	return info
}
