package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/conduitio/conduit-commons/opencdc"
	"github.com/conduitio/conduit/pkg/foundation/metrics"
	"github.com/conduitio/conduit/pkg/foundation/metrics/noop"
	"github.com/conduitio/conduit/pkg/lifecycle/stream"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/clocktest"
	"github.com/conduitry/conduit/pkg/record"
)

// These tests hold the records a run writes to the shape Conduit v0.14.0
// writes, by running Conduit's own dead-letter code on the same input.

var shapeClock = time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)

func shapeNow() time.Time { return shapeClock }

// toOpenCDC is the record as Conduit holds it.
func toOpenCDC(r record.Record) opencdc.Record {
	data := func(d record.Data) opencdc.Data {
		switch x := d.(type) {
		case record.RawData:
			return opencdc.RawData(x)
		case record.StructuredData:
			return opencdc.StructuredData(x)
		}
		return nil
	}
	return opencdc.Record{
		Position:  opencdc.Position(r.Position),
		Operation: opencdc.Operation(r.Operation),
		Metadata:  opencdc.Metadata(maps.Clone(r.Metadata)),
		Key:       data(r.Key),
		Payload:   opencdc.Change{Before: data(r.Payload.Before), After: data(r.Payload.After)},
	}
}

// conduitDeadLetter is the record Conduit's dead-letter handler writes when
// the node nodeID nacks failed, read by the source sourceNode, with reason.
func conduitDeadLetter(t *testing.T, failed record.Record, sourceNode, nodeID string, reason error) opencdc.Record {
	t.Helper()
	written := make(chan opencdc.Record, 1)
	node := &stream.DLQHandlerNode{
		Name:                "p1-dlq",
		Handler:             dlqHandlerFunc(func(r opencdc.Record) { written <- r }),
		WindowSize:          1,
		WindowNackThreshold: 1,
		Timer:               noop.Timer{},
		Histogram:           metrics.NewRecordBytesHistogram(noop.Histogram{}),
	}
	node.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- node.Run(ctx) }()
	msg := &stream.Message{Ctx: ctx, Record: toOpenCDC(failed), SourceID: sourceNode}
	if err := node.Nack(msg, stream.NackMetadata{Reason: reason, NodeID: nodeID}); err != nil {
		t.Fatalf("Conduit's dead-letter handler: %v", err)
	}
	node.Done()
	if err := <-ran; err != nil {
		t.Fatalf("Conduit's dead-letter handler: %v", err)
	}
	return <-written
}

type dlqHandlerFunc func(opencdc.Record)

func (dlqHandlerFunc) Open(context.Context) error  { return nil }
func (dlqHandlerFunc) Close(context.Context) error { return nil }
func (f dlqHandlerFunc) Write(_ context.Context, r opencdc.Record) error {
	f(r)
	return nil
}

// asWritten is a record as a file destination writes it (Conduit's JSON
// for conduit's record), decoded for comparison.
func asWritten(t *testing.T, line []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(line, &v); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return v
}

func TestDeadLetterRecordIsConduits(t *testing.T) {
	reject := errors.New("amount is negative")
	tests := []struct {
		name string
		// build returns the run's config, and the record as it was when it
		// failed is sent on failed.
		build    func(failed chan<- record.Record) Config
		wantNode string
	}{
		{
			name: "a pipeline processor rejects it",
			build: func(failed chan<- record.Record) Config {
				return Config{
					Processors: []Processor{{ID: "enrich", Processor: enrich}, {ID: "check", Processor: rejectCapturing(failed, reject)}},
				}
			},
			wantNode: "p1:check",
		},
		{
			name: "the source's processor rejects it",
			build: func(failed chan<- record.Record) Config {
				return Config{
					Processors: []Processor{{ID: "enrich", Processor: enrich, Connector: "src"}, {ID: "check", Processor: rejectCapturing(failed, reject), Connector: "src"}},
				}
			},
			wantNode: "p1:src:check",
		},
		{
			name: "a destination's processor rejects it",
			build: func(failed chan<- record.Record) Config {
				return Config{Destinations: []Destination{{ID: "dst", Connector: &memDestination{},
					Processors: []Processor{{ID: "enrich", Processor: enrich, Connector: "dst"}, {ID: "check", Processor: rejectCapturing(failed, reject), Connector: "dst"}}}}}
			},
			wantNode: "p1:dst:check",
		},
		{
			name: "a destination refuses it after its processors",
			build: func(failed chan<- record.Record) Config {
				capture := procFunc(func(r *record.Record) error {
					failed <- r.Clone()
					return nil
				})
				return Config{Destinations: []Destination{{ID: "dst", Connector: &memDestination{failAtPos: "1", failErr: cerrors.Fatal(reject)},
					Processors: []Processor{{ID: "enrich", Processor: enrich, Connector: "dst"}, {ID: "capture", Processor: capture, Connector: "dst"}}}}}
			},
			wantNode: "p1:dst-acker",
		},
		{
			name: "a destination refuses it",
			build: func(failed chan<- record.Record) Config {
				failed <- record.Record{
					Position:  record.Position("1"),
					Operation: record.OperationCreate,
					Metadata: record.Metadata{
						record.MetadataReadAt:            strconv.FormatInt(shapeClock.UnixNano(), 10),
						record.MetadataSourceConnectorID: "p1:src",
					},
					Payload: record.Change{After: record.RawData("1")},
				}
				return Config{Destinations: []Destination{{ID: "dst", Connector: &memDestination{failAtPos: "1", failErr: cerrors.Fatal(reject)}}}}
			},
			wantNode: "p1:dst-acker",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failed := make(chan record.Record, 1)
			cfg := tt.build(failed)
			src := &seqSource{limit: 1, perRead: 1}
			cfg.Source = Source{ID: "src", Connector: src}
			if cfg.Destinations == nil {
				cfg.Destinations = []Destination{{ID: "dst", Connector: &memDestination{}}}
			}
			dlq := &dlqDestination{}
			cfg.DLQ = DeadLetterQueue{Connector: dlq, WindowSize: 1, WindowNackThreshold: 1}
			cfg.Positions = &memPositions{}
			cfg.Now = shapeNow
			h := startEngine(t, cfg)
			clocktest.Eventually(t, func() bool { return len(src.ackedPositions()) == 1 }, nil)
			h.engine.Stop()
			if err := h.wait(); err != nil {
				t.Fatal(err)
			}
			if len(dlq.recs) != 1 {
				t.Fatalf("dead-letter queue got %d records, want 1", len(dlq.recs))
			}
			ours, err := record.AppendJSON(nil, &dlq.recs[0])
			if err != nil {
				t.Fatal(err)
			}

			orig := <-failed
			conduits := conduitDeadLetter(t, orig, "p1:src", tt.wantNode, reject)
			// Conduit stamps its own clock; the rest must be equal.
			if _, err := strconv.ParseInt(conduits.Metadata[record.MetadataCreatedAt], 10, 64); err != nil {
				t.Fatalf("Conduit's opencdc.createdAt %q: %v", conduits.Metadata[record.MetadataCreatedAt], err)
			}
			conduits.Metadata[record.MetadataCreatedAt] = strconv.FormatInt(shapeClock.UnixNano(), 10)
			theirs, err := json.Marshal(conduits)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(asWritten(t, ours), asWritten(t, theirs)) {
				t.Fatalf("dead-letter record\n got %s\nwant %s (Conduit's)", ours, theirs)
			}
		})
	}
}

// enrich gives the record a structured key and payload and metadata of its
// own, so that the dead-letter record carries every kind of data.
var enrich = procFunc(func(r *record.Record) error {
	r.Key = record.StructuredData{"id": 1}
	r.Payload.After = record.StructuredData{"amount": -5, "note": "x<y"}
	r.Metadata["table"] = "orders"
	return nil
})

// rejectCapturing rejects every record with err, and sends the record as it
// was rejected on failed (once).
func rejectCapturing(failed chan<- record.Record, err error) procFunc {
	return func(r *record.Record) error {
		select {
		case failed <- r.Clone():
		default:
		}
		return err
	}
}

func TestSourceMetadataIsConduits(t *testing.T) {
	tests := []struct {
		name   string
		srcMD  record.Metadata
		wantMD record.Metadata
	}{
		{
			// Conduit sets opencdc.readAt and conduit.source.connector.id
			// ("pipeline:connector") on what a source read, nothing else.
			name: "a source that sets none",
			wantMD: record.Metadata{
				record.MetadataReadAt:            strconv.FormatInt(shapeClock.UnixNano(), 10),
				record.MetadataSourceConnectorID: "p1:src",
			},
		},
		{
			// ... and only where the source left them empty.
			name:  "a source that sets both",
			srcMD: record.Metadata{record.MetadataReadAt: "7", record.MetadataSourceConnectorID: "mine", "table": "t"},
			wantMD: record.Metadata{
				record.MetadataReadAt:            "7",
				record.MetadataSourceConnectorID: "mine",
				"table":                          "t",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := &recordingDestination{}
			src := &seqSource{limit: 1, perRead: 1}
			h := startEngine(t, Config{
				Source:       Source{ID: "src", Connector: withMetadata{src, tt.srcMD}},
				Destinations: []Destination{{ID: "dst", Connector: dst}},
				Positions:    &memPositions{},
				Now:          shapeNow,
			})
			h.waitAcked(1)
			h.engine.Stop()
			if err := h.wait(); err != nil {
				t.Fatal(err)
			}
			if len(dst.recs) != 1 || !maps.Equal(dst.recs[0].Metadata, tt.wantMD) {
				t.Fatalf("destination got %v, want one record with metadata %v", dst.recs, tt.wantMD)
			}
		})
	}
}

// withMetadata is a source whose records carry a copy of md.
type withMetadata struct {
	*seqSource
	md record.Metadata
}

func (s withMetadata) Read(ctx context.Context, batch []record.Record) (int, error) {
	n, err := s.seqSource.Read(ctx, batch)
	for i := range n {
		batch[i].Metadata = maps.Clone(s.md)
	}
	return n, err
}

// recordingDestination keeps copies of what it was given; read after the
// run ended.
type recordingDestination struct{ recs []record.Record }

func (d *recordingDestination) Open(context.Context) error     { return nil }
func (d *recordingDestination) Teardown(context.Context) error { return nil }
func (d *recordingDestination) Write(_ context.Context, recs []record.Record) (int, error) {
	for _, r := range recs {
		d.recs = append(d.recs, r.Clone())
	}
	return len(recs), nil
}
