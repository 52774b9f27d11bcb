package pipeline

import (
	"context"
	"strconv"
	"testing"

	"github.com/conduitry/conduit/pkg/record"
)

// countingSource fills every batch completely, reusing each record's
// position buffer, so the benchmark measures the engine, not a connector.
type countingSource struct{ next int }

func (s *countingSource) Open(context.Context, record.Position) error { return nil }

func (s *countingSource) Read(_ context.Context, batch []record.Record) (int, error) {
	for i := range batch {
		s.next++
		batch[i].Position = strconv.AppendInt(batch[i].Position[:0], int64(s.next), 10)
		batch[i].Operation = record.OperationCreate
	}
	return len(batch), nil
}

func (s *countingSource) Ack(context.Context, []record.Position) error { return nil }
func (s *countingSource) Teardown(context.Context) error               { return nil }

type discardDestination struct{}

func (discardDestination) Open(context.Context) error { return nil }
func (discardDestination) Write(_ context.Context, b []record.Record) (int, error) {
	return len(b), nil
}
func (discardDestination) Teardown(context.Context) error { return nil }

// BenchmarkEngine reports the engine's own cost per record (read, fan-out to
// two destinations, ordered ack, coalesced position save).
func BenchmarkEngine(b *testing.B) {
	records := int64(b.N) * 1024
	done := make(chan struct{})
	var acked int64
	e, err := New(Config{
		PipelineID:   "bench",
		Source:       Source{ID: "src", Connector: &countingSource{}},
		Destinations: []Destination{{ID: "d1", Connector: discardDestination{}}, {ID: "d2", Connector: discardDestination{}}},
		Positions:    &memPositions{},
		OnAck: func(n int) {
			acked += int64(n)
			if acked >= records {
				select {
				case <-done:
				default:
					close(done)
				}
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	runErr := make(chan error, 1)
	go func() { runErr <- e.Run(context.Background()) }()
	<-done
	b.StopTimer()
	e.Stop()
	if err := <-runErr; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(records), "ns/record")
}
