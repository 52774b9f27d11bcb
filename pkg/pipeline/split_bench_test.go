package pipeline

import (
	"context"
	"testing"

	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

// BenchmarkEngineProcessors reports the engine's cost per record read with
// a processor that keeps every record as it is, and with one that splits
// each into three (whose cost is mostly the copies it makes).
func BenchmarkEngineProcessors(b *testing.B) {
	for _, c := range []struct {
		name string
		proc processor.Processor
		per  int64 // records acknowledged per record read
	}{
		{"keep", procFunc(func(*record.Record) error { return nil }), 1},
		{"split into 3", splitInto(3), 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			records := int64(b.N) * 1024
			done := make(chan struct{})
			var acked int64
			e, err := New(Config{
				PipelineID:   "bench",
				Source:       Source{ID: "src", Connector: &countingSource{}},
				Destinations: []Destination{{ID: "d1", Connector: discardDestination{}}},
				Processors:   []Processor{{ID: "p", Processor: c.proc}},
				Positions:    &memPositions{},
				OnAck: func(n int) {
					acked += int64(n)
					if acked >= records*c.per {
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
		})
	}
}
