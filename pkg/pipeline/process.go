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
			kept, n, err := runProcessors(ctx, e.cfg.Processors, &b.records[i])
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

// runProcessors runs procs over rec. It reports whether the record is kept;
// a rejected record comes back as a nack (its index unset); a transient
// error comes back as err and ends the run, so that the record is processed
// again after the restart (see cerrors.ClassifyProcessor).
func runProcessors(ctx context.Context, procs []Processor, rec *record.Record) (kept bool, n *nack, err error) {
	for _, p := range procs {
		perr := p.Processor.Process(ctx, rec)
		switch {
		case perr == nil:
			continue
		case errors.Is(perr, processor.ErrFiltered):
			return false, nil, nil
		}
		if cerrors.ClassifyProcessor(perr).Class == cerrors.ClassTransient {
			return false, nil, &StageError{Kind: KindProcessor, ID: p.ID, Op: "process", Err: perr}
		}
		return false, &nack{kind: KindProcessor, id: p.ID, err: perr}, nil
	}
	return true, nil, nil
}
