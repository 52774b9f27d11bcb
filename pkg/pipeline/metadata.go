package pipeline

import (
	"strconv"
	"time"

	"github.com/conduitry/conduit/pkg/record"
)

// nodeIDs are the names Conduit gives a pipeline's parts in the metadata
// of the records it writes: "pipeline:connector" for a connector,
// "pipeline:processor" for one of the pipeline's processors and
// "pipeline:connector:processor" for a connector's. A destination refuses
// a record through its acknowledgement, which Conduit's node
// "pipeline:connector-acker" reports.
type nodeIDs struct {
	// sources are the sources' node ids, in the engine's order; each is
	// also the prefix of the position of a dead-letter record of its
	// source's.
	sources []string
	// processors maps a processor's id to its node id; when two
	// connectors have processors of the same id, the first one's wins.
	processors map[string]string
}

func newNodeIDs(cfg Config, sources []Source) nodeIDs {
	ids := nodeIDs{processors: map[string]string{}}
	for _, s := range sources {
		ids.sources = append(ids.sources, record.NodeID(cfg.PipelineID, s.ID))
	}
	add := func(procs []Processor) {
		for _, p := range procs {
			if _, ok := ids.processors[p.ID]; !ok {
				ids.processors[p.ID] = record.NodeID(cfg.PipelineID, p.Connector, p.ID)
			}
		}
	}
	for _, s := range sources {
		add(s.Processors)
	}
	add(cfg.Processors)
	for _, d := range cfg.Destinations {
		add(d.Processors)
	}
	return ids
}

// of returns the node id of the component a nack names.
func (ids nodeIDs) of(pipelineID string, kind Kind, id string) string {
	switch kind {
	case KindProcessor:
		if n, ok := ids.processors[id]; ok {
			return n
		}
	case KindDestination:
		return record.NodeID(pipelineID, id) + "-acker"
	}
	return record.NodeID(pipelineID, id)
}

// sourceMetadataStamper is the optional ability of a source connector to
// set opencdc.readAt and conduit.source.connector.id (connector.Config's
// NodeID) on every record it reads, so that the engine need not look at
// each record's metadata: the builtin sources have it.
type sourceMetadataStamper interface{ StampsSourceMetadata() }

// stampSource gives every record the metadata Conduit's runtime adds to
// what a source read, where the source did not set it: opencdc.readAt
// (now, in Unix nanoseconds, one time for the batch) and
// conduit.source.connector.id.
func stampSource(recs []record.Record, sourceNode string, now func() time.Time) {
	var readAt string
	for i := range recs {
		md := recs[i].Metadata
		if md == nil {
			md = make(record.Metadata, 2)
			recs[i].Metadata = md
		}
		if md[record.MetadataReadAt] == "" {
			if readAt == "" {
				readAt = strconv.FormatInt(now().UnixNano(), 10)
			}
			md[record.MetadataReadAt] = readAt
		}
		if md[record.MetadataSourceConnectorID] == "" {
			md[record.MetadataSourceConnectorID] = sourceNode
		}
	}
}
