package supervision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/ownership"
	"github.com/conduitry/conduit/pkg/reconciler"
	"github.com/conduitry/conduit/pkg/store"
)

// Reload asks for the pipeline files to be read again and what changed
// applied (SIGHUP). It does not wait; requests made while one is pending
// are one.
func (ps *Pipelines) Reload() {
	select {
	case ps.reload <- struct{}{}:
	default:
	}
}

// watchFiles returns a watcher of pipelines.path when pipelines.watch is
// on, nil when it is off or the path cannot be watched (SIGHUP then
// applies changes). Its owner runs it.
func (ps *Pipelines) watchFiles() *reconciler.Watcher {
	if !ps.cfg.Pipelines.Watch {
		return nil
	}
	w, err := reconciler.NewWatcher(ps.cfg.Pipelines.Path, ps.log)
	if err != nil {
		ps.log.Warn("not watching the pipeline files; send SIGHUP to apply changes", zap.String("path", ps.cfg.Pipelines.Path), zap.Error(err))
		return nil
	}
	ps.log.Info("watching the pipeline files for changes", zap.String("path", ps.cfg.Pipelines.Path))
	return w
}

// BetweenPlans runs fn while no plan is applied: ownership moves
// pipelines from one process to another only between plans, so that a
// pipeline is not updated or deleted while it changes hands.
func (ps *Pipelines) BetweenPlans(fn func()) {
	ps.reconciling.Lock()
	defer ps.reconciling.Unlock()
	fn()
}

// reconcileLoop applies the pipeline files each time a reload is asked
// for, until ctx is done. After each, w (nil: none) follows
// pipelines.path again: a link swapped in that it did not see (SIGHUP
// after a deploy) is watched from then on.
func (ps *Pipelines) reconcileLoop(ctx context.Context, w *reconciler.Watcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ps.reload:
			ps.reconcileFiles(ctx)
			if w != nil {
				w.Recheck()
			}
		}
	}
}

// reconcileFiles reads the pipeline files and applies the plan; the
// pipelines created through the API stay as they are.
func (ps *Pipelines) reconcileFiles(ctx context.Context) {
	ps.reconciling.Lock()
	defer ps.reconciling.Unlock()
	files, apiPipelines, problems, err := ps.desiredState(ctx)
	if err != nil {
		ps.log.Error("reading the desired pipelines", zap.Error(err))
		return
	}
	plan, err := ps.plan(append(files, apiPipelines...), problems)
	if err == nil {
		_, err = ps.applyPlan(ctx, plan, lifecycle.ActorConfig)
	}
	if err != nil {
		ps.log.Error("applying the pipeline files", zap.Error(err))
		return
	}
	if err := ps.audit.Flush(ctx); err != nil && ctx.Err() == nil {
		ps.log.Error("could not write to the audit log", zap.Error(err))
	}
	ps.mu.RLock()
	invalid := len(ps.invalid) // every entry that does not run, duplicates included
	ps.mu.RUnlock()
	ps.log.Info("pipeline files applied", zap.String("path", ps.cfg.Pipelines.Path),
		zap.Int("created", plan.Count(reconciler.Create)), zap.Int("updated", plan.Count(reconciler.Update)),
		zap.Int("deleted", plan.Count(reconciler.Delete)), zap.Int("unchanged", plan.Count(reconciler.Unchanged)),
		zap.Int("invalid", invalid))
}

// running is what the reconciler compares the desired pipelines with.
func (ps *Pipelines) running() []reconciler.Running {
	return ps.ownership.KnownPipelines()
}

// applyPlan makes the running pipelines what plan says (reconciler.Apply
// decides the order and what is invalid; planTarget carries each change
// out) and lists the invalid entries. What a change means for ownership
// (a pipeline another instance of a cluster runs, updates or takes up) is
// the ownership's to say. asked is who asked, for the audit log. The
// caller holds ps.reconciling.
func (ps *Pipelines) applyPlan(ctx context.Context, plan reconciler.Plan, asked lifecycle.Actor) (reconciler.Plan, error) {
	// What planning built and nothing provisioned is of no use after.
	defer ps.kept.drop()
	if ps.shuttingDown() {
		return plan, fmt.Errorf("not applied: %w", lifecycle.ErrSupervisorDone)
	}
	owned := ps.ownership.Plan(ctx, plan)
	entries, err := reconciler.Apply(ctx, plan, planTarget{ps: ps, owned: owned}, asked, ps.log)
	if err != nil {
		return plan, err
	}
	var invalid []api.ConfigError
	for _, e := range entries {
		invalid = append(invalid, configError(e.Pipeline, e.Err))
	}
	ps.mu.Lock()
	ps.invalid = invalid
	ps.mu.Unlock()
	owned.Applied(ctx)
	return plan, nil
}

// planTarget is the pipelines as reconciler.Apply changes them, with what the
// plan means for ownership.
type planTarget struct {
	ps    *Pipelines
	owned ownership.Planned
}

func (t planTarget) AppliesHere(c reconciler.Change) bool { return t.owned.AppliesHere(c) }

func (t planTarget) Create(ctx context.Context, d reconciler.Desired, actor lifecycle.Actor) error {
	m, err := t.ps.provision(ctx, d.Pipeline, d.Origin, actor)
	if err != nil {
		return err
	}
	t.ps.add(m, -1)
	return nil
}

func (t planTarget) Update(ctx context.Context, c reconciler.Change, actor lifecycle.Actor) error {
	return t.ps.updatePipeline(ctx, c, actor)
}

func (t planTarget) Delete(ctx context.Context, id string, actor lifecycle.Actor) {
	t.ps.deletePipeline(ctx, id, actor, t.owned)
}

func (t planTarget) Keep(id string, origin reconciler.Origin) {
	if m := t.ps.get(id); m != nil {
		m.origin.Store(&origin)
	}
}

// plan validates the desired pipelines - an entry that parses but names
// an unknown plugin or a bad setting is a problem like one that does not
// parse - and computes the plan against what runs. Unless
// pipelines.allow-delete-all is set, files that define no pipeline any
// more delete none (reconciler.HoldMassDeletion).
func (ps *Pipelines) plan(desired []reconciler.Desired, problems []reconciler.Problem) (reconciler.Plan, error) {
	valid := make([]reconciler.Desired, 0, len(desired))
	for _, d := range desired {
		cfg, errs := ps.check(d.Pipeline)
		if len(errs) > 0 {
			for _, err := range errs {
				ce := configError(d.Pipeline, err)
				problems = append(problems, reconciler.Problem{PipelineID: d.Pipeline.ID, File: ce.File, Line: ce.Line, Err: err})
			}
			continue
		}
		// Provisioning runs this build (see keptBuilds).
		ps.kept.keep(d.Pipeline, cfg)
		valid = append(valid, d)
	}
	plan, err := reconciler.Make(ps.running(), valid, problems)
	if err != nil || ps.cfg.Pipelines.AllowDeleteAll {
		return plan, err
	}
	// Every caller (a reload, an API apply or delete) plans with the
	// files as they are: none may delete every file pipeline at once.
	return reconciler.HoldMassDeletion(plan, ps.cfg.Pipelines.Path), nil
}

// Known are the pipelines this process supervises, in the order of the
// files: all it knows when it runs alone (ownership.Solo).
func (ps *Pipelines) Known() []reconciler.Running {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	out := make([]reconciler.Running, len(ps.pipelines))
	for i, m := range ps.pipelines {
		out[i] = reconciler.Running{Pipeline: m.cfg, Origin: *m.origin.Load(), Fingerprint: m.fingerprint}
	}
	return out
}

func (ps *Pipelines) get(id string) *managedPipeline {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return ps.byID[id]
}

// add lists m, at index i of the pipelines (-1: at the end), and starts
// its supervisor when Serve already started the others.
func (ps *Pipelines) add(m *managedPipeline, i int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if i < 0 || i > len(ps.pipelines) {
		i = len(ps.pipelines)
	}
	ps.pipelines = slices.Insert(ps.pipelines, i, m)
	ps.byID[m.cfg.ID] = m
	// Once the process shuts down nothing more is started: Serve may have
	// stopped waiting for the supervisors.
	if ctx := ps.supCtx; ctx != nil && ctx.Err() == nil {
		ps.supervisors.Go(func() { m.sup.Run(ctx) })
	}
}

// shuttingDown reports whether Serve began to shut the pipelines down.
func (ps *Pipelines) shuttingDown() bool {
	ps.mu.RLock()
	defer ps.mu.RUnlock()
	return ps.supCtx != nil && ps.supCtx.Err() != nil
}

// remove unlists m and returns where it was.
func (ps *Pipelines) remove(m *managedPipeline) int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	i := slices.Index(ps.pipelines, m)
	if i >= 0 {
		ps.pipelines = slices.Delete(ps.pipelines, i, i+1)
	}
	if ps.byID[m.cfg.ID] == m {
		delete(ps.byID, m.cfg.ID)
	}
	return i
}

// retire ends m's supervisor for why and waits for it: its run drains
// gracefully, for at most pipelines.graceful-stop-timeout, then it is
// forced. What it handed over is on disk when retire returns.
func (ps *Pipelines) retire(ctx context.Context, m *managedPipeline, why lifecycle.Retirement) {
	ps.retireWithin(ctx, m, why, ps.cfg.Pipelines.GracefulStopTimeout)
}

// retireWithin is retire with its own bound on the graceful stop (0:
// forced at once).
func (ps *Pipelines) retireWithin(ctx context.Context, m *managedPipeline, why lifecycle.Retirement, timeout time.Duration) {
	ps.mu.RLock()
	started := ps.supCtx != nil
	ps.mu.RUnlock()
	if started {
		if err := m.sup.Retire(ctx, why); err != nil {
			ps.log.Warn("could not ask the pipeline to stop", zap.String("pipeline_id", m.cfg.ID), zap.Error(err))
		}
		if timeout <= 0 {
			// Nothing it would write is accepted any more (its lease is
			// gone): no drain.
			m.sup.Kill()
			<-m.sup.Done()
		} else {
			timer := time.NewTimer(timeout)
			select {
			case <-m.sup.Done():
			case <-timer.C:
				ps.log.Warn("graceful stop timed out: force-stopping the pipeline", zap.String("pipeline_id", m.cfg.ID),
					zap.Duration("timeout", timeout))
				m.sup.Kill()
				<-m.sup.Done()
			}
			timer.Stop()
		}
	}
	if err := ps.durable(context.WithoutCancel(ctx)); err != nil {
		if errors.Is(err, store.ErrFenced) {
			ps.log.Info("the pipeline's last state was not written: another instance runs it now", zap.String("pipeline_id", m.cfg.ID))
		} else {
			ps.log.Error("could not write the pipeline's last state", zap.String("pipeline_id", m.cfg.ID), zap.Error(err))
		}
	}
}

// deletePipeline stops a pipeline that is no longer desired and forgets
// it: its state, its dedup entries and its metrics go, its positions stay
// (a pipeline of the same id resumes where it was, as after a restart).
// owned is told of the deletion, whether the pipeline ran here or not.
func (ps *Pipelines) deletePipeline(ctx context.Context, id string, actor lifecycle.Actor, owned ownership.Planned) {
	m := ps.get(id)
	if m == nil {
		owned.Deleted(ctx, id, false, actor)
		return
	}
	ps.log.Info("pipeline deleted: stopping it", zap.String("pipeline_id", id), zap.Stringer("from", *m.origin.Load()))
	ps.retire(ctx, m, lifecycle.Retirement{Reason: lifecycle.StopReasonDeleted, Actor: actor,
		Stopping: "pipeline stopping: it was deleted; source stops reading, in-flight records drain",
		Stopped:  "pipeline stopped: it was deleted"})
	ps.remove(m)
	ps.connectorsDeleted(context.WithoutCancel(ctx), m.cfg)
	ps.forget(context.WithoutCancel(ctx), id, lifecycle.StatusStopped.String(), actor,
		"pipeline deleted; its state is forgotten, its position kept")
	ps.metrics.ForgetPipeline(id)
	ps.notifier.SetPipeline(id, config.PipelineNotifications{})
	owned.Deleted(ctx, id, true, actor)
}

// deleteTimeout bounds a connector's cleanup after its pipeline was
// deleted (dropping a replication slot, say).
const deleteTimeout = 30 * time.Second

// connectorsDeleted gives each connector of a deleted pipeline that can
// clean up after itself the chance to (connector.Deleter), as Conduit does
// with its connectors' LifecycleOnDeleted. A failure is logged: the
// pipeline is deleted either way, and what was left is named.
func (ps *Pipelines) connectorsDeleted(ctx context.Context, p config.Pipeline) {
	for _, c := range p.Connectors {
		cfg := ps.assembler.ConnectorConfig(p, c.ID, c.Settings)
		var (
			conn interface{ Teardown(context.Context) error }
			err  error
		)
		switch c.Type {
		case config.TypeSource:
			conn, err = ps.connectors.NewSource(c.Plugin, cfg)
		case config.TypeDestination:
			conn, err = ps.connectors.NewDestination(c.Plugin, cfg)
		default:
			continue
		}
		if err != nil {
			ps.log.Warn("the connector of a deleted pipeline could not be built to clean up after itself",
				zap.String("pipeline_id", p.ID), zap.String("connector_id", c.ID), zap.Error(err))
			continue
		}
		if d, ok := conn.(connector.Deleter); ok {
			dctx, cancel := context.WithTimeout(ctx, deleteTimeout)
			if err := d.Deleted(dctx); err != nil {
				ps.log.Warn("the connector of a deleted pipeline could not clean up after itself; what it created outside conduit (a replication slot, say) may be left",
					zap.String("pipeline_id", p.ID), zap.String("connector_id", c.ID), zap.String("plugin", c.Plugin), zap.Error(err))
			}
			cancel()
		}
		if err := conn.Teardown(ctx); err != nil {
			ps.log.Debug("tearing down the connector of a deleted pipeline", zap.String("pipeline_id", p.ID),
				zap.String("connector_id", c.ID), zap.Error(err))
		}
	}
}

// forget writes a deleted pipeline's event and removes its state and dedup
// entries.
func (ps *Pipelines) forget(ctx context.Context, id, before string, actor lifecycle.Actor, message string) {
	if _, err := ps.audit.Append(ctx, auditlog.Event{PipelineID: id, Kind: auditlog.KindDeleted, Actor: actor,
		StatusBefore: lifecycle.Status(before), Message: message}); err != nil {
		ps.log.Error("could not write to the audit log", zap.String("pipeline_id", id), zap.Error(err))
	}
	ps.metrics.CountEvent(string(auditlog.KindDeleted))
	if err := ps.states.Delete(ctx, id); err != nil {
		ps.log.Error("could not forget the state of a deleted pipeline", zap.String("pipeline_id", id), zap.Error(err))
	}
	if _, err := ps.dedup.Forget(ctx, id); err != nil {
		ps.log.Error("could not delete the dedup entries of a deleted pipeline", zap.String("pipeline_id", id), zap.Error(err))
	}
}

// updatePipeline drains the running version of a changed pipeline and
// starts the new one in its place, from the same position and with its
// dedup entries: the new run continues where the old one stopped.
func (ps *Pipelines) updatePipeline(ctx context.Context, c reconciler.Change, actor lifecycle.Actor) error {
	old := ps.get(c.ID)
	if old == nil {
		return fmt.Errorf("pipeline %s: not running any more", c.ID)
	}
	fields := strings.Join(c.Fields, ", ")
	ps.log.Info("pipeline configuration changed: draining it to start it again with the new one",
		zap.String("pipeline_id", c.ID), zap.Strings("fields", c.Fields))
	ps.retire(ctx, old, lifecycle.Retirement{Reason: lifecycle.StopReasonUpdated, Actor: actor,
		Stopping: "pipeline stopping: its configuration changed (" + fields + "); in-flight records drain, then it starts again from the same position",
		Stopped:  "pipeline stopped for its update (" + fields + ")"})
	at := ps.remove(old)
	m, err := ps.provision(context.WithoutCancel(ctx), c.Desired.Pipeline, c.Desired.Origin, actor)
	if err != nil {
		// Validated before the old version was stopped; what fails here
		// is the store. The pipeline is down until the next reload.
		return errors.Join(fmt.Errorf("pipeline %s: the new configuration could not be started", c.ID), err)
	}
	// Prometheus counters must not go down across the update.
	m.records.ended = old.records.read()
	m.instance = old.instance
	ps.add(m, at)
	return nil
}

// lastRunFingerprint answers reconciler.PreferLastRun from the persisted
// states: the configuration each pipeline last ran with. A state that
// cannot be read answers nothing (the first definition wins).
func (ps *Pipelines) lastRunFingerprint(ctx context.Context) func(id string) (string, bool) {
	return func(id string) (string, bool) {
		st, ok, err := ps.states.Load(ctx, id)
		if err != nil || !ok || st.ConfigHash == "" {
			return "", false
		}
		return st.ConfigHash, true
	}
}
