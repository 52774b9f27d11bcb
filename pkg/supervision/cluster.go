package supervision

import (
	"context"
	"time"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// What an instance of a cluster (pkg/cluster/instance) does with the
// pipelines it takes up, hands over and deletes; the runtime passes these
// on as its instance.Host.

// Supervised returns the pipeline id as the API sees it, and whether its
// supervisor has ended.
func (ps *Pipelines) Supervised(id string) (api.Supervised, bool) {
	m := ps.get(id)
	if m == nil {
		return nil, false
	}
	return m, m.retired()
}

// TakeUp provisions a pipeline whose lease this instance took and starts
// it once Serve runs; instance names this instance in what the API shows.
func (ps *Pipelines) TakeUp(ctx context.Context, k reconciler.Running, takeover lifecycle.Takeover, instance string) error {
	m, err := ps.provisionAfter(ctx, k.Pipeline, k.Origin, lifecycle.ActorSystem, takeover, true)
	if err != nil {
		return err
	}
	m.instance = instance
	ps.add(m, -1)
	return nil
}

// Retire ends the pipeline's supervisor for how, its run drained for at
// most timeout, and forgets it here (it runs elsewhere next).
func (ps *Pipelines) Retire(ctx context.Context, id string, how lifecycle.Retirement, timeout time.Duration) {
	m := ps.get(id)
	if m == nil {
		return
	}
	ps.retireWithin(ctx, m, how, timeout)
	ps.remove(m)
	ps.metrics.ForgetPipeline(id)
}

// Forget deletes what remains of a pipeline deleted while no instance ran
// it: its connectors clean up, its state and dedup entries go.
func (ps *Pipelines) Forget(ctx context.Context, p config.Pipeline, actor lifecycle.Actor) error {
	ctx = context.WithoutCancel(ctx)
	ps.connectorsDeleted(ctx, p)
	before := ""
	if st, ok, err := ps.states.Load(ctx, p.ID); err == nil && ok {
		before = st.Status.String()
	}
	ps.forget(ctx, p.ID, before, actor, "pipeline deleted; its state is forgotten, its position kept")
	return ps.durable(ctx)
}

// SavedState reads the pipeline's persisted state.
func (ps *Pipelines) SavedState(ctx context.Context, id string) (lifecycle.State, bool, error) {
	return ps.states.Load(ctx, id)
}
