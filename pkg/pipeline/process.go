package pipeline

import (
	"context"
	"errors"
	"fmt"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

// process is the processor stage: it runs the processors over every
// record in read order (those of the record's source, then the
// pipeline's) and dispatches the batch.
func (e *Engine) process(ctx context.Context, in <-chan *batch, inflight chan<- *batch, toDest []chan *batch) error {
	var s splitState
	for {
		b, ok := receive(ctx, in)
		if !ok {
			return nil
		}
		if err := e.processBatch(ctx, b, &s); err != nil {
			return err
		}
		if !dispatch(ctx, b, inflight, toDest) {
			return nil
		}
	}
}

// processBatch runs the processors of b's source and the pipeline's over
// b's records. Records stay in place
// as long as each stays one; from the first that a processor turns into
// several, the batch holds the records derived from them instead (see
// batch.acks).
func (e *Engine) processBatch(ctx context.Context, b *batch, s *splitState) error {
	read := b.records
	compacted, expanded := false, false
	for i := range read {
		s.out = s.out[:0]
		kept, n, split, err := e.processRecord(ctx, b.source, &read[i], s)
		if err != nil {
			return err
		}
		if !split && !expanded {
			if !kept && !compacted {
				// From the first dropped record on, out is a compacted copy.
				compacted = true
				b.outBuf = append(b.outBuf[:0], read[:i]...)
				b.idxBuf = b.idxBuf[:0]
				for j := range i {
					b.idxBuf = append(b.idxBuf, j)
				}
			}
			switch {
			case n != nil:
				n.index = i
				b.nacks = append(b.nacks, *n)
			case !kept:
				e.stats.RecordsFiltered.Add(1)
			case compacted:
				b.outBuf = append(b.outBuf, read[i])
				b.idxBuf = append(b.idxBuf, i)
			}
			continue
		}
		if !expanded {
			b.expand(i, compacted)
			compacted, expanded = true, true
		}
		if !split {
			if b.addDerived(read[i], kept, n) {
				e.stats.RecordsFiltered.Add(1)
			}
		}
		for j := range s.out {
			d := &s.out[j]
			if b.addDerived(d.rec, d.kept, d.nack) {
				e.stats.RecordsFiltered.Add(1)
			}
		}
		clear(s.out)
		b.endRead()
	}
	switch {
	case expanded:
		b.finishExpand()
	case compacted:
		b.out, b.outIdx = b.outBuf, b.idxBuf
	}
	return nil
}

// splitState is the processor stage's scratch for records that processors
// turn into several.
type splitState struct {
	// out is what the record being processed became, in order, when a
	// processor split it.
	out []derived
	// multi holds what Splitter calls returned, while the processors after
	// them run over those records.
	multi []record.Record
}

// derived is a record derived from a record read, and what the processors
// after the split made of it.
type derived struct {
	rec  record.Record
	kept bool
	nack *nack
}

// processRecord runs the processors of sources[src] and the pipeline's
// over rec, a record of that source. It reports whether the
// record is kept; a rejected record comes back as a nack (its index
// unset): a quarantined one, one a processor refuses (fatal), and one whose
// transient error a dead-letter rule claims. Another transient error comes
// back as err and ends the run, so that the record is processed again after
// the restart (see cerrors.ClassifyProcessor); it names the record, for
// quarantine. So does an error that ends the run whatever its class
// (processor.EndRun: the processor cannot go on). When a processor turned
// rec into several records, split is
// set and they are in s.out, each with what became of it; kept and n are
// then unset.
func (e *Engine) processRecord(ctx context.Context, src int, rec *record.Record, s *splitState) (kept bool, n *nack, split bool, err error) {
	if n := e.quarantined(rec.Position); n != nil {
		return false, n, false, nil
	}
	procs := e.chains[src]
	if !e.splits[src] {
		kept, n, err := e.runProcessors(ctx, procs, rec)
		return kept, n, false, err
	}
	if record.IsDerived(rec.Position) {
		// A derived position must never equal one a source produced:
		// dedup, the dead-letter queue and the file destination tell
		// records apart by position.
		return false, nil, false, derivedLookalike(e.sources[src].ID)
	}
	return e.runSplitting(ctx, procs, rec, s)
}

// derivedLookalike is the error that ends a run whose source produced a
// position that begins as a derived one.
func derivedLookalike(sourceID string) error {
	return &StageError{Kind: KindSource, ID: sourceID, Op: "read", Err: cerrors.Fatal(fmt.Errorf(
		"the source produced a record whose position begins with the bytes that mark the position of a record a processor derived from another (%q), which this pipeline's processors (split, clone) cannot tell apart", record.DerivedMark))}
}

// quarantined returns the nack of a record quarantined by position, or nil.
func (e *Engine) quarantined(pos record.Position) *nack {
	if len(e.cfg.Quarantine) == 0 {
		return nil
	}
	if q, ok := e.cfg.Quarantine[string(pos)]; ok {
		return &nack{kind: q.Kind, id: q.ID, err: q.Err, rule: QuarantineRule}
	}
	return nil
}

// runSplitting runs procs over rec as processRecord says. The records a
// Splitter makes of rec each get a position derived from rec's and go
// through the processors after it on their own: one of them rejected
// goes to the dead-letter queue alone, one filtered out is dropped alone.
func (e *Engine) runSplitting(ctx context.Context, procs []Processor, rec *record.Record, s *splitState) (kept bool, n *nack, split bool, err error) {
	for k, p := range procs {
		sp, ok := p.Processor.(processor.Splitter)
		if !ok {
			kept, n, err := e.runProcessors(ctx, procs[k:k+1], rec)
			if err != nil || !kept {
				return kept, n, false, err
			}
			continue
		}
		start := len(s.multi)
		many, perr := sp.ProcessMulti(ctx, rec, s.multi)
		s.multi = many
		if perr != nil {
			clear(s.multi[start:])
			s.multi = s.multi[:start]
			kept, n, err := e.processorFailed(p, rec, perr)
			return kept, n, false, err
		}
		if len(many) == start {
			continue // one record, changed in place
		}
		// The records after start stay where they are while the processors
		// after this one run over them (which may append more to s.multi,
		// in a new array: these elements are read from the old one).
		parts := many[start:]
		for j := range parts {
			d := &parts[j]
			d.Position = record.DerivedPosition(rec.Position, j)
			if n := e.quarantined(d.Position); n != nil {
				s.out = append(s.out, derived{rec: *d, nack: n})
				continue
			}
			kept, n, again, err := e.runSplitting(ctx, procs[k+1:], d, s)
			if err != nil {
				return false, nil, false, err
			}
			if !again {
				s.out = append(s.out, derived{rec: *d, kept: kept, nack: n})
			}
		}
		clear(parts)
		s.multi = s.multi[:start]
		return false, nil, true, nil
	}
	return true, nil, false, nil
}

// runProcessors runs procs over rec, as processRecord says; none of them
// may turn it into several (a Splitter that does fails the record).
func (e *Engine) runProcessors(ctx context.Context, procs []Processor, rec *record.Record) (kept bool, n *nack, err error) {
	for _, p := range procs {
		perr := p.Processor.Process(ctx, rec)
		if perr == nil {
			continue
		}
		return e.processorFailed(p, rec, perr)
	}
	return true, nil, nil
}

// processorFailed decides what becomes of rec after p returned perr.
func (e *Engine) processorFailed(p Processor, rec *record.Record, perr error) (kept bool, n *nack, err error) {
	if errors.Is(perr, processor.ErrFiltered) {
		return false, nil, nil
	}
	// A processor's error is about this record: a dead-letter rule may
	// take it, whatever its class.
	if rule, ok := e.deadLetter(perr, KindProcessor, p.ID); ok {
		return false, &nack{kind: KindProcessor, id: p.ID, err: perr, rule: rule}, nil
	}
	if processor.EndsRun(perr) || KindProcessor.Classify(perr).Class == cerrors.ClassTransient {
		return false, nil, &StageError{Kind: KindProcessor, ID: p.ID, Op: "process", Err: cerrors.ForRecord(rec.Position, perr)}
	}
	return false, &nack{kind: KindProcessor, id: p.ID, err: perr}, nil
}

// QuarantineRule is what a quarantined record's dead-letter metadata names
// as the rule.
const QuarantineRule = "quarantine"

// deadLetter asks Config.DeadLetter about err.
func (e *Engine) deadLetter(err error, kind Kind, id string) (string, bool) {
	if e.cfg.DeadLetter == nil {
		return "", false
	}
	return e.cfg.DeadLetter(err, kind, id)
}
