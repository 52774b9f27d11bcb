package conduit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/cluster"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// clusterList lists every pipeline the instance knows, in the order of
// the files: its own under their supervisors, the others' as the
// database has them.
func (a apiPipelines) clusterList(f *fleet) []api.Supervised {
	f.refreshHolders(context.Background())
	known := f.knownPipelines()
	out := make([]api.Supervised, 0, len(known))
	for _, k := range known {
		out = append(out, a.clusterGet(f, k))
	}
	return out
}

func (a apiPipelines) clusterGet(f *fleet, k reconciler.Running) api.Supervised {
	if m := a.r.get(k.Pipeline.ID); m != nil {
		return m
	}
	return remotePipeline{r: a.r, f: f, k: k, holder: f.holder(k.Pipeline.ID)}
}

// remotePipeline is a pipeline another instance runs (or none, for a
// moment, while it moves): its state is what that instance last wrote,
// and start and stop are sent to it through the database.
type remotePipeline struct {
	r      *Runtime
	f      *fleet
	k      reconciler.Running
	holder cluster.Holder
}

var _ api.Supervised = remotePipeline{}

func (p remotePipeline) Info() api.PipelineInfo {
	cfg := p.k.Pipeline
	info := api.PipelineInfo{ID: cfg.ID, Name: cfg.Name, Description: cfg.Description, File: p.k.Origin.File, Line: p.k.Origin.Line,
		Definition: p.k.Origin.Definition}
	if recovery, err := cfg.ResolveErrorRecovery(p.r.cfg.Pipelines.ErrorRecovery); err == nil {
		info.Recovery = recovery
	}
	if p.holder.Live {
		info.Instance = p.holder.Instance
	}
	return info
}

// State is the state the pipeline's instance saved last; a pipeline no
// instance took up yet is stopped.
func (p remotePipeline) State(ctx context.Context) (lifecycle.State, error) {
	st, ok, err := p.r.states.Load(ctx, p.k.Pipeline.ID)
	if err != nil {
		return lifecycle.State{}, err
	}
	if !ok {
		return lifecycle.State{Status: lifecycle.StatusStopped}, nil
	}
	return st, nil
}

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
func (p remotePipeline) send(ctx context.Context, action string) error {
	if !p.holder.Live {
		return fmt.Errorf("pipeline %s: %w", p.k.Pipeline.ID, api.ErrPipelineMoving)
	}
	ctx, cancel := context.WithTimeout(ctx, p.r.cfg.Pipelines.GracefulStopTimeout+p.f.ttl)
	defer cancel()
	err := cluster.Send(ctx, p.f.pool, p.holder.Instance, p.k.Pipeline.ID, action)
	var refused *cluster.RefusedError
	if errors.As(err, &refused) {
		return refusal{refused}
	}
	return err
}

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
