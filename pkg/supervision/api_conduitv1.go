package supervision

import (
	"context"
	"fmt"

	"github.com/conduitio/conduit-connector-protocol/pconnector"
	sdk "github.com/conduitio/conduit-processor-sdk"

	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/config"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/record"
)

// conduitV1 is the pipelines as Conduit's API v1 needs them.
type conduitV1 struct{ ps *Pipelines }

var _ api.ConduitV1 = conduitV1{}

func (a conduitV1) ConnectorPlugins() []pconnector.Specification {
	return a.ps.connectors.Specifications()
}

func (a conduitV1) ProcessorPlugins() []sdk.Specification {
	return a.ps.processors.Specifications()
}

func (a conduitV1) ValidateConnector(source bool, plugin string, settings map[string]string) error {
	// Only the settings are checked: nothing is opened, so conduit's own
	// files (which a file destination refuses when it opens) are not at
	// stake.
	cfg := connector.Config{PipelineID: "validate", ConnectorID: "connector", Settings: settings}
	if source {
		_, err := a.ps.connectors.NewSource(plugin, cfg)
		return err
	}
	_, err := a.ps.connectors.NewDestination(plugin, cfg)
	return err
}

func (a conduitV1) Inspect(ctx context.Context, pipelineID string, at api.InspectPoint) (<-chan record.Record, error) {
	m := a.ps.get(pipelineID)
	if m == nil {
		return nil, fmt.Errorf("pipeline %q does not run on this instance: %w", pipelineID, api.ErrInspectUnknown)
	}
	if !m.hasComponent(at) {
		return nil, fmt.Errorf("pipeline %q: %w %+v", pipelineID, api.ErrInspectUnknown, at)
	}
	// The stream ends with the pipeline's supervisor (the pipeline was
	// updated, deleted or handed to another instance): what it inspected
	// is gone, and the client asks again for the new one.
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		select {
		case <-m.sup.Done():
		case <-ctx.Done():
		}
	}()
	return m.taps.Subscribe(ctx, at), nil
}

// Config implements api.Configured.
func (m *managedPipeline) Config() config.Pipeline { return m.cfg }

func (m *managedPipeline) hasComponent(at api.InspectPoint) bool {
	for _, c := range m.cfg.Connectors {
		if at.Processor == "" && c.ID == at.Connector {
			return true
		}
		for _, p := range c.Processors {
			if at.Connector == c.ID && p.ID == at.Processor {
				return true
			}
		}
	}
	for _, p := range m.cfg.Processors {
		if at.Connector == "" && p.ID == at.Processor {
			return true
		}
	}
	return false
}
