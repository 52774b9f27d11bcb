package pipeline

import (
	"context"
	"errors"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

// process is the processor stage: it runs the pipeline's processors over
// every record in read order and dispatches the batch.
func (e *Engine) process(ctx context.Context, in <-chan *batch, inflight chan<- *batch, toDest []chan *batch) error {
	for {
		b, ok := receive(ctx, in)
		if !ok {
			return nil
		}
		compacted := false
		for i := range b.records {
			kept, n, err := e.processRecord(ctx, e.chains[b.source], &b.records[i])
			if err != nil {
				return err
			}
			if !kept && !compacted {
				// From the first dropped record on, out is a compacted copy.
				compacted = true
				b.outBuf = append(b.outBuf[:0], b.records[:i]...)
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
				b.outBuf = append(b.outBuf, b.records[i])
				b.idxBuf = append(b.idxBuf, i)
			}
		}
		if compacted {
			b.out, b.outIdx = b.outBuf, b.idxBuf
		}
		if !dispatch(ctx, b, inflight, toDest) {
			return nil
		}
	}
}

// processRecord runs procs, the processors of rec's source and the
// pipeline's, over rec. It reports whether the
// record is kept; a rejected record comes back as a nack (its index
// unset): a quarantined one, one a processor refuses (fatal), and one whose
// transient error a dead-letter rule claims. Another transient error comes
// back as err and ends the run, so that the record is processed again after
// the restart (see cerrors.ClassifyProcessor); it names the record, for
// quarantine. So does an error that ends the run whatever its class
// (processor.EndRun: the processor cannot go on).
func (e *Engine) processRecord(ctx context.Context, procs []Processor, rec *record.Record) (kept bool, n *nack, err error) {
	if q, ok := e.cfg.Quarantine[string(rec.Position)]; ok {
		return false, &nack{kind: q.Kind, id: q.ID, err: q.Err, rule: QuarantineRule}, nil
	}
	return e.runProcessors(ctx, procs, rec)
}

// runProcessors runs procs over rec, as processRecord says.
func (e *Engine) runProcessors(ctx context.Context, procs []Processor, rec *record.Record) (kept bool, n *nack, err error) {
	for _, p := range procs {
		perr := p.Processor.Process(ctx, rec)
		switch {
		case perr == nil:
			continue
		case errors.Is(perr, processor.ErrFiltered):
			return false, nil, nil
		}
		// A processor's error is about this record: a dead-letter rule may
		// take it, whatever its class.
		if rule, ok := e.deadLetter(perr, KindProcessor, p.ID); ok {
			return false, &nack{kind: KindProcessor, id: p.ID, err: perr, rule: rule}, nil
		}
		if processor.EndsRun(perr) || cerrors.ClassifyProcessor(perr).Class == cerrors.ClassTransient {
			return false, nil, &StageError{Kind: KindProcessor, ID: p.ID, Op: "process", Err: cerrors.ForRecord(rec.Position, perr)}
		}
		return false, &nack{kind: KindProcessor, id: p.ID, err: perr}, nil
	}
	return true, nil, nil
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
