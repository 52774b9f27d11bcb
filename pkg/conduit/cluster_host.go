package conduit

import (
	"context"
	"time"

	"github.com/conduitry/conduit/auditlog"
	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/cluster/instance"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/reconciler"
)

// clusterHost is the runtime as an instance of a cluster
// (pkg/cluster/instance) runs pipelines in it: the pipelines it takes up, hands over and deletes.
type clusterHost struct{ r *Runtime }

var _ instance.Host = clusterHost{}

func (h clusterHost) Supervised(id string) (api.Supervised, bool) {
	m := h.r.get(id)
	if m == nil {
		return nil, false
	}
	return m, m.retired()
}

func (h clusterHost) TakeUp(ctx context.Context, k reconciler.Running, takeover lifecycle.Takeover, instance string) error {
	m, err := h.r.provisionAfter(ctx, k.Pipeline, k.Origin, lifecycle.ActorSystem, takeover, true)
	if err != nil {
		return err
	}
	m.instance = instance
	h.r.add(m, -1)
	return nil
}

func (h clusterHost) Retire(ctx context.Context, id string, how lifecycle.Retirement, timeout time.Duration) {
	r := h.r
	m := r.get(id)
	if m == nil {
		return
	}
	r.retireWithin(ctx, m, how, timeout)
	r.remove(m)
	r.metrics.ForgetPipeline(id)
}

func (h clusterHost) Forget(ctx context.Context, p config.Pipeline, actor lifecycle.Actor) error {
	r := h.r
	ctx = context.WithoutCancel(ctx)
	r.connectorsDeleted(ctx, p)
	before := ""
	if st, ok, err := r.states.Load(ctx, p.ID); err == nil && ok {
		before = st.Status.String()
	}
	r.forget(ctx, p.ID, before, actor, "pipeline deleted; its state is forgotten, its position kept")
	return r.durable(ctx)
}

func (h clusterHost) SavedState(ctx context.Context, id string) (lifecycle.State, bool, error) {
	return h.r.states.Load(ctx, id)
}

func (h clusterHost) Reload() { h.r.Reload() }

func (h clusterHost) ReloadRules(ctx context.Context) error { return h.r.rules.LoadStored(ctx) }

func (h clusterHost) BetweenPlans(fn func()) { h.r.betweenPlans(fn) }

func (h clusterHost) Audit() *auditlog.Log { return h.r.audit }
