package lifecycle

// The one place that decides: step takes the pipeline's state, an input,
// a snapshot of what it may consult (the policy and its rules, now, a
// random number, what the pipeline's configuration says) and changes the
// state, appending the effects the supervisor's loop carries out, in
// order (perform.go). A step does no I/O, reads no clock, starts nothing
// and sends nothing: everything of that kind is an effect.

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
)

// pipeline is what a step reads and changes: the machine (the single
// source of the status and its sub-state), the persisted state, and what
// the supervisor knows of the pipeline's runs. The Supervisor embeds it;
// only its goroutine touches it.
type pipeline struct {
	m     *machine
	state State
	// run is the run that was launched: its goroutine reports its end.
	// A step reads its id and how it is being ended (and sets the
	// latter); stopping or cancelling it is an effect.
	run *activeRun
	// pending is the restart waiting for its time, not launched as far as
	// the supervisor knows. Before a stop, a force stop or a retirement is
	// stepped, the loop settles it (takeOverRestart): cancelled, or, when
	// the scheduler launched it already, the supervisor's run.
	pending *pendingRestart
	// retirement is why the supervisor ends, once it does (retiring).
	retirement *Retirement
}

// retiring reports whether the supervisor is ending (a shutdown, an
// update, a deletion): nothing starts or restarts any more.
func (p *pipeline) retiring() bool { return p.retirement != nil }

// provingHealthy says the pipeline is running again after its probation
// while its episode is still open: the fail count resets when the healthy
// window passes or a record makes it end to end, and a failure before
// then continues the episode's backoff.
func (p *pipeline) provingHealthy() bool {
	return p.m.current() == StatusRunning && p.state.Episode != nil && p.state.Episode.EndedAt.IsZero()
}

// facts is what a step knows of its pipeline that does not change while
// the supervisor runs (from its Config).
type facts struct {
	pipelineID string
	// persisted, processCrashed, takeover: how the initial state came
	// about (Config).
	persisted, processCrashed bool
	takeover                  Takeover
	pluginOf, dependencyOf    func(componentID string) string
	// breakers: the process has breakers for shared dependencies.
	breakers bool
	// stopTimeout, crashLoopAfter: Config.StopTimeout, CrashLoopAfter.
	stopTimeout    time.Duration
	crashLoopAfter int
}

func (f *facts) plugin(component string) string {
	if f.pluginOf == nil || component == "" {
		return ""
	}
	return f.pluginOf(component)
}

// snapshot is what a step may consult besides the pipeline's state, taken
// by the loop before the step: nothing in it changes during the step.
type snapshot struct {
	*facts
	policy *Policy
	now    time.Time
	// random is a number in [0,1) for a decision's jitter.
	random float64
	// rules is the rules a fault's decision tries (taken for a run that
	// ended with an error).
	rules RuleSet
	// rule is the managed rule an applyRuleMsg names (nil: the policy has
	// none of that name).
	rule *Rule
	// openedAt is when the run's connectors opened (nil: not yet), for a
	// probation's timer.
	openedAt *time.Time
}

// input is what a step decides about: a request or a report from the
// supervisor's inbox (messages.go), or one of these.
type input interface{ isInput() }

// resumeInput: the supervisor starts and takes up its initial state.
type resumeInput struct{}

// windowElapsed: the healthy window's timer fired.
type windowElapsed struct{}

// probationElapsed: the probation's timer fired.
type probationElapsed struct{}

// proofElapsed: the run started last has lived crashLoopProof without the
// process dying (doStartProof).
type proofElapsed struct{}

// stopOverdue: the deadline of the stop of run id passed
// (Config.StopTimeout).
type stopOverdue struct{ id int }

// breakerAnswered: the dependency's breaker, asked about a fault whose
// decision restarts (doAskBreaker), holds the restart (held names the
// dependency) or lets it go ahead (held empty).
type breakerAnswered struct {
	step *faultStep
	held string
}

func (resumeInput) isInput()      {}
func (windowElapsed) isInput()    {}
func (probationElapsed) isInput() {}
func (proofElapsed) isInput()     {}
func (breakerAnswered) isInput()  {}
func (stopOverdue) isInput()      {}
func (startMsg) isInput()         {}
func (stopMsg) isInput()          {}
func (runEndedMsg) isInput()      {}
func (firstAckMsg) isInput()      {}
func (restartedMsg) isInput()     {}
func (killMsg) isInput()          {}
func (retireMsg) isInput()        {}
func (releaseMsg) isInput()       {}
func (applyRuleMsg) isInput()     {}

// step decides about in: the supervisor's every decision - a start or a
// stop, a run's end and the fault it may bring (classification, the rules,
// restart or degrade, poison tracking), restarts, probation and recovery,
// a managed rule applied, a breaker's hold and release, the end of the
// supervisor - is made here, table-tested in step_machine_test.go (the
// fault and rule parts also in step_test.go).
func (p *pipeline) step(in input, snap *snapshot, fx *effects) {
	switch m := in.(type) {
	case resumeInput:
		p.stepResume(snap, fx)
	case startMsg:
		p.stepStart(m, snap, fx)
	case stopMsg:
		if m.force {
			p.stepForceStop(m.reply, snap, fx)
		} else {
			p.stepStop(m.reply, snap, fx)
		}
	case runEndedMsg:
		p.stepRunEnded(m, snap, fx)
	case breakerAnswered:
		p.carryOutFault(m.step, m.held, snap, fx)
	case restartedMsg:
		p.stepRestarted(m, snap, fx)
	case firstAckMsg:
		if p.run == nil || p.run.id != m.id {
			return
		}
		if p.state.Probation || p.provingHealthy() {
			p.recovered(RecoveredByRecord, snap, fx)
		}
		p.runProved(snap, fx)
	case windowElapsed:
		if p.run != nil && (p.m.phase() == phaseProbation || p.provingHealthy()) {
			p.recovered(RecoveredByWindow, snap, fx)
		}
	case probationElapsed:
		p.stepProbation(snap, fx)
	case proofElapsed:
		if p.run != nil {
			p.runProved(snap, fx)
		}
	case stopOverdue:
		p.stepStopOverdue(m.id, snap, fx)
	case releaseMsg:
		p.stepRelease(m.after, snap, fx)
	case applyRuleMsg:
		p.stepApplyRule(m, snap, fx)
	case retireMsg:
		p.stepRetire(m.why, snap, fx)
	case killMsg:
		if p.run != nil && p.run.ending != runForced {
			p.run.endBy(runForced)
			fx.add(effect{do: doCancelRun, run: p.run})
			p.armStopDeadline(snap, fx)
		}
	default:
		panic(fmt.Sprintf("lifecycle: no step for input %T", in))
	}
}

// save marks the state as changed: the loop persists it with the next
// event (doSave).
func (p *pipeline) save(snap *snapshot, fx *effects) {
	p.state.UpdatedAt = snap.now
	fx.add(effect{do: doSave})
}

// leaveBreaker tells the breaker of the dependency the pipeline last
// failed on that it no longer waits for nor retries it.
func (p *pipeline) leaveBreaker(snap *snapshot, fx *effects) {
	if le := p.state.LastError; snap.breakers && le != nil && le.Dependency != "" {
		fx.add(effect{do: doLeaveBreaker, more: le.Dependency})
	}
}

// breakerSuccess tells the breaker of the dependency the pipeline last
// failed on that it is back.
func (p *pipeline) breakerSuccess(snap *snapshot, fx *effects) {
	if le := p.state.LastError; snap.breakers && le != nil && le.Dependency != "" {
		fx.add(effect{do: doBreakerSuccess, more: le.Dependency})
	}
}

// effectKind is what an effect does; perform.go carries each out.
type effectKind uint8

const (
	// doEmit records event (the audit log, the observer, the log).
	doEmit effectKind = iota + 1
	// doSave persists the state as the step left it, with the next event
	// when the saver records events.
	doSave
	// doStartRun launches a run at once (a start, not a restart).
	doStartRun
	// doScheduleRestart hands a restart due at to the restart scheduler.
	doScheduleRestart
	// doStopRun asks run to stop gracefully; doCancelRun cuts it off.
	doStopRun
	doCancelRun
	// doStopTimers stops the healthy window's and the probation's timers.
	doStopTimers
	// doStartDeadline sets the timer of run's stop to fire at at;
	// doStopDeadline stops it.
	doStartDeadline
	doStopDeadline
	// doStartWindow, doStartProbation set those timers to fire at at.
	doStartWindow
	doStartProbation
	// doStartProof sets the crash-loop guard's timer of the run that
	// starts to fire at at (proofElapsed).
	doStartProof
	// doLeaveBreaker, doBreakerSuccess tell dep's breaker.
	doLeaveBreaker
	doBreakerSuccess
	// doAskBreaker counts a fault against its dependency's breaker and
	// steps the answer (breakerAnswered).
	doAskBreaker
	// doReply answers a request with err; doAwait keeps reply until the
	// run ends, when doAnswerWaiters answers every kept one.
	doReply
	doAwait
	doAnswerWaiters
	// doAnswerApply answers ApplyRule.
	doAnswerApply
	// doWarn logs note; doBug reports a transition the machine refused
	// although the step chose it.
	doWarn
	doBug
)

// effect is one thing the loop does for a step. Only the fields of its
// kind are set. It is kept small: a step's effects are made for every
// message of every supervisor.
type effect struct {
	do    effectKind
	event *auditlog.Event
	run   *activeRun
	// at is when a restart is due, or when a timer fires.
	at time.Time
	// more is what a rarer effect needs: the dependency of a breaker's
	// effect (string), the request kept until the run ends (chan error),
	// a reply (*replyTo), the decided fault (*faultStep), the answer to
	// ApplyRule (*appliedRule), a log line (*logNote).
	more any
}

// replyTo is the answer to a request.
type replyTo struct {
	reply chan error
	err   error
}

// appliedRule is the answer to ApplyRule.
type appliedRule struct {
	reply   chan ApplyOutcome
	outcome ApplyOutcome
}

// logNote is a line for the supervisor's log.
type logNote struct {
	msg    string
	fields []zap.Field
}

// effects is what a step asks the loop to do, in order.
type effects []effect

func (fx *effects) add(e effect) { *fx = append(*fx, e) }

// emit records e, at now unless it says when it happened. Events are
// handed over by pointer: a step runs deep in the supervisor's goroutine,
// at every transition of ten thousand pipelines, and every copy of an
// event costs stack.
func (fx *effects) emit(e *auditlog.Event, now time.Time) {
	if e.Time.IsZero() {
		e.Time = now
	}
	fx.add(effect{do: doEmit, event: e})
}

func (fx *effects) reply(reply chan error, err error) {
	fx.add(effect{do: doReply, more: &replyTo{reply: reply, err: err}})
}

func (fx *effects) schedule(at time.Time) { fx.add(effect{do: doScheduleRestart, at: at}) }

// timer sets the healthy window's or the probation's timer (do) to fire
// d after now.
func (fx *effects) timer(do effectKind, d time.Duration, now time.Time) {
	fx.add(effect{do: do, at: now.Add(d)})
}

func (fx *effects) askBreaker(f *faultStep) { fx.add(effect{do: doAskBreaker, more: f}) }

func (fx *effects) answerApply(reply chan ApplyOutcome, o ApplyOutcome) {
	fx.add(effect{do: doAnswerApply, more: &appliedRule{reply: reply, outcome: o}})
}

func (fx *effects) warn(msg string, fields ...zap.Field) {
	fx.add(effect{do: doWarn, more: &logNote{msg: msg, fields: fields}})
}

func (fx *effects) bug(ev event, err error, status Status) {
	fx.add(effect{do: doBug, more: &logNote{msg: "bug: the state machine refused a transition the supervisor chose",
		fields: []zap.Field{zap.String("event", string(ev)), zap.Stringer("status", status), zap.Error(err)}}})
}
