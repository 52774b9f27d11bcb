package supervision

import (
	"context"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/inspect"
	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

// managedPipeline is one valid pipeline: its configuration, its supervisor
// and its record counters across runs.
type managedPipeline struct {
	cfg config.Pipeline
	// recovery is its resolved error-recovery policy, with the source of
	// each value.
	recovery config.ErrorRecovery
	// policy is the same, compiled: the engine asks it which records a
	// dead-letter rule takes.
	policy lifecycle.Policy
	sup    *lifecycle.Supervisor
	// first is the run provisioning built, for the first run to take
	// (keptBuilds); nil once taken.
	first atomic.Pointer[pipeline.Config]
	// fingerprint identifies cfg (reconciler.Fingerprint).
	fingerprint string
	// origin is where the pipeline is defined; a pipeline moved within
	// its file or to another one keeps running with a new origin.
	origin atomic.Pointer[reconciler.Origin]
	// durable waits until the states and events handed over so far are
	// written (Pipelines.durable).
	durable func(context.Context) error
	// metrics are the pipeline's status, restart and fault series.
	metrics *metrics.Pipeline
	// instance is the id of the cluster instance that runs it; "" when
	// conduit runs alone.
	instance string

	// events orders the pipeline's audit events with status, the status
	// the last of them left it in, so that an event the supervisor did
	// not emit (dedup-skipped) carries the status it happened in.
	events sync.Mutex
	status lifecycle.Status

	records recordCounts
	// taps are the inspectors of its records (Conduit's API v1).
	taps inspect.Taps
	// deadLetters are the records its dead-letter rules and quarantine
	// took.
	deadLetters deadLetterTally
}

var _ api.Supervised = (*managedPipeline)(nil)

func (m *managedPipeline) Info() api.PipelineInfo {
	o := m.origin.Load()
	info := api.PipelineInfo{ID: m.cfg.ID, Name: m.cfg.Name, Description: m.cfg.Description, File: o.File, Line: o.Line, Definition: o.Definition,
		Recovery: m.recovery, Instance: m.instance}
	info.DeadLettered, info.LastDeadLettered, info.LastDeadLetterRule = m.deadLetters.DeadLettered()
	return info
}

func (m *managedPipeline) State(ctx context.Context) (lifecycle.State, error) {
	return m.sup.State(ctx)
}

// Start and Stop answer once the new state and its events are on disk: the
// supervisor does not wait for the disk, but whoever asked it to act is
// told "done" only when a crash can no longer undo it.
func (m *managedPipeline) Start(ctx context.Context) error {
	if err := m.sup.Start(ctx); err != nil {
		return err
	}
	return m.durable(ctx)
}

func (m *managedPipeline) Stop(ctx context.Context, force bool) error {
	if err := m.sup.Stop(ctx, force); err != nil {
		return err
	}
	return m.durable(ctx)
}

func (m *managedPipeline) counts() metrics.RecordCounts { return m.records.read() }

// recordCounts are a pipeline's record counters across its runs: the sum
// of the runs that ended and the live counters of the run in progress,
// which a scrape adds together.
//
// Every scrape must read at least what the one before read (Prometheus
// takes a drop for a counter reset and counts everything again), so moving
// an ended run into the sum and forgetting the run must be one step for
// readers. A mutex makes it one: the records themselves never take it, as
// the engine counts them in its own atomics; it is taken when a run starts
// or ends and once per pipeline per scrape. An atomic pointer to an
// immutable (sum, run) pair would do too, at one allocation per run.
type recordCounts struct {
	mu    sync.Mutex
	ended metrics.RecordCounts
	// current is the run in progress, nil between runs.
	current *pipeline.Stats
}

func (c *recordCounts) runStarted(s *pipeline.Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current = s
}

// runEnded adds the final counts of the run that counted in s to the sum;
// s must not change any more.
func (c *recordCounts) runEnded(s *pipeline.Stats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = addCounts(c.ended, s)
	if c.current == s {
		c.current = nil
	}
}

func (c *recordCounts) read() metrics.RecordCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == nil {
		return c.ended
	}
	return addCounts(c.ended, c.current)
}

// addCounts returns sum plus the counters in s. Each of them only grows,
// so the result never goes down from one call to the next for the same
// run (see pipeline.Stats.RecordsWritten).
func addCounts(sum metrics.RecordCounts, s *pipeline.Stats) metrics.RecordCounts {
	sum.Read += s.RecordsRead.Load()
	sum.Written += s.RecordsWritten.Load()
	sum.Filtered += s.RecordsFiltered.Load()
	sum.Nacked += s.RecordsNacked.Load()
	sum.DedupSkipped += s.DedupSkipped.Load()
	return sum
}

// recordEvent hands e, and extra to commit with it, to the audit log
// without waiting. to is the status e leaves the pipeline in; "" means e
// changes nothing, and it gets the current status as before and after.
func (m *managedPipeline) recordEvent(ps *Pipelines, e *auditlog.Event, to lifecycle.Status, extra ...store.Op) {
	m.events.Lock()
	defer m.events.Unlock()
	if to == "" && m.status != "" {
		e.StatusBefore, e.StatusAfter = m.status, m.status
	}
	if err := ps.audit.Record(*e, extra...); err != nil {
		ps.auditFailed(e, err)
	}
	if to != "" {
		m.status = to
	}
}

// auditFailed logs an event the audit log refused. Out of recordEvent's
// way: it runs deep in a supervisor's goroutine at every transition.
//
//go:noinline
func (ps *Pipelines) auditFailed(e *auditlog.Event, err error) {
	ps.log.Error("could not write to the audit log", zap.String("pipeline_id", e.PipelineID),
		zap.String("event", string(e.Kind)), zap.Error(err))
}

// trackedRun is an engine whose counters are folded into its pipeline's
// totals when it ends.
type trackedRun struct {
	*pipeline.Engine
	ps *Pipelines
	m  *managedPipeline
	// discard gives back the descriptors the run held for opening.
	discard func()
}

// Discard implements lifecycle.Discarder.
func (t trackedRun) Discard() { t.discard() }

func (t trackedRun) Run(ctx context.Context) error {
	t.m.records.runStarted(t.Stats())
	err := t.Engine.Run(ctx)
	// Run returns once every stage stopped: the counters are final.
	t.m.records.runEnded(t.Stats())
	if t.ps != nil {
		t.ps.flushDeadLettered(t.m)
	}
	return err
}

// apiPipelines adapts the pipelines to api.Pipelines: the pipelines this
// process runs (ownership.api shows a cluster's).
type apiPipelines struct{ ps *Pipelines }

func (a apiPipelines) List() []api.Supervised {
	a.ps.mu.RLock()
	defer a.ps.mu.RUnlock()
	out := make([]api.Supervised, len(a.ps.pipelines))
	for i, m := range a.ps.pipelines {
		out[i] = m
	}
	return out
}

func (a apiPipelines) Invalid() []api.ConfigError {
	a.ps.mu.RLock()
	defer a.ps.mu.RUnlock()
	return a.ps.invalid
}

func (a apiPipelines) Get(id string) (api.Supervised, bool) {
	a.ps.mu.RLock()
	m := a.ps.byID[id]
	a.ps.mu.RUnlock()
	if m == nil {
		return nil, false
	}
	return m, true
}

// retired reports whether the pipeline's supervisor ended: it was
// retired (handed over, updated or deleted) and is about to be removed.
func (m *managedPipeline) retired() bool {
	select {
	case <-m.sup.Done():
		return true
	default:
		return false
	}
}
