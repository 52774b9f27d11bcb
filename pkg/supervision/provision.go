package supervision

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// ProvisionAll loads the pipeline files and provisions every valid
// pipeline; the invalid ones are logged and listed for the API.
func (ps *Pipelines) ProvisionAll(ctx context.Context) error {
	loaded, errs := config.LoadPipelines(ps.cfg.Pipelines.Path)
	if err := ps.degradedAtStartup(ctx, loaded); err != nil {
		ps.log.Error("exiting because a pipeline is degraded (pipelines.exit-on-degraded)", zap.Error(err))
		return err
	}
	files, problems := reconciler.FromFiles(loaded, errs)
	stored, contents, err := ps.loadAPIPipelines(ctx)
	if err != nil {
		return err
	}
	apiPipelines, apiProblems := apiDesired(stored, contents)
	desired, problems := reconciler.PreferLastRun(append(files, apiPipelines...), append(problems, apiProblems...), ps.lastRunFingerprint(ctx))
	plan, err := ps.plan(desired, problems)
	if err != nil {
		return err
	}
	if _, err := ps.applyPlan(ctx, plan, lifecycle.ActorConfig); err != nil {
		return err
	}
	if err := ps.audit.Flush(ctx); err != nil {
		return err
	}
	ps.log.Info("pipelines loaded", zap.String("path", ps.cfg.Pipelines.Path),
		zap.Int("valid", len(ps.ownership.KnownPipelines())), zap.Int("invalid", len(ps.invalid)))
	if !ps.ownership.Alone() {
		// A pipeline missing from this instance's files may run on
		// another: deletions are seen while the instances run.
		return nil
	}
	for _, d := range apiPipelines {
		loaded = append(loaded, d.Pipeline)
	}
	for _, p := range apiProblems {
		errs = append(errs, &config.PipelineError{PipelineID: p.PipelineID, File: p.File, Err: p.Err})
	}
	ps.forgetDeleted(ctx, loaded, errs)
	return nil
}

// policyOf resolves p's recovery policy and compiles it, and says when
// delays of it are below the floor.
func (ps *Pipelines) policyOf(p config.Pipeline) (config.ErrorRecovery, lifecycle.Policy, error) {
	recovery, err := p.ResolveErrorRecovery(ps.cfg.Pipelines.ErrorRecovery)
	if err != nil {
		return config.ErrorRecovery{}, lifecycle.Policy{}, err
	}
	policy, err := ps.policies.From(recovery)
	if err != nil {
		return config.ErrorRecovery{}, lifecycle.Policy{}, p.FieldError("error-recovery", err)
	}
	// Delays below the floor load and wait the floor; say so.
	if w := config.FloorWarning(p.ErrorRecovery.BelowFloor()); w != "" {
		ps.log.Warn("pipeline error-recovery: "+w, zap.String("pipeline_id", p.ID), zap.String("file", p.File))
	}
	for _, rule := range p.ErrorRecovery.Rules {
		if w := config.FloorWarning(rule.Policy.BelowFloor()); w != "" {
			ps.log.Warn(fmt.Sprintf("recovery rule %q: %s", rule.Name, w), zap.String("pipeline_id", p.ID), zap.String("file", fmt.Sprintf("%s:%d", rule.File, rule.Line)))
		}
	}
	return recovery, policy, nil
}

// provision validates p and creates its supervisor from the persisted
// state; Serve, or the reconciler once Serve started, starts it.
func (ps *Pipelines) provision(ctx context.Context, p config.Pipeline, origin reconciler.Origin, actor lifecycle.Actor) (*managedPipeline, error) {
	return ps.provisionAfter(ctx, p, origin, actor, lifecycle.Takeover{}, false)
}

// provisionAfter is provision of a pipeline an instance of a cluster
// takes over (lifecycle.Config.Takeover).
// takingUp: an instance of a cluster takes the pipeline up; a state it
// cannot read now fails the take-up (the lease is given back and taken
// up again later) rather than start from the file's status.
func (ps *Pipelines) provisionAfter(ctx context.Context, p config.Pipeline, origin reconciler.Origin, actor lifecycle.Actor, takeover lifecycle.Takeover, takingUp bool) (*managedPipeline, error) {
	recovery, policy, err := ps.policyOf(p)
	if err != nil {
		return nil, err
	}
	if err := p.Notifications.CheckTargets(ps.cfg.Notifications.Targets); err != nil {
		var fe *config.FieldError
		if errors.As(err, &fe) {
			return nil, p.FieldError(fe.Field, fe.Err)
		}
		return nil, err
	}
	for _, c := range policy.ManagedClashes() {
		ps.log.Warn("a managed recovery rule does not apply to this pipeline, whose error-recovery clashes with it: "+c.String(),
			zap.String("pipeline_id", p.ID), zap.String("rule", c.Rule))
	}
	hash, err := reconciler.Fingerprint(p)
	if err != nil {
		return nil, err
	}
	first, err := ps.build(p, hash)
	if err != nil {
		return nil, err
	}
	ps.tidyOrphanedDedup(ctx, p)
	if !ps.cfg.Dedup.Enabled {
		if n, err := ps.dedup.Forget(ctx, p.ID); err != nil {
			return nil, fmt.Errorf("dedup is off: deleting the entries of earlier runs: %w", err)
		} else if n > 0 {
			ps.log.Info("dedup is off: deleted the entries earlier runs left; records they covered may be written again",
				zap.String("pipeline_id", p.ID), zap.Int("entries", n))
		}
	}
	initial, from, err := ps.initialState(ctx, p, hash, takingUp)
	if err != nil {
		return nil, fmt.Errorf("reading the pipeline's state: %w", err)
	}
	m := &managedPipeline{cfg: p, recovery: recovery, policy: policy, durable: ps.durable, fingerprint: hash}
	m.first.Store(&first)
	m.origin.Store(&origin)
	m.sup, err = lifecycle.New(lifecycle.Config{
		PipelineID:     p.ID,
		Policy:         policy,
		PluginOf:       m.pluginOf,
		DependencyOf:   m.dependencyOf,
		Breakers:       ps.breakers,
		NewRun:         func(hooks lifecycle.RunHooks) (lifecycle.Run, error) { return ps.newRun(m, hooks) },
		States:         pipelineJournal{ps: ps, m: m},
		Clock:          ps.clock,
		Restarts:       ps.restarts,
		Logger:         ps.log,
		Observer:       lifecycle.ObserverFunc(func(e auditlog.Event) { ps.onEvent(m, e) }),
		ConfigHash:     hash,
		Persisted:      from.persisted,
		ProcessCrashed: ps.crashed,
		Takeover:       takeover,
		AfterShutdown:  ps.ownership.AfterShutdown(),
		StopTimeout:    ps.cfg.Pipelines.GracefulStopTimeout,
		CrashLoopAfter: ps.cfg.Pipelines.CrashLoopAfter,
	}, initial)
	if err != nil {
		return nil, err
	}
	// Registered only for a pipeline that is provisioned; its supervisor
	// reports to it once Serve starts.
	// The status the supervisor starts in: a recovery that a restart of
	// conduit interrupted goes on, and so does the time it has taken.
	m.metrics = ps.metrics.Pipeline(p.ID, initial.StartStatus(), statusSince(initial, ps.clock.Now()))
	ps.metrics.DeadLetterRules(p.ID, deadLetterRules(policy))
	m.status = initial.Status
	// Before its first event: the pipeline file's notifications block
	// narrows who hears of it.
	ps.notifier.SetPipeline(p.ID, p.Notifications)
	if !from.persisted {
		m.status = ps.record(p.ID, from, hash, origin, actor)
	}
	return m, nil
}

// tidyOrphanedDedup says when dedup entries belong to a destination the
// pipeline no longer has (renamed or removed): nothing will consume them,
// and they expire after dedup.ttl. Such a destination's mark, which never
// expires, is deleted.
func (ps *Pipelines) tidyOrphanedDedup(ctx context.Context, p config.Pipeline) {
	dests, err := ps.dedup.Destinations(ctx, p.ID)
	if err != nil || len(dests) == 0 {
		return
	}
	have := map[string]bool{}
	for _, c := range p.Destinations() {
		have[c.ID] = true
	}
	var gone []string
	for _, d := range dests {
		if !have[d] {
			gone = append(gone, d)
		}
	}
	if len(gone) == 0 {
		return
	}
	if err := ps.dedup.DropMarks(ctx, p.ID, gone...); err != nil {
		ps.log.Warn("could not delete the dedup marks of destinations this pipeline no longer has",
			zap.String("pipeline_id", p.ID), zap.Strings("destinations", gone), zap.Error(err))
		return
	}
	if left, err := ps.dedup.Destinations(ctx, p.ID); err == nil {
		for _, d := range left {
			if !have[d] {
				ps.log.Warn("dedup entries of a destination this pipeline no longer has (renamed or removed) will expire unused",
					zap.String("pipeline_id", p.ID), zap.String("destination", d), zap.Duration("dedup.ttl", ps.cfg.Dedup.TTL))
			}
		}
	}
}

// forgetDeleted finds pipelines that ran before but are in no pipeline file
// any more: it writes their deleted event and forgets their state (their
// positions stay, so putting the file back resumes where they were). It
// does nothing when a file could not be read at all, since the pipelines
// in it cannot be told from deleted ones.
func (ps *Pipelines) forgetDeleted(ctx context.Context, loaded []config.Pipeline, errs []error) {
	known := map[string]bool{}
	for _, p := range loaded {
		known[p.ID] = true
	}
	for _, err := range errs {
		var pe *config.PipelineError
		if !errors.As(err, &pe) || pe.PipelineID == "" {
			ps.log.Warn("a pipeline file could not be read, so pipelines missing from the files are not treated as deleted")
			return
		}
		known[pe.PipelineID] = true
	}
	ids, err := ps.states.IDs(ctx)
	if err != nil {
		ps.log.Error("could not list pipeline states", zap.Error(err))
		return
	}
	gone := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return known[id] })
	if len(gone) > 0 && !ps.cfg.Pipelines.AllowDeleteAll && !definesAny(loaded, errs, ps.cfg.Pipelines.Path) {
		// As while running (reconciler.HoldMassDeletion): files that
		// define nothing any more forget nothing at once.
		held := &reconciler.DeletionHeldError{Path: ps.cfg.Pipelines.Path, IDs: gone, Stored: true}
		ps.log.Error("pipeline states not forgotten: the pipeline files define no pipeline any more", zap.String("path", held.Path),
			zap.Strings("kept", gone), zap.Error(held))
		ps.mu.Lock()
		ps.invalid = append(ps.invalid, api.ConfigError{File: held.Path, Err: held})
		ps.mu.Unlock()
		return
	}
	for _, id := range gone {
		before := ""
		if st, ok, err := ps.states.Load(ctx, id); err == nil && ok {
			before = st.Status.String()
		}
		ps.log.Info("pipeline is in no pipeline file any more: deleted", zap.String("pipeline_id", id))
		ps.forget(ctx, id, before, lifecycle.ActorConfig, "pipeline removed from the pipeline files; its state is forgotten, its position kept")
	}
}

// definesAny reports whether the pipeline files under root define a
// pipeline, valid or not.
func definesAny(loaded []config.Pipeline, errs []error, root string) bool {
	under := func(file string) bool {
		root, file := filepath.Clean(root), filepath.Clean(file)
		return file == root || strings.HasPrefix(file, root+string(filepath.Separator))
	}
	for _, p := range loaded {
		if p.File != "" && under(p.File) {
			return true
		}
	}
	for _, err := range errs {
		var pe *config.PipelineError
		if errors.As(err, &pe) && pe.File != "" && under(pe.File) {
			return true
		}
	}
	return false
}

// configError describes an invalid configuration for the API: where it is
// and what is wrong, by pipeline when it names one (p, or the error's).
func configError(p config.Pipeline, err error) api.ConfigError {
	ce := api.ConfigError{PipelineID: p.ID, File: p.File, Line: p.Line, Err: err}
	var pe *config.PipelineError
	if errors.As(err, &pe) {
		ce.File, ce.Line = pe.File, pe.Line
		if pe.PipelineID != "" {
			ce.PipelineID = pe.PipelineID
		}
	}
	return ce
}

// origin is where a pipeline's initial state comes from.
type origin struct {
	// persisted: the state of an earlier process for the same
	// configuration, taken up again (no provisioning events).
	persisted bool
	// fresh: no state at all, a new pipeline.
	fresh bool
	// previous is the status persisted for an earlier configuration, the
	// status before the provisioned event ("" when unknown).
	previous lifecycle.Status
}

// record writes the events of provisioning to the audit log: created the
// first time a pipeline is seen, provisioned when its configuration is new
// or changed; a pipeline taken up unchanged gets neither. Both leave it
// stopped: the supervisor's first event starts it from there. It returns
// that status.
func (ps *Pipelines) record(id string, o origin, hash string, where reconciler.Origin, actor lifecycle.Actor) lifecycle.Status {
	var events []auditlog.Event
	previous := o.previous
	if o.fresh {
		message := "pipeline created from its configuration file"
		if where.API() {
			message = "pipeline created through the API"
		}
		events = append(events, auditlog.Event{PipelineID: id, Kind: auditlog.KindCreated, Actor: actor,
			StatusAfter: lifecycle.StatusStopped, Message: message})
		previous = lifecycle.StatusStopped
	}
	message := "pipeline configuration validated and built (" + hash + ")"
	if !o.fresh {
		message = "pipeline configuration changed: validated and built (" + hash + "); it starts afresh from its file's status"
	}
	events = append(events, auditlog.Event{PipelineID: id, Kind: auditlog.KindProvisioned, Actor: actor,
		StatusBefore: previous, StatusAfter: lifecycle.StatusStopped, Message: message})
	for _, e := range events {
		// Queued, not waited for one by one: New flushes once for every
		// pipeline, so that loading ten thousand costs a few syncs.
		if err := ps.audit.Record(e); err != nil {
			ps.log.Error("could not write to the audit log", zap.String("pipeline_id", id), zap.Error(err))
		}
		ps.metrics.CountEvent(string(e.Kind))
	}
	return lifecycle.StatusStopped
}

// initialState decides where a pipeline starts: its persisted state when
// there is one for the same configuration (so a recovering pipeline waits
// for its persisted attempt time and a degraded one stays degraded),
// otherwise the status its file asks for. A changed configuration is
// provisioned afresh: whoever edited the file has acted on the pipeline.
// A read cut off by a shutdown is an error; so is, when strict (a take-up
// in a cluster, which is tried again), a state the store could not read
// now (unavailable): starting from the file's status would undo a stop, a
// degrade or a backoff that is only not readable right now.
func (ps *Pipelines) initialState(ctx context.Context, p config.Pipeline, hash string, strict bool) (lifecycle.State, origin, error) {
	fromFile := lifecycle.State{Status: lifecycle.StatusRunning}
	if p.Status == config.StatusStopped {
		fromFile.Status = lifecycle.StatusStopped
	}
	st, ok, err := ps.states.Load(ctx, p.ID)
	switch {
	case err != nil && (ctx.Err() != nil || strict && !errors.Is(err, lifecycle.ErrStateUnreadable)):
		return lifecycle.State{}, origin{}, err
	case err != nil:
		// A damaged state must not keep a pipeline from running; the
		// file's status is the safe reading.
		ps.log.Error("persisted pipeline state is unreadable; starting from the pipeline file's status",
			zap.String("pipeline_id", p.ID), zap.Error(err))
		return fromFile, origin{}, nil
	case !ok:
		fromFile.CreatedAt = ps.clock.Now().UTC()
		return fromFile, origin{fresh: true}, nil
	case st.ConfigHash != hash:
		ps.log.Info("pipeline configuration changed since the last run; starting from the file's status",
			zap.String("pipeline_id", p.ID), zap.Stringer("previous_status", st.Status), zap.String("status", p.Status))
		fromFile.LastError, fromFile.Episode, fromFile.CreatedAt = st.LastError, st.Episode, st.CreatedAt
		return fromFile, origin{previous: st.Status}, nil
	default:
		return st, origin{persisted: true}, nil
	}
}

// degradedAtStartup refuses to run, with exit-on-degraded on, while a
// pipeline is still degraded from an earlier run: a service manager that
// restarts conduit must not get a process that runs on with it degraded.
// It is decided before any pipeline is provisioned, so a refused start
// writes nothing. A force stop is an operator's act, not a failure, and
// does not count.
func (ps *Pipelines) degradedAtStartup(ctx context.Context, loaded []config.Pipeline) error {
	if !ps.cfg.Pipelines.ExitOnDegraded {
		return nil
	}
	var ids []string
	for _, p := range loaded {
		st, ok, err := ps.states.Load(ctx, p.ID)
		if err != nil || !ok || st.Status != lifecycle.StatusDegraded || st.DegradedReason == lifecycle.ReasonForceStop {
			continue
		}
		if hash, err := reconciler.Fingerprint(p); err == nil && hash == st.ConfigHash {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return fmt.Errorf("%w: pipeline %s was degraded when conduit started; fix the cause, then change its pipeline file (a changed configuration starts afresh) or run once with --pipelines.exit-on-degraded=false and `conduit pipelines start <id>`",
		ErrPipelineDegraded, strings.Join(ids, ", "))
}
