package instance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/cluster"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// clusterPipelines is api.Pipelines as one instance of a cluster shows
// them: every pipeline of the cluster, each run here or elsewhere.
type clusterPipelines struct {
	api.Pipelines
	f *fleet
}

var _ api.Pipelines = clusterPipelines{}

// List lists every pipeline the instance knows, in the order of the
// files: its own under their supervisors, the others' as the database has
// them; then those only other instances' files define.
func (a clusterPipelines) List() []api.Supervised {
	f := a.f
	f.refreshHolders(context.Background())
	known := append(f.KnownPipelines(), f.foreignPipelines()...)
	out := make([]api.Supervised, 0, len(known))
	for _, k := range known {
		out = append(out, a.get(k))
	}
	return out
}

func (a clusterPipelines) Get(id string) (api.Supervised, bool) {
	f := a.f
	for _, k := range append(f.KnownPipelines(), f.foreignPipelines()...) {
		if k.Pipeline.ID == id {
			f.refreshHolders(context.Background())
			return a.get(k), true
		}
	}
	return nil, false
}

func (a clusterPipelines) get(k reconciler.Running) api.Supervised {
	if p, retiring := a.f.host.Supervised(k.Pipeline.ID); p != nil && !retiring {
		return clusterLocal{Supervised: p, k: k}
	}
	// Not run here, or just handed over (its supervisor ended, and it is
	// about to be removed): as the database has it.
	return remotePipeline{f: a.f, k: k, holder: a.f.holder(k.Pipeline.ID)}
}

// remotePipeline is a pipeline another instance runs (or none, for a
// moment, while it moves): its state is what that instance last wrote,
// and start and stop are sent to it through the database.
type remotePipeline struct {
	f      *fleet
	k      reconciler.Running
	holder cluster.Holder
}

var _ api.Supervised = remotePipeline{}

func (p remotePipeline) Info() api.PipelineInfo {
	cfg := p.k.Pipeline
	info := api.PipelineInfo{ID: cfg.ID, Name: cfg.Name, Description: cfg.Description, File: p.k.Origin.File, Line: p.k.Origin.Line,
		Definition: p.k.Origin.Definition}
	// A pipeline defined in another instance's files only has no
	// configuration here: its policy is that instance's to tell.
	if len(cfg.Connectors) > 0 {
		if recovery, err := cfg.ResolveErrorRecovery(p.f.opts.Recovery); err == nil {
			info.Recovery = recovery
		}
	}
	if p.holder.Live {
		info.Instance = p.holder.Instance
	}
	return info
}

// State is the state the pipeline's instance saved last; a pipeline no
// instance took up yet is stopped.
func (p remotePipeline) State(ctx context.Context) (lifecycle.State, error) {
	st, ok, err := p.f.host.SavedState(ctx, p.k.Pipeline.ID)
	if err != nil {
		return lifecycle.State{}, err
	}
	if !ok {
		return lifecycle.State{Status: lifecycle.StatusStopped}, nil
	}
	return moving(st), nil
}

// moving is a pipeline's state as a cluster shows it: one handed over,
// or left by an instance that shut down, moves to the next instance,
// which takes up the status it had - that status is shown, so that a
// deploy that moves every pipeline is not a wave of stopped ones.
func moving(st lifecycle.State) lifecycle.State {
	if st.Status == lifecycle.StatusStopped && st.ResumeStatus != "" &&
		(st.StopReason == lifecycle.StopReasonHandover || st.StopReason == lifecycle.StopReasonShutdown) {
		st.Status = st.ResumeStatus
	}
	return st
}

// clusterLocal is a pipeline this instance runs, as the cluster shows it
// (see moving).
type clusterLocal struct {
	api.Supervised
	k reconciler.Running
}

func (c clusterLocal) State(ctx context.Context) (lifecycle.State, error) {
	st, err := c.Supervised.State(ctx)
	return moving(st), err
}

// Config implements api.Configured: the configuration the pipeline runs
// with here.
func (c clusterLocal) Config() config.Pipeline {
	if cfg, ok := c.Supervised.(api.Configured); ok {
		return cfg.Config()
	}
	return c.k.Pipeline
}

// Config implements api.Configured: the configuration the database has.
func (p remotePipeline) Config() config.Pipeline { return p.k.Pipeline }

func (p remotePipeline) Start(ctx context.Context) error {
	return p.send(ctx, cluster.ActionStart)
}

func (p remotePipeline) Stop(ctx context.Context, force bool) error {
	if force {
		return p.send(ctx, cluster.ActionForceStop)
	}
	return p.send(ctx, cluster.ActionStop)
}

// send asks the pipeline's instance to act and waits for its answer: a
// graceful stop waits for the drain, as it does on the instance itself.
// When that instance stops holding the lease before it answers (it died,
// or was paused past its lease), the command goes to the instance that
// takes the pipeline over, once one has; this one, when it is the one.
func (p remotePipeline) send(ctx context.Context, action string) error {
	if !p.holder.Live {
		if p.f.state().orphaned(p.k.Pipeline.ID) {
			return refusal{&cluster.RefusedError{Instance: p.holder.Instance, Message: fmt.Sprintf(
				"pipeline %s runs nowhere: no live instance has its pipeline file (instance %s ran it last); start an instance that has it",
				p.k.Pipeline.ID, p.holder.Instance)}}
		}
		return fmt.Errorf("pipeline %s: %w", p.k.Pipeline.ID, api.ErrPipelineMoving)
	}
	id := p.k.Pipeline.ID
	// A failover takes up to two TTLs; the answer then as long as on the
	// instance itself.
	ctx, cancel := context.WithTimeout(ctx, p.f.opts.GracefulStopTimeout+3*p.f.ttl)
	defer cancel()
	instance := p.holder.Instance
	for {
		err := cluster.Send(ctx, p.f.pool, instance, id, action)
		var refused *cluster.RefusedError
		switch {
		case errors.As(err, &refused):
			return refusal{refused}
		case errors.Is(err, cluster.ErrNotAnswered):
			return withdrawn{err}
		case !errors.Is(err, cluster.ErrOwnerChanged):
			return err
		}
		next, err := p.f.nextHolder(ctx, id)
		if err != nil {
			return withdrawn{fmt.Errorf("pipeline %s: instance %s stopped running it before it answered, and %w", id, instance, err)}
		}
		if next == p.f.member.ID() {
			m, _ := p.f.host.Supervised(id)
			if m == nil {
				return fmt.Errorf("pipeline %s: %w", id, api.ErrPipelineMoving)
			}
			if action == cluster.ActionStart {
				return m.Start(ctx)
			}
			return m.Stop(ctx, action == cluster.ActionForceStop)
		}
		instance = next
	}
}

// withdrawn is a command no instance answered in time, withdrawn so that
// it will not be carried out later: the API says it timed out.
type withdrawn struct{ error }

func (w withdrawn) Unwrap() error { return w.error }

func (w withdrawn) Is(target error) bool { return target == api.ErrNotCarriedOut }

// refusal is another instance's refusal of a start or stop, which the
// API answers as it answers its own (failed precondition).
type refusal struct{ *cluster.RefusedError }

func (r refusal) Is(target error) bool { return target == lifecycle.ErrInvalidTransition }

// clusterEvents is the audit log as one instance of a cluster shows it:
// the events of pipelines other instances run are read from the database
// before they are listed, and followed through their notifications.
type clusterEvents struct {
	log *auditlog.Log
	f   *fleet
}

var _ api.Events = clusterEvents{}

func (e clusterEvents) sync(ctx context.Context, pipelineID string) error {
	if e.f.holds(pipelineID) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := e.log.Sync(ctx, pipelineID)
	return err
}

// EventsOfOthers reads the events that other instances wrote of the
// pipelines this one does not run, of the given ids and every pipeline
// the cluster knows, and returns all those ids, sorted.
func (f *fleet) EventsOfOthers(ctx context.Context, ids []string) ([]string, error) {
	all := slices.Clone(ids)
	for _, k := range append(f.KnownPipelines(), f.foreignPipelines()...) {
		all = append(all, k.Pipeline.ID)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	events := clusterEvents{log: f.host.Audit(), f: f}
	for _, id := range all {
		if err := events.sync(ctx, id); err != nil {
			return nil, err
		}
	}
	return all, nil
}

func (e clusterEvents) List(ctx context.Context, pipelineID string, q auditlog.Query) ([]auditlog.Event, error) {
	if err := e.sync(ctx, pipelineID); err != nil {
		return nil, err
	}
	return e.log.List(ctx, pipelineID, q)
}

func (e clusterEvents) Watch(ctx context.Context, pipelineID string, afterSequence uint64, kinds []auditlog.Kind) (*auditlog.Watcher, error) {
	// Counted as watched first, so that an event written between the
	// read below and the watch's start is read when it is notified.
	e.f.watch(ctx, pipelineID)
	if err := e.sync(ctx, pipelineID); err != nil {
		return nil, err
	}
	return e.log.Watch(ctx, pipelineID, afterSequence, kinds)
}

func (e clusterEvents) WatchEvery(ctx context.Context, kinds []auditlog.Kind) (*auditlog.Watcher, error) {
	e.f.watchEvery(ctx)
	return e.log.WatchEvery(ctx, kinds)
}
