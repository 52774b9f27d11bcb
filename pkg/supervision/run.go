package supervision

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/store"
)

// A run takes RunDescriptors from the descriptor budget until its
// connectors are open, and starts only while RunDescriptorsKept would be
// left: the store's reserve and a margin for connectors that open more than
// one. One per run, not what the largest runs open: ten thousand restarts
// falling due at once hold the budget together until they are open, and
// the store keeps its own reserve whatever the runs open.
const (
	RunDescriptors     = 1
	RunDescriptorsKept = 2 * store.StoreDescriptorReserve
)

// markDurableTimeout bounds the wait for the crash-loop guard's mark of a
// run: a store that takes longer is in trouble of its own, and the run
// goes ahead.
const markDurableTimeout = 10 * time.Second

// deadLetter answers the engine's question about a transient error that
// names its record, with the pipeline's policy (lifecycle decides).
func (m *managedPipeline) deadLetter(err error, kind pipeline.Kind, id string) (string, bool) {
	c := kind.Classify(err)
	return m.policy.DeadLetterRule(lifecycle.Fault{Pipeline: m.cfg.ID, Class: c.Class, Code: c.Code, Message: c.Message,
		Component: id, Plugin: m.pluginOf(id)})
}

// componentKind maps the kind an error info names to the engine's.
func componentKind(kind cerrors.ComponentKind) pipeline.Kind {
	switch kind {
	case cerrors.ComponentSource:
		return pipeline.KindSource
	case cerrors.ComponentDestination:
		return pipeline.KindDestination
	default:
		return pipeline.KindProcessor
	}
}

// pluginOf returns the plugin of the pipeline's connector or processor
// id, for recovery rules that match plugins. Looked up when a rule asks:
// a pipeline has a few components, and ten thousand pipelines need no map
// each.
func (m *managedPipeline) pluginOf(id string) string {
	for _, c := range m.cfg.Connectors {
		if c.ID == id {
			return c.Plugin
		}
		for _, pr := range c.Processors {
			if pr.ID == id {
				return pr.Plugin
			}
		}
	}
	for _, pr := range m.cfg.Processors {
		if pr.ID == id {
			return pr.Plugin
		}
	}
	return ""
}

// dependencyOf returns the dependency the connector id names, "" for none
// (processors name none: a processor's dependency is its error's to say).
func (m *managedPipeline) dependencyOf(id string) string {
	for _, c := range m.cfg.Connectors {
		if c.ID == id {
			return c.Dependency
		}
	}
	return ""
}

// newRun builds one run of p with fresh connectors and processors (the
// first run gets what provisioning built, see keptBuilds); a failure here
// is reported to the supervisor like a failed run.
func (ps *Pipelines) newRun(m *managedPipeline, hooks lifecycle.RunHooks) (lifecycle.Run, error) {
	if ps.cfg.Pipelines.CrashLoopAfter > 0 {
		// The crash-loop guard's mark of this run (lifecycle.State.Run) was
		// handed to the writer before the run was launched; it must be on
		// disk before the run can take the process down. A store that
		// refuses writes does not keep the pipeline from running: the guard
		// is weaker then, and the refusal is reported where it happens.
		ctx, cancel := context.WithTimeout(context.Background(), markDurableTimeout)
		err := ps.durable(ctx)
		cancel()
		if err != nil {
			ps.log.Warn("the crash-loop guard could not make the mark of the pipeline's run durable before it starts",
				zap.String("pipeline_id", m.cfg.ID), zap.Error(err))
		}
	}
	release, left, ok := ps.fds.Take(RunDescriptors, RunDescriptorsKept)
	if !ok {
		// Opening connectors now could take the descriptors the store
		// keeps for itself; waiting on backoff gives others time to close.
		return nil, cerrors.WithCode(fmt.Errorf("too few file descriptors left to open the pipeline's connectors: %d left, %d kept for the database and other pipelines; raise the open file limit (ulimit -n)",
			left, RunDescriptorsKept), cerrors.CodeUnavailable)
	}
	var cfg pipeline.Config
	var err error
	if first := m.first.Swap(nil); first != nil {
		cfg = *first
	} else if cfg, err = ps.assembler.Build(m.cfg); err != nil {
		release()
		return nil, err
	}
	cfg.OnOpen = func() {
		release()
		if hooks.OnOpen != nil {
			hooks.OnOpen()
		}
	}
	cfg.OnAck = hooks.OnAck
	m.taps.Tap(&cfg)
	if mayWrite := ps.writeGuards.MayWrite; mayWrite != nil {
		id := m.cfg.ID
		cfg.WriteGuard = func() error { return mayWrite(id) }
	}
	cfg.DeadLetter = m.deadLetter
	cfg.OnDeadLettered = func(d pipeline.DeadLettered) { ps.deadLettered(m, d) }
	if q := hooks.Quarantine; q != nil {
		cfg.Quarantine = map[string]pipeline.QuarantinedRecord{string(q.Position): {
			Kind: componentKind(q.Error.ComponentKind), ID: q.Error.Component,
			Err: fmt.Errorf("quarantined after %d runs in a row failed on this record: %s", q.Runs, q.Error.Message),
		}}
	}
	if cfg.Dedup != nil {
		cfg.OnDedupSkipped = func(destination string, skipped int64) { ps.dedupSkipped(m, destination, skipped) }
		cfg.OnDedupUnverified = func(destination string) { ps.dedupUnverified(m, destination) }
	}
	e, err := pipeline.New(cfg)
	if err != nil {
		release()
		return nil, err
	}
	return trackedRun{Engine: e, ps: ps, m: m, discard: release}, nil
}

// dedupSkipped writes the one dedup-skipped event of a destination's run.
// It changes no status; it carries the one the pipeline is in.
func (ps *Pipelines) dedupSkipped(m *managedPipeline, destination string, skipped int64) {
	pipelineID := m.cfg.ID
	ps.log.Info("records already written by an earlier run were not written again",
		zap.String("pipeline_id", pipelineID), zap.String("destination", destination), zap.Int64("skipped", skipped))
	records, were := "records", "were"
	if skipped == 1 {
		records, were = "record", "was"
	}
	e := auditlog.Event{PipelineID: pipelineID, Kind: auditlog.KindDedupSkipped, Actor: lifecycle.ActorSystem,
		Component: destination, ComponentKind: "destination", Count: skipped,
		Message: fmt.Sprintf("%d %s destination %s already accepted in an earlier run %s acknowledged without being written again", skipped, records, destination, were)}
	m.recordEvent(ps, &e, "")
	ps.metrics.CountEvent(string(auditlog.KindDedupSkipped))
}

// dedupUnverified writes the event of a destination that could not read
// back what its last run wrote. It changes no status.
func (ps *Pipelines) dedupUnverified(m *managedPipeline, destination string) {
	const message = "destination %s could not say what it holds of the last run (its output was replaced or cut since): records that run wrote without seeing them acknowledged may be written again"
	ps.log.Warn(fmt.Sprintf(message, destination), zap.String("pipeline_id", m.cfg.ID), zap.String("destination", destination))
	e := auditlog.Event{PipelineID: m.cfg.ID, Kind: auditlog.KindDedupUnverified, Actor: lifecycle.ActorSystem,
		Component: destination, ComponentKind: "destination", Message: fmt.Sprintf(message, destination)}
	m.recordEvent(ps, &e, "")
	ps.metrics.CountEvent(string(auditlog.KindDedupUnverified))
}

// pipelineJournal persists what a pipeline's supervisor hands over: the
// audit event of every transition together with the state it leads to, in
// one commit of the store's writer, so that what the log says happened is
// what a restart resumes from. It never waits for the disk: the writer
// makes them durable moments later, sharing syncs across pipelines. API
// requests that change a pipeline wait for it (managedPipeline.Start,
// Stop), and shutdown writes whatever was handed over.
type pipelineJournal struct {
	ps *Pipelines
	m  *managedPipeline
}

func (j pipelineJournal) SaveLater(pipelineID string, st lifecycle.State) error {
	return j.ps.states.SaveLater(pipelineID, st)
}

func (j pipelineJournal) RecordLater(pipelineID string, st *lifecycle.State, e *auditlog.Event) error {
	var extra []store.Op
	if st != nil {
		// st is the supervisor's copy for this event: nothing changes it.
		extra = append(extra, lifecycle.StateOp(pipelineID, *st))
	}
	ev := *e // the supervisor's: recordEvent may fill in what it left zero
	j.m.recordEvent(j.ps, &ev, e.StatusAfter, extra...)
	return nil
}

// onEvent is called by every supervisor goroutine for every event, after
// the journal took it.
func (ps *Pipelines) onEvent(m *managedPipeline, e auditlog.Event) {
	ps.metrics.PipelineEvent(m.metrics, e)
	ps.figures.count(&e)
	if e.Kind == auditlog.KindDegraded && ps.cfg.Pipelines.ExitOnDegraded && e.Reason != string(lifecycle.ReasonForceStop) {
		ps.fail(DegradedError{e.PipelineID})
	}
	if ps.observer != nil {
		ps.observer.PipelineEvent(e)
	}
}
