package supervision

import (
	"context"

	"github.com/conduitry/conduit/lifecycle"
	"github.com/conduitry/conduit/pkg/managedrules"
)

// rulePipelines are the pipelines as the managed rules see them.
type rulePipelines struct{ ps *Pipelines }

var _ managedrules.Pipelines = rulePipelines{}

func (p rulePipelines) All() []managedrules.Pipeline {
	p.ps.mu.RLock()
	defer p.ps.mu.RUnlock()
	out := make([]managedrules.Pipeline, len(p.ps.pipelines))
	for i, m := range p.ps.pipelines {
		out[i] = rulePipeline{m}
	}
	return out
}

func (p rulePipelines) Get(id string) (managedrules.Pipeline, bool) {
	m := p.ps.get(id)
	if m == nil {
		return nil, false
	}
	return rulePipeline{m}, true
}

func (p rulePipelines) Durable(ctx context.Context) error { return p.ps.durable(ctx) }

// rulePipeline is one supervised pipeline as the managed rules see it.
type rulePipeline struct{ m *managedPipeline }

func (p rulePipeline) ID() string { return p.m.cfg.ID }

func (p rulePipeline) Policy() *lifecycle.Policy { return &p.m.policy }

func (p rulePipeline) PluginOf(component string) string { return p.m.pluginOf(component) }

func (p rulePipeline) Status() lifecycle.Status { return p.m.metrics.Status() }

func (p rulePipeline) ApplyRule(ctx context.Context, name string, actor lifecycle.Actor) (lifecycle.ApplyOutcome, error) {
	return p.m.sup.ApplyRule(ctx, name, actor)
}
