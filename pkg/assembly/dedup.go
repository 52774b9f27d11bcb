package assembly

import (
	"context"

	"github.com/conduitry/conduit/dedup"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/record"
)

// dedupStore adapts *dedup.Store to the engine's interface: the engine
// does not depend on the dedup package, nor it on the engine.
type dedupStore struct{ s *dedup.Store }

func (d dedupStore) Open(ctx context.Context, pipelineID, destinationID string, reports bool, last record.Position) (pipeline.DedupDestination, error) {
	return d.s.Open(ctx, pipelineID, destinationID, dedup.Holdings{Reports: reports, Last: last})
}
