package conduit

import (
	"context"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/metrics"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/store"
)

// managedPipeline is one valid pipeline: its configuration, its supervisor
// and its record counters across runs.
type managedPipeline struct {
	cfg config.Pipeline
	sup *lifecycle.Supervisor
	// durable waits until the states and events handed over so far are
	// written (Runtime.durable).
	durable func(context.Context) error
	// metrics are the pipeline's status, restart and fault series.
	metrics *metrics.Pipeline

	// events orders the pipeline's audit events with status, the status
	// the last of them left it in, so that an event the supervisor did
	// not emit (dedup-skipped) carries the status it happened in.
	events sync.Mutex
	status lifecycle.Status

	// current is the engine of the run in progress; totals hold the counts
	// of the runs that ended. Metrics add the two on scrape.
	current                                atomic.Pointer[pipeline.Engine]
	read, written, filtered, nacked, dedup atomic.Int64
}

var _ api.Supervised = (*managedPipeline)(nil)

func (m *managedPipeline) Info() api.PipelineInfo {
	return api.PipelineInfo{ID: m.cfg.ID, Name: m.cfg.Name, Description: m.cfg.Description, File: m.cfg.File, Line: m.cfg.Line}
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

func (m *managedPipeline) counts() metrics.RecordCounts {
	c := metrics.RecordCounts{Read: m.read.Load(), Written: m.written.Load(), Filtered: m.filtered.Load(),
		Nacked: m.nacked.Load(), DedupSkipped: m.dedup.Load()}
	if e := m.current.Load(); e != nil {
		s := e.Stats()
		c.Read += s.RecordsRead.Load()
		c.Written += s.RecordsAcked.Load() - s.RecordsNacked.Load()
		c.Filtered += s.RecordsFiltered.Load()
		c.Nacked += s.RecordsNacked.Load()
		c.DedupSkipped += s.DedupSkipped.Load()
	}
	return c
}

// recordEvent hands e, and extra to commit with it, to the audit log
// without waiting. to is the status e leaves the pipeline in; 0 means e
// changes nothing, and it gets the current status as before and after.
func (m *managedPipeline) recordEvent(r *Runtime, e auditlog.Event, to lifecycle.Status, extra ...store.Op) {
	m.events.Lock()
	defer m.events.Unlock()
	if to == 0 && m.status != 0 {
		e.StatusBefore, e.StatusAfter = m.status.String(), m.status.String()
	}
	if err := r.audit.Record(e, extra...); err != nil {
		r.log.Error("could not write to the audit log", zap.String("pipeline_id", e.PipelineID),
			zap.String("event", string(e.Kind)), zap.Error(err))
	}
	if to != 0 {
		m.status = to
	}
}

// trackedRun is an engine whose counters are folded into its pipeline's
// totals when it ends.
type trackedRun struct {
	*pipeline.Engine
	m *managedPipeline
	// discard gives back the descriptors the run held for opening.
	discard func()
}

// Discard implements lifecycle.Discarder.
func (t trackedRun) Discard() { t.discard() }

func (t trackedRun) Run(ctx context.Context) error {
	t.m.current.Store(t.Engine)
	err := t.Engine.Run(ctx)
	s := t.Stats()
	t.m.read.Add(s.RecordsRead.Load())
	t.m.written.Add(s.RecordsAcked.Load() - s.RecordsNacked.Load())
	t.m.filtered.Add(s.RecordsFiltered.Load())
	t.m.nacked.Add(s.RecordsNacked.Load())
	t.m.dedup.Add(s.DedupSkipped.Load())
	t.m.current.CompareAndSwap(t.Engine, nil)
	return err
}

// apiPipelines adapts the runtime to api.Pipelines.
type apiPipelines struct{ r *Runtime }

func (a apiPipelines) List() []api.Supervised {
	out := make([]api.Supervised, len(a.r.pipelines))
	for i, m := range a.r.pipelines {
		out[i] = m
	}
	return out
}

func (a apiPipelines) Invalid() []api.ConfigError { return a.r.invalid }

func (a apiPipelines) Get(id string) (api.Supervised, bool) {
	m := a.r.byID[id]
	if m == nil {
		return nil, false
	}
	return m, true
}

// auditEvent turns a supervisor event into an audit log entry.
func auditEvent(e lifecycle.Event) auditlog.Event {
	out := auditlog.Event{
		Time: e.At, PipelineID: e.PipelineID, Kind: auditlog.Kind(e.Kind),
		StatusBefore: statusName(e.From), StatusAfter: statusName(e.To),
		Message: e.Message, Actor: e.Actor,
		Attempt: e.Attempt, Delay: e.Delay, NextAttemptAt: e.NextAttemptAt, Reason: e.Reason,
	}
	if err := e.Error; err != nil {
		out.ErrorCode, out.ErrorClass, out.ErrorSource, out.ErrorMessage = err.Code, err.Class, err.Source, err.Message
		out.Component, out.ComponentKind = err.Component, err.ComponentKind
	}
	return out
}

func statusName(s lifecycle.Status) string {
	if s == 0 {
		return ""
	}
	return s.String()
}
