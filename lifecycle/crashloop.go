package lifecycle

// The crash-loop guard: one pipeline must not keep the whole process down.
// A pipeline whose runs end with the process dying (a script that takes all
// the memory, a library that crashes) would otherwise take conduit down
// again at every start. Every run of a pipeline is marked in its persisted
// state before it starts (State.Run; the runtime makes the mark durable
// before the run is built); the mark is cleared once the run moved a record
// end to end, or lived crashLoopProof, or ended, or conduit shut down
// cleanly. A process that finds
// the mark set died during that run: State.Crashes counts such deaths in a
// row, and once they reach Config.CrashLoopAfter the pipeline starts
// degraded (reason crash loop) instead of running. A start by a user clears
// the count.
//
// A death counts against every pipeline whose run had not proved itself
// yet: pipelines that start together with the culprit and move no record
// before it kills the process (an idle source) count too - but only while
// the deaths come within crashLoopProof of their start, as in a crash
// loop. An idle pipeline that ran longer than that before each death (a
// process killed now and then for other reasons) is not held.

import (
	"errors"
	"fmt"
	"time"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
)

// crashLoop counts a process death during the pipeline's last run, found
// when a supervisor takes up a persisted state, and degrades the pipeline
// when the deaths in a row reached the guard's limit. It reports whether
// it did; the resumption is then over.
func (p *pipeline) crashLoop(snap *snapshot, fx *effects) bool {
	if !p.state.Run {
		return false
	}
	p.state.Run = false
	p.state.Crashes++
	p.save(snap, fx)
	if snap.crashLoopAfter <= 0 || p.state.Crashes < snap.crashLoopAfter {
		return false
	}
	from := p.state.Status
	p.must(eventCrashLoop, fx)
	message := fmt.Sprintf("conduit died during the pipeline's runs %d times in a row (pipelines.crash-loop-after: %d), each time before a record made it end to end: "+
		"the pipeline is not started again, so that it does not take conduit down again; fix the cause (conduit's log from before each restart says why it died) and start it",
		p.state.Crashes, snap.crashLoopAfter)
	p.state.crashLooped(snap.now)
	info := describeError(cerrors.Fatal(errors.New(message)), snap.now)
	p.state.LastError = &info
	fx.emit(withError(&auditlog.Event{Kind: auditlog.KindDegraded, StatusBefore: from, StatusAfter: StatusDegraded, Actor: ActorSystem,
		Reason: string(ReasonCrashLoop), Message: "pipeline degraded: " + message}, &info), snap.now)
	return true
}

// crashLoopProof is how long a run must live, without a record end to
// end, for a death of the process after it not to count: a pipeline that
// takes the process down at start (a record that kills it, read again at
// every start) does so well within it.
const crashLoopProof = time.Minute

// markRun marks the run about to start (State.Run) when the guard is on,
// and reports whether it changed the state. The run is proved, and its
// mark cleared, if it lives crashLoopProof.
func (p *pipeline) markRun(snap *snapshot, fx *effects) bool {
	if snap.crashLoopAfter <= 0 {
		return false
	}
	fx.timer(doStartProof, crashLoopProof, snap.now)
	if p.state.Run {
		return false
	}
	p.state.Run = true
	return true
}

// runProved clears the mark of the pipeline's run and the deaths in a
// row: the run moved a record end to end, or ended, while the process
// lived.
func (p *pipeline) runProved(snap *snapshot, fx *effects) {
	if !p.state.Run && p.state.Crashes == 0 {
		return
	}
	p.state.Run, p.state.Crashes = false, 0
	p.save(snap, fx)
}
