package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

// closingProc is a processor that holds something for its run (as a
// standalone processor holds its module's instance).
type closingProc struct {
	procFunc
	closed atomic.Int32
}

func (p *closingProc) Close(context.Context) error {
	p.closed.Add(1)
	return nil
}

// A processor that cannot go on (its module trapped) ends the run with a
// fatal error naming the record, instead of rejecting it and every later
// record into the dead-letter queue; its processors are closed.
func TestProcessorErrorThatEndsTheRun(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	dlq := &dlqDestination{}
	trapped := &closingProc{procFunc: func(r *record.Record) error {
		if seqOf(r) == 15 {
			return processor.EndRun(errors.New("module trapped"))
		}
		return nil
	}}
	onDest := &closingProc{procFunc: func(*record.Record) error { return nil }}
	onSource := &closingProc{procFunc: func(*record.Record) error { return nil }}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src, Processors: []Processor{{ID: "s", Processor: onSource}}},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}, Processors: []Processor{{ID: "d", Processor: onDest}}}},
		Processors:   []Processor{{ID: "wasm", Processor: trapped}},
		DLQ:          DeadLetterQueue{Connector: dlq, WindowSize: 100, WindowNackThreshold: 50},
		Positions:    &memPositions{},
		BatchSize:    10,
	})
	err := h.wait()
	var se *StageError
	if !errors.As(err, &se) || se.Kind != KindProcessor || se.ID != "wasm" {
		t.Fatalf("got %v, want the processor's error to end the run", err)
	}
	if c := cerrors.ClassifyProcessor(err); c.Class != cerrors.ClassFatal {
		t.Errorf("classified %+v, want fatal", c)
	}
	if pos, ok := cerrors.RecordOf(err); !ok || string(pos) != "15" {
		t.Errorf("error names record %q (%v), want 15", pos, ok)
	}
	if len(dlq.positions()) != 0 {
		t.Errorf("records went to the DLQ: %v", dlq.positions())
	}
	if got := src.ackedPositions(); slices.Contains(got, "15") {
		t.Error("the record the processor could not take was acknowledged")
	}
	if trapped.closed.Load() != 1 || onDest.closed.Load() != 1 || onSource.closed.Load() != 1 {
		t.Errorf("processors closed %d, %d and %d times (pipeline's, destination's, source's), want once each",
			trapped.closed.Load(), onDest.closed.Load(), onSource.closed.Load())
	}
}
