// Package inspect shows what passes a pipeline's connectors and processors
// to inspectors (Conduit's InspectConnector and InspectProcessorIn|Out,
// served by pkg/api): every run's connectors and processors are wrapped
// (Taps.Tap) to copy the records passing them to the inspectors of their
// point, without ever slowing the pipeline, and keeping every optional
// ability the engine looks for in what they wrap.
package inspect

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/conduitry/conduit/pkg/api"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/pipeline"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

// Buffer is how many records an inspector may fall behind before
// records are dropped for it: inspecting must never slow a pipeline.
const Buffer = 256

// Taps are the inspectors of one pipeline's records (Conduit's
// InspectConnector and InspectProcessorIn|Out). Every run's connectors
// and processors are wrapped to copy what passes them to the inspectors
// of their point; with none, a wrapper costs one atomic load per call.
type Taps struct {
	active atomic.Int32
	mu     sync.Mutex
	subs   map[api.InspectPoint]map[*tapSub]struct{}
}

type tapSub struct{ ch chan record.Record }

// Subscribe returns a channel of the records passing at, closed once ctx
// is done.
func (t *Taps) Subscribe(ctx context.Context, at api.InspectPoint) <-chan record.Record {
	sub := &tapSub{ch: make(chan record.Record, Buffer)}
	t.mu.Lock()
	if t.subs == nil {
		t.subs = map[api.InspectPoint]map[*tapSub]struct{}{}
	}
	if t.subs[at] == nil {
		t.subs[at] = map[*tapSub]struct{}{}
	}
	t.subs[at][sub] = struct{}{}
	t.active.Add(1)
	t.mu.Unlock()
	context.AfterFunc(ctx, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.subs[at], sub)
		if len(t.subs[at]) == 0 {
			delete(t.subs, at)
		}
		t.active.Add(-1)
		close(sub.ch) // under mu: no emit sends to it any more
	})
	return sub.ch
}

// emit copies recs to the inspectors of at, dropping what one has no room
// for.
func (t *Taps) emit(at api.InspectPoint, recs []record.Record) {
	if t.active.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for sub := range t.subs[at] {
		for i := range recs {
			select {
			case sub.ch <- recs[i].Clone():
			default:
			}
		}
	}
}

// Tap wraps the connectors and processors of a run's engine
// configuration so that inspectors see their records.
func (t *Taps) Tap(cfg *pipeline.Config) {
	tapSource := func(s *pipeline.Source) {
		if s.Connector != nil {
			ts := tappedSource{Source: s.Connector, t: t, at: api.InspectPoint{Connector: s.ID}}
			if _, ok := s.Connector.(sourceMetadataStamper); ok {
				s.Connector = tappedStampingSource{ts}
			} else {
				s.Connector = ts
			}
		}
		tapProcessors(t, s.Processors)
	}
	tapSource(&cfg.Source)
	for i := range cfg.Sources {
		tapSource(&cfg.Sources[i])
	}
	for i := range cfg.Destinations {
		d := &cfg.Destinations[i]
		d.Connector = tappedDestination{Destination: d.Connector, t: t, at: api.InspectPoint{Connector: d.ID}}
		tapProcessors(t, d.Processors)
	}
	tapProcessors(t, cfg.Processors)
}

// sourceMetadataStamper is pkg/pipeline's optional ability of a source
// that sets its records' source metadata itself; a tapped source keeps it.
type sourceMetadataStamper interface{ StampsSourceMetadata() }

// tappedStampingSource is a tapped source that keeps the
// sourceMetadataStamper ability of the source it wraps.
type tappedStampingSource struct{ tappedSource }

// StampsSourceMetadata implements sourceMetadataStamper.
func (tappedStampingSource) StampsSourceMetadata() {}

func tapProcessors(t *Taps, procs []pipeline.Processor) {
	for i := range procs {
		p := &procs[i]
		tp := tappedProcessor{Processor: p.Processor, t: t,
			in:  api.InspectPoint{Connector: p.Connector, Processor: p.ID},
			out: api.InspectPoint{Connector: p.Connector, Processor: p.ID, Out: true}}
		if sp, ok := p.Processor.(processor.Splitter); ok {
			p.Processor = tappedSplitter{tappedProcessor: tp, splitter: sp}
		} else {
			p.Processor = tp
		}
	}
}

// tappedSource shows inspectors what the source read.
type tappedSource struct {
	connector.Source
	t  *Taps
	at api.InspectPoint
}

func (s tappedSource) Read(ctx context.Context, batch []record.Record) (int, error) {
	n, err := s.Source.Read(ctx, batch)
	if n > 0 {
		s.t.emit(s.at, batch[:n])
	}
	return n, err
}

// tappedDestination shows inspectors what the destination is given.
type tappedDestination struct {
	connector.Destination
	t  *Taps
	at api.InspectPoint
}

func (d tappedDestination) Write(ctx context.Context, batch []record.Record) (int, error) {
	d.t.emit(d.at, batch)
	return d.Destination.Write(ctx, batch)
}

// Unwrap returns the destination tapped: the engine finds the abilities
// it looks for (what the destination holds, whether it syncs) there.
func (d tappedDestination) Unwrap() connector.Destination { return d.Destination }

// tappedProcessor shows inspectors what a processor is given and what it
// keeps.
type tappedProcessor struct {
	processor.Processor
	t       *Taps
	in, out api.InspectPoint
}

// Close closes the processor it wraps when that one has anything to close
// (processor.Closer): the engine closes its processors when a run ends.
func (p tappedProcessor) Close(ctx context.Context) error {
	if c, ok := p.Processor.(processor.Closer); ok {
		return c.Close(ctx)
	}
	return nil
}

// tappedSplitter is a tapped processor that keeps the Splitter ability of
// the one it wraps (only those: the engine takes a slower path for a chain
// with a Splitter in it).
type tappedSplitter struct {
	tappedProcessor
	splitter processor.Splitter
}

// ProcessMulti shows inspectors the record given and each record made.
func (p tappedSplitter) ProcessMulti(ctx context.Context, rec *record.Record, out []record.Record) ([]record.Record, error) {
	if p.t.active.Load() == 0 {
		return p.splitter.ProcessMulti(ctx, rec, out)
	}
	p.t.emit(p.in, []record.Record{*rec})
	before := len(out)
	out, err := p.splitter.ProcessMulti(ctx, rec, out)
	switch {
	case err != nil:
	case len(out) > before:
		p.t.emit(p.out, out[before:])
	default:
		p.t.emit(p.out, []record.Record{*rec})
	}
	return out, err
}

func (p tappedProcessor) Process(ctx context.Context, rec *record.Record) error {
	if p.t.active.Load() == 0 {
		return p.Processor.Process(ctx, rec)
	}
	p.t.emit(p.in, []record.Record{*rec})
	err := p.Processor.Process(ctx, rec)
	if err == nil {
		p.t.emit(p.out, []record.Record{*rec})
	}
	return err
}

// Active returns how many inspectors are subscribed.
func (t *Taps) Active() int { return int(t.active.Load()) }
