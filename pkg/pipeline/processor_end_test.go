package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// A processor stuck in code that ignores its context (a script in an
// endless loop) does not keep the run from ending: a graceful stop waits
// for it (its record is in flight), a forced one abandons it after
// AbandonAfter. Run returns, saying so; the connectors are torn down, the
// stuck processor is not closed under itself.
func TestForcedStopAbandonsAProcessorThatNeverReturns(t *testing.T) {
	src := &seqSource{limit: 100, perRead: 10}
	entered := make(chan struct{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var once sync.Once
	stuck := &closingProc{procFunc: func(*record.Record) error {
		once.Do(func() { close(entered) })
		<-release // ignores the context
		return nil
	}}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Processors:   []Processor{{ID: "spin", Processor: stuck}},
		Positions:    &memPositions{},
		BatchSize:    10,
		AbandonAfter: 50 * time.Millisecond,
	})
	select {
	case <-entered:
	case <-time.After(testTimeout):
		t.Fatal("the processor was never called")
	}
	h.engine.Stop()
	select {
	case err := <-h.done:
		t.Fatalf("the graceful stop ended the run (%v) while a record was in the processor", err)
	case <-time.After(100 * time.Millisecond):
	}
	h.cancel()
	err := h.wait()
	if !errors.Is(err, ErrForceStopped) || !errors.Is(err, ErrStagesAbandoned) {
		t.Fatalf("Run returned %v, want a forced stop that abandoned a stage", err)
	}
	src.mu.Lock()
	torn := src.torn
	src.mu.Unlock()
	if !torn {
		t.Error("the source was not torn down")
	}
	if n := stuck.closed.Load(); n != 0 {
		t.Errorf("the stuck processor was closed %d times while it still ran", n)
	}
}

// openBlocker is a source whose Open waits until its context ends, as a
// standalone connector's handshake with an executable that never answers.
type openBlocker struct {
	seqSource
	opening chan struct{}
}

func (s *openBlocker) Open(ctx context.Context, _ record.Position) error {
	close(s.opening)
	<-ctx.Done()
	return ctx.Err()
}

// A graceful stop while the connectors open cancels the opening: there is
// nothing to drain, and the run must not wait for a handshake's timeout.
// The run ends as a graceful stop does (nil), its connectors torn down.
func TestStopWhileOpeningCancelsTheOpening(t *testing.T) {
	src := &openBlocker{opening: make(chan struct{})}
	h := startEngine(t, Config{
		Source:       Source{ID: "src", Connector: src},
		Destinations: []Destination{{ID: "dst", Connector: &memDestination{}}},
		Positions:    &memPositions{},
	})
	select {
	case <-src.opening:
	case <-time.After(testTimeout):
		t.Fatal("the source was never opened")
	}
	h.engine.Stop()
	if err := h.wait(); err != nil {
		t.Fatalf("Run returned %v after a stop while opening, want nil (a graceful stop)", err)
	}
	src.mu.Lock()
	torn := src.torn
	src.mu.Unlock()
	if !torn {
		t.Error("the source was not torn down")
	}
}
