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

// clusterHost is the process as an instance of a cluster
// (pkg/cluster/instance) runs pipelines in it: the pipelines it takes up,
// hands over and deletes (pkg/supervision), the managed rules it reloads
// and the audit log it reads. The instance is opened before the pipelines
// are (the store's writer needs its fences), so each call looks them up.
type clusterHost struct{ r *Runtime }

var _ instance.Host = clusterHost{}

func (h clusterHost) Supervised(id string) (api.Supervised, bool) { return h.r.pipes.Supervised(id) }

func (h clusterHost) TakeUp(ctx context.Context, k reconciler.Running, takeover lifecycle.Takeover, instance string) error {
	return h.r.pipes.TakeUp(ctx, k, takeover, instance)
}

func (h clusterHost) Retire(ctx context.Context, id string, how lifecycle.Retirement, timeout time.Duration) {
	h.r.pipes.Retire(ctx, id, how, timeout)
}

func (h clusterHost) Forget(ctx context.Context, p config.Pipeline, actor lifecycle.Actor) error {
	return h.r.pipes.Forget(ctx, p, actor)
}

func (h clusterHost) SavedState(ctx context.Context, id string) (lifecycle.State, bool, error) {
	return h.r.pipes.SavedState(ctx, id)
}

func (h clusterHost) Reload() { h.r.pipes.Reload() }

func (h clusterHost) ReloadRules(ctx context.Context) error { return h.r.rules.LoadStored(ctx) }

func (h clusterHost) BetweenPlans(fn func()) { h.r.pipes.BetweenPlans(fn) }

func (h clusterHost) Audit() *auditlog.Log { return h.r.audit }
