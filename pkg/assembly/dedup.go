package assembly

import (
	"context"

	"github.com/conduitry/conduit/dedup"
	"github.com/conduitry/conduit/pkg/pipeline"
)

// dedupStore adapts *dedup.Store to the engine's interface: the engine
// does not depend on the dedup package, nor it on the engine.
type dedupStore struct{ s *dedup.Store }

func (d dedupStore) Open(ctx context.Context, pipelineID, destinationID string, held pipeline.Held) (pipeline.DedupDestination, error) {
	return d.s.Open(ctx, pipelineID, destinationID, dedup.Holdings{Reports: held.Reports, Last: held.Last, LastSource: held.LastSource,
		Since: held.Since, Offset: held.Offset, Unsynced: held.Unsynced})
}
