package conduit

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// Reload asks the runtime to read the pipeline files again and apply what
// changed (SIGHUP). It does not wait; requests made while one is pending
// are one.
func (r *Runtime) Reload() {
	select {
	case r.reload <- struct{}{}:
	default:
	}
}

// watchFiles starts watching pipelines.path when pipelines.watch is on; a
// path that cannot be watched leaves SIGHUP.
func (r *Runtime) watchFiles(ctx context.Context) {
	if !r.cfg.Pipelines.Watch {
		return
	}
	w, err := reconciler.NewWatcher(r.cfg.Pipelines.Path, r.log)
	if err != nil {
		r.log.Warn("not watching the pipeline files; send SIGHUP to apply changes", zap.String("path", r.cfg.Pipelines.Path), zap.Error(err))
		return
	}
	r.log.Info("watching the pipeline files for changes", zap.String("path", r.cfg.Pipelines.Path))
	r.supervisors.Go(func() { w.Run(ctx, r.Reload) })
}

// betweenPlans runs fn while no plan is applied: ownership moves
// pipelines from one process to another only between plans, so that a
// pipeline is not updated or deleted while it changes hands.
func (r *Runtime) betweenPlans(fn func()) {
	r.reconciling.Lock()
	defer r.reconciling.Unlock()
	fn()
}

// reconcileLoop applies the pipeline files each time a reload is asked
// for, until ctx is done.
func (r *Runtime) reconcileLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.reload:
			r.reconcileFiles(ctx)
		}
	}
}

// reconcileFiles reads the pipeline files and applies the plan; the
// pipelines created through the API stay as they are.
func (r *Runtime) reconcileFiles(ctx context.Context) {
	r.reconciling.Lock()
	defer r.reconciling.Unlock()
	files, apiPipelines, problems, err := r.desiredState(ctx)
	if err != nil {
		r.log.Error("reading the desired pipelines", zap.Error(err))
		return
	}
	plan, err := r.plan(append(files, apiPipelines...), problems)
	if err == nil {
		_, err = r.applyPlan(ctx, plan, lifecycle.ActorConfig)
	}
	if err != nil {
		r.log.Error("applying the pipeline files", zap.Error(err))
		return
	}
	if err := r.audit.Flush(ctx); err != nil && ctx.Err() == nil {
		r.log.Error("could not write to the audit log", zap.Error(err))
	}
	r.mu.RLock()
	invalid := len(r.invalid) // every entry that does not run, duplicates included
	r.mu.RUnlock()
	r.log.Info("pipeline files applied", zap.String("path", r.cfg.Pipelines.Path),
		zap.Int("created", plan.Count(reconciler.Create)), zap.Int("updated", plan.Count(reconciler.Update)),
		zap.Int("deleted", plan.Count(reconciler.Delete)), zap.Int("unchanged", plan.Count(reconciler.Unchanged)),
		zap.Int("invalid", invalid))
}

// running is what the reconciler compares the desired pipelines with.
func (r *Runtime) running() []reconciler.Running {
	return r.ownership.KnownPipelines()
}

// applyPlan makes the running pipelines what plan says (reconciler.Apply
// decides the order and what is invalid; planTarget carries each change
// out) and lists the invalid entries. What a change means for ownership
// (a pipeline another instance of a cluster runs, updates or takes up) is
// the ownership's to say. asked is who asked, for the audit log. The
// caller holds r.reconciling.
func (r *Runtime) applyPlan(ctx context.Context, plan reconciler.Plan, asked lifecycle.Actor) (reconciler.Plan, error) {
	// What planning built and nothing provisioned is of no use after.
	defer r.kept.drop()
	if r.shuttingDown() {
		return plan, fmt.Errorf("not applied: %w", lifecycle.ErrSupervisorDone)
	}
	owned := r.ownership.Plan(ctx, plan)
	entries, err := reconciler.Apply(ctx, plan, planTarget{r: r, owned: owned}, asked, r.log)
	if err != nil {
		return plan, err
	}
	var invalid []api.ConfigError
	for _, e := range entries {
		invalid = append(invalid, configError(e.Pipeline, e.Err))
	}
	r.mu.Lock()
	r.invalid = invalid
	r.mu.Unlock()
	owned.Applied(ctx)
	return plan, nil
}

// planTarget is the runtime as reconciler.Apply changes it, with what the
// plan means for ownership.
type planTarget struct {
	r     *Runtime
	owned ownership.Planned
}

func (t planTarget) AppliesHere(c reconciler.Change) bool { return t.owned.AppliesHere(c) }

func (t planTarget) Create(ctx context.Context, d reconciler.Desired, actor lifecycle.Actor) error {
	m, err := t.r.provision(ctx, d.Pipeline, d.Origin, actor)
	if err != nil {
		return err
	}
	t.r.add(m, -1)
	return nil
}

func (t planTarget) Update(ctx context.Context, c reconciler.Change, actor lifecycle.Actor) error {
	return t.r.updatePipeline(ctx, c, actor)
}

func (t planTarget) Delete(ctx context.Context, id string, actor lifecycle.Actor) {
	t.r.deletePipeline(ctx, id, actor, t.owned)
}

func (t planTarget) Keep(id string, origin reconciler.Origin) {
	if m := t.r.get(id); m != nil {
		m.origin.Store(&origin)
	}
}

// plan validates the desired pipelines - an entry that parses but names
// an unknown plugin or a bad setting is a problem like one that does not
// parse - and computes the plan against what runs.
func (r *Runtime) plan(desired []reconciler.Desired, problems []reconciler.Problem) (reconciler.Plan, error) {
	valid := make([]reconciler.Desired, 0, len(desired))
	for _, d := range desired {
		cfg, errs := r.check(d.Pipeline)
		if len(errs) > 0 {
			for _, err := range errs {
				ce := configError(d.Pipeline, err)
				problems = append(problems, reconciler.Problem{PipelineID: d.Pipeline.ID, File: ce.File, Line: ce.Line, Err: err})
			}
			continue
		}
		// Provisioning runs this build (see keptBuilds).
		r.kept.keep(d.Pipeline, cfg)
		valid = append(valid, d)
	}
	return reconciler.Make(r.running(), valid, problems)
}

// known are the pipelines this process supervises, in the order of the
// files: all it knows when it runs alone (ownership.Solo).
func (r *Runtime) known() []reconciler.Running {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]reconciler.Running, len(r.pipelines))
	for i, m := range r.pipelines {
		out[i] = reconciler.Running{Pipeline: m.cfg, Origin: *m.origin.Load(), Fingerprint: m.fingerprint}
	}
	return out
}

func (r *Runtime) get(id string) *managedPipeline {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

// add lists m, at index i of the pipelines (-1: at the end), and starts
// its supervisor when Run already started the others.
func (r *Runtime) add(m *managedPipeline, i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i < 0 || i > len(r.pipelines) {
		i = len(r.pipelines)
	}
	r.pipelines = slices.Insert(r.pipelines, i, m)
	r.byID[m.cfg.ID] = m
	// Once the process shuts down nothing more is started: Run may have
	// stopped waiting for the supervisors.
	if ctx := r.supCtx; ctx != nil && ctx.Err() == nil {
		r.supervisors.Go(func() { m.sup.Run(ctx) })
	}
}

// shuttingDown reports whether Run began to shut the pipelines down.
func (r *Runtime) shuttingDown() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.supCtx != nil && r.supCtx.Err() != nil
}

// remove unlists m and returns where it was.
func (r *Runtime) remove(m *managedPipeline) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := slices.Index(r.pipelines, m)
	if i >= 0 {
		r.pipelines = slices.Delete(r.pipelines, i, i+1)
	}
	if r.byID[m.cfg.ID] == m {
		delete(r.byID, m.cfg.ID)
	}
	return i
}

// retire ends m's supervisor for why and waits for it: its run drains
// gracefully, for at most pipelines.graceful-stop-timeout, then it is
// forced. What it handed over is on disk when retire returns.
func (r *Runtime) retire(ctx context.Context, m *managedPipeline, why lifecycle.Retirement) {
	r.retireWithin(ctx, m, why, r.cfg.Pipelines.GracefulStopTimeout)
}

// retireWithin is retire with its own bound on the graceful stop (0:
// forced at once).
func (r *Runtime) retireWithin(ctx context.Context, m *managedPipeline, why lifecycle.Retirement, timeout time.Duration) {
	r.mu.RLock()
	started := r.supCtx != nil
	r.mu.RUnlock()
	if started {
		if err := m.sup.Retire(ctx, why); err != nil {
			r.log.Warn("could not ask the pipeline to stop", zap.String("pipeline_id", m.cfg.ID), zap.Error(err))
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
				r.log.Warn("graceful stop timed out: force-stopping the pipeline", zap.String("pipeline_id", m.cfg.ID),
					zap.Duration("timeout", timeout))
				m.sup.Kill()
				<-m.sup.Done()
			}
			timer.Stop()
		}
	}
	if err := r.durable(context.WithoutCancel(ctx)); err != nil {
		if errors.Is(err, store.ErrFenced) {
			r.log.Info("the pipeline's last state was not written: another instance runs it now", zap.String("pipeline_id", m.cfg.ID))
		} else {
			r.log.Error("could not write the pipeline's last state", zap.String("pipeline_id", m.cfg.ID), zap.Error(err))
		}
	}
}

// deletePipeline stops a pipeline that is no longer desired and forgets
// it: its state, its dedup entries and its metrics go, its positions stay
// (a pipeline of the same id resumes where it was, as after a restart).
// owned is told of the deletion, whether the pipeline ran here or not.
func (r *Runtime) deletePipeline(ctx context.Context, id string, actor lifecycle.Actor, owned ownership.Planned) {
	m := r.get(id)
	if m == nil {
		owned.Deleted(ctx, id, false, actor)
		return
	}
	r.log.Info("pipeline deleted: stopping it", zap.String("pipeline_id", id), zap.Stringer("from", *m.origin.Load()))
	r.retire(ctx, m, lifecycle.Retirement{Reason: lifecycle.StopReasonDeleted, Actor: actor,
		Stopping: "pipeline stopping: it was deleted; source stops reading, in-flight records drain",
		Stopped:  "pipeline stopped: it was deleted"})
	r.remove(m)
	r.connectorsDeleted(context.WithoutCancel(ctx), m.cfg)
	r.forget(context.WithoutCancel(ctx), id, lifecycle.StatusStopped.String(), actor,
		"pipeline deleted; its state is forgotten, its position kept")
	r.metrics.ForgetPipeline(id)
	r.notifier.SetPipeline(id, config.PipelineNotifications{})
	owned.Deleted(ctx, id, true, actor)
}

// deleteTimeout bounds a connector's cleanup after its pipeline was
// deleted (dropping a replication slot, say).
const deleteTimeout = 30 * time.Second

// connectorsDeleted gives each connector of a deleted pipeline that can
// clean up after itself the chance to (connector.Deleter), as Conduit does
// with its connectors' LifecycleOnDeleted. A failure is logged: the
// pipeline is deleted either way, and what was left is named.
func (r *Runtime) connectorsDeleted(ctx context.Context, p config.Pipeline) {
	for _, c := range p.Connectors {
		cfg := r.assembler.ConnectorConfig(p, c.ID, c.Settings)
		var (
			conn interface{ Teardown(context.Context) error }
			err  error
		)
		switch c.Type {
		case config.TypeSource:
			conn, err = r.connectors.NewSource(c.Plugin, cfg)
		case config.TypeDestination:
			conn, err = r.connectors.NewDestination(c.Plugin, cfg)
		default:
			continue
		}
		if err != nil {
			r.log.Warn("the connector of a deleted pipeline could not be built to clean up after itself",
				zap.String("pipeline_id", p.ID), zap.String("connector_id", c.ID), zap.Error(err))
			continue
		}
		if d, ok := conn.(connector.Deleter); ok {
			dctx, cancel := context.WithTimeout(ctx, deleteTimeout)
			if err := d.Deleted(dctx); err != nil {
				r.log.Warn("the connector of a deleted pipeline could not clean up after itself; what it created outside conduit (a replication slot, say) may be left",
					zap.String("pipeline_id", p.ID), zap.String("connector_id", c.ID), zap.String("plugin", c.Plugin), zap.Error(err))
			}
			cancel()
		}
		if err := conn.Teardown(ctx); err != nil {
			r.log.Debug("tearing down the connector of a deleted pipeline", zap.String("pipeline_id", p.ID),
				zap.String("connector_id", c.ID), zap.Error(err))
		}
	}
}

// forget writes a deleted pipeline's event and removes its state and dedup
// entries.
func (r *Runtime) forget(ctx context.Context, id, before string, actor lifecycle.Actor, message string) {
	if _, err := r.audit.Append(ctx, auditlog.Event{PipelineID: id, Kind: auditlog.KindDeleted, Actor: actor,
		StatusBefore: lifecycle.Status(before), Message: message}); err != nil {
		r.log.Error("could not write to the audit log", zap.String("pipeline_id", id), zap.Error(err))
	}
	r.metrics.CountEvent(string(auditlog.KindDeleted))
	if err := r.states.Delete(ctx, id); err != nil {
		r.log.Error("could not forget the state of a deleted pipeline", zap.String("pipeline_id", id), zap.Error(err))
	}
	if _, err := r.dedup.Forget(ctx, id); err != nil {
		r.log.Error("could not delete the dedup entries of a deleted pipeline", zap.String("pipeline_id", id), zap.Error(err))
	}
}

// updatePipeline drains the running version of a changed pipeline and
// starts the new one in its place, from the same position and with its
// dedup entries: the new run continues where the old one stopped.
func (r *Runtime) updatePipeline(ctx context.Context, c reconciler.Change, actor lifecycle.Actor) error {
	old := r.get(c.ID)
	if old == nil {
		return fmt.Errorf("pipeline %s: not running any more", c.ID)
	}
	fields := strings.Join(c.Fields, ", ")
	r.log.Info("pipeline configuration changed: draining it to start it again with the new one",
		zap.String("pipeline_id", c.ID), zap.Strings("fields", c.Fields))
	r.retire(ctx, old, lifecycle.Retirement{Reason: lifecycle.StopReasonUpdated, Actor: actor,
		Stopping: "pipeline stopping: its configuration changed (" + fields + "); in-flight records drain, then it starts again from the same position",
		Stopped:  "pipeline stopped for its update (" + fields + ")"})
	at := r.remove(old)
	m, err := r.provision(context.WithoutCancel(ctx), c.Desired.Pipeline, c.Desired.Origin, actor)
	if err != nil {
		// Validated before the old version was stopped; what fails here
		// is the store. The pipeline is down until the next reload.
		return errors.Join(fmt.Errorf("pipeline %s: the new configuration could not be started", c.ID), err)
	}
	// Prometheus counters must not go down across the update.
	m.records.ended = old.records.read()
	m.instance = old.instance
	r.add(m, at)
	return nil
}

// lastRunFingerprint answers reconciler.PreferLastRun from the persisted
// states: the configuration each pipeline last ran with. A state that
// cannot be read answers nothing (the first definition wins).
func (r *Runtime) lastRunFingerprint(ctx context.Context) func(id string) (string, bool) {
	return func(id string) (string, bool) {
		st, ok, err := r.states.Load(ctx, id)
		if err != nil || !ok || st.ConfigHash == "" {
			return "", false
		}
		return st.ConfigHash, true
	}
}

// consoleURL is where a browser on this machine opens the web console of
// the API listening at addr: an address that listens on every interface
// (0.0.0.0, ::) is reached as localhost.
func consoleURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr + api.ConsolePath
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + api.ConsolePath
}

// runtimeHealth answers the probes.
type runtimeHealth struct{ r *Runtime }

var _ api.Health = runtimeHealth{}

// Live reads the process marker: the store answers. A database server
// that cannot be reached does not make the process unhealthy - a restart
// of the process would not bring it back, and every instance would be
// restarted at once - it makes it not ready.
func (h runtimeHealth) Live(ctx context.Context) error {
	_, err := h.r.db.Get(ctx, []byte(store.KeyProcess))
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("the store does not answer: %w", err)
	}
	return nil
}

// Ready is true while Run supervises the pipelines and the database can
// be reached, unless a pipeline is degraded and
// api.readyz.fail-on-degraded is on.
func (h runtimeHealth) Ready(ctx context.Context) api.Readiness {
	r := h.r
	var degraded []string
	r.mu.RLock()
	for _, m := range r.pipelines {
		if m.metrics.Status() == lifecycle.StatusDegraded {
			degraded = append(degraded, m.cfg.ID)
		}
	}
	r.mu.RUnlock()
	rd := api.Readiness{Ready: r.ready.Load(), Degraded: degraded}
	_, err := r.db.Get(ctx, []byte(store.KeyProcess))
	switch {
	case !rd.Ready:
		rd.Reason = "starting or shutting down"
	case errors.Is(err, store.ErrUnavailable):
		rd.Ready, rd.Reason = false, err.Error()
	case len(degraded) > 0 && r.cfg.API.Readyz.FailOnDegraded:
		rd.Ready, rd.Reason = false, "pipelines are degraded (api.readyz.fail-on-degraded)"
	}
	return rd
}
