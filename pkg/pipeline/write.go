package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"time"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/connector"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

// dedupMode says how a destination's stage keeps what it wrote known to
// the next run (see write).
type dedupMode int

const (
	// rememberAfter: each batch is remembered after it is written.
	rememberAfter dedupMode = iota
	// intendBefore: an intent is recorded before each write
	// (connector.PositionReporter).
	intendBefore
	// markOutput: nothing is recorded; every batch notes where it begins
	// and ends in the destination's output, and position saves carry that
	// as the destination's mark (connector.HoldingReporter).
	markOutput
)

// write is one destination's stage. A record the destination refuses with
// a fatal error is nacked and the rest of the batch is still written; a
// transient error stops the stage, and the acker reports it once it has
// acknowledged everything before it. With dedup, records an earlier run
// already wrote are skipped, and a batch is never written while the batch
// before is written but not yet known to the next run (see dedup/):
//
//   - a destination that reads back what it wrote (markOutput) records
//     nothing before or after a write: each batch notes where it begins
//     and ends in the destination's output, and the position save that
//     acknowledges it commits that as the destination's mark;
//   - a destination that reports what it holds (intendBefore) records an
//     intent before each write; the next batch is taken and its intent
//     submitted while this one's commits, so no sync sits between two
//     writes;
//   - any other destination remembers a batch after writing it, and waits
//     for that before writing the next one.
func (e *Engine) write(ctx context.Context, d Destination, idx int, dd DedupDestination, mode dedupMode, ahead int, in <-chan *batch, out chan<- *batch) error {
	reports := mode == intendBefore
	var output connector.HoldingReporter
	if mode == markOutput {
		output, _ = connector.Ability[connector.HoldingReporter](d.Connector)
	}
	// A slot's buffers are made on its first use: a quiet pipeline (ten
	// thousand of them restarting in a fault storm) uses one or two of its
	// ahead+1, and each holds a destination's split and skip buffers.
	slots := make([]*prepareBuffers, ahead+1)
	slot := 0
	var written []record.Position
	reported := false
	var lastRemembered func() error
	defer func() {
		// The run is not over before what this destination wrote is
		// remembered: the next run loads the entries right away. Entries
		// commit in order, so waiting for the last one waits for all.
		if lastRemembered != nil {
			_ = lastRemembered()
		}
		if dd != nil && !reported && dd.Hits() > 0 && e.cfg.OnDedupSkipped != nil {
			e.cfg.OnDedupSkipped(d.ID, dd.Hits())
		}
	}()
	prepare := func(b *batch) preparedBatch {
		if slots[slot] == nil {
			slots[slot] = new(prepareBuffers)
		}
		p := e.prepare(ctx, d, idx, dd, reports, b, slots[slot])
		slot = (slot + 1) % len(slots)
		if dd != nil && !reported && dd.Pending() == 0 && dd.Hits() > 0 && e.cfg.OnDedupSkipped != nil {
			e.cfg.OnDedupSkipped(d.ID, dd.Hits())
			reported = true
		}
		return p
	}
	fail := func(b *batch, op string, err error) {
		b.results[idx] = writeResult{done: 0, err: &StageError{Kind: KindDestination, ID: d.ID, Op: op, Err: cerrors.Transient(err)}}
		send(ctx, out, b)
	}
	// queue holds the batches prepared (and their intents submitted) but
	// not yet written, oldest first.
	queue := make([]preparedBatch, 0, 2) // grows to ahead+1 on a busy pipeline
	for {
		if len(queue) == 0 {
			b, ok := receive(ctx, in)
			if !ok {
				return nil
			}
			queue = append(queue, prepare(b))
		}
		cur := queue[0]
		b := cur.b
		if output != nil {
			// The batches before are written: the output ends where this
			// one begins.
			if at, ok := output.Offset(); ok {
				b.marks[idx].begin = at
			}
		}
		if cur.failed != nil {
			b.results[idx] = *cur.failed
			send(ctx, out, b)
			return nil
		}
		if cur.intent != nil {
			// While this batch's intent commits, the batches already
			// waiting are taken and their intents submitted: they share the
			// next commit, and one sync covers several batches.
		ahead:
			for len(queue) <= ahead {
				select {
				case nb, ok := <-in:
					if !ok {
						break ahead
					}
					queue = append(queue, prepare(nb))
				default:
					break ahead
				}
			}
			if err := e.waitDedup(cur.intent); err != nil {
				fail(b, "record intended positions", err)
				return nil
			}
		}
		queue = append(queue[:0], queue[1:]...)
		if lastRemembered != nil {
			// The batch before must be remembered before this one is
			// written: a crash then duplicates at most one batch.
			if err := e.waitDedup(lastRemembered); err != nil {
				fail(b, "remember written positions", err)
				return nil
			}
			lastRemembered = nil
		}
		// Usually the destination writes exactly the batch's records, and
		// their positions are already at hand; collecting them one by one
		// is only needed when it writes fewer.
		remember := dd != nil && mode == rememberAfter
		var res writeResult
		res, written = e.writeAll(ctx, d, idx, b, cur.recs, cur.toRecord, written[:0], remember && !cur.whole)
		if output != nil {
			if at, ok := output.Offset(); ok {
				b.marks[idx].end = at
			}
		}
		toRemember := written
		if remember && cur.whole {
			// res.done counts the records handled from the first; a record
			// nacked among them is acknowledged anyway, so remembering it
			// changes nothing. (written stays this stage's own buffer: the
			// batch's positions go on to the acker.)
			toRemember = b.positions[:res.done]
		}
		if remember && len(toRemember) > 0 {
			// Records the destination accepted are remembered even when the
			// run is being torn down meanwhile: they will be delivered again,
			// and this entry is what keeps them from being written twice.
			key, wait, err := dd.Remember(context.WithoutCancel(ctx), e.dedupSource(b.source), toRemember)
			if err != nil && res.err == nil {
				res = writeResult{done: 0, err: &StageError{Kind: KindDestination, ID: d.ID, Op: "remember written positions", Err: cerrors.Transient(err)}}
			}
			if err == nil {
				b.dedupWait[idx] = wait
				b.dedupKeys[idx] = append(b.dedupKeys[idx], key)
				lastRemembered = wait
			}
		}
		b.results[idx] = res
		if !send(ctx, out, b) || res.err != nil {
			return nil
		}
	}
}

// waitDedup waits for a dedup entry the next write depends on, and counts
// the time in the run's stats.
func (e *Engine) waitDedup(wait func() error) error {
	start := time.Now()
	err := wait()
	e.stats.DedupWaitNanos.Add(int64(time.Since(start)))
	return err
}

// intentsAhead is how many batches a destination that reports what it
// holds prepares, and records intents for, ahead of the one it writes,
// when n batches are in flight: all but the few the reader fills and the
// acker holds (12 of 16, 28 of 32).
func intentsAhead(n int) int { return max(1, n-4) }

// prepareBuffers hold what a destination writes of one batch; the stage
// has one for each batch it prepares ahead and one for the batch it writes.
type prepareBuffers struct {
	own  destinationBuffer
	skip skipBuffer
	pos  []record.Position
}

// preparedBatch is a batch ready for one destination to write.
type preparedBatch struct {
	b        *batch
	recs     []record.Record
	toRecord func(int) int
	// whole: the destination writes the batch's records as they are.
	whole bool
	// intent, when set, returns once the intent of the records is durable.
	intent func() error
	// failed is the batch's result when it cannot be written at all.
	failed *writeResult
}

// prepare runs the destination's own processors on b, drops what an earlier
// run already wrote and, for a destination that reports what it holds,
// submits the intent to write the rest.
func (e *Engine) prepare(ctx context.Context, d Destination, idx int, dd DedupDestination, reports bool, b *batch, bufs *prepareBuffers) preparedBatch {
	p := preparedBatch{b: b, recs: b.out, toRecord: b.recordIndex}
	failed := func(res writeResult) preparedBatch {
		p.failed = &res
		return p
	}
	if len(d.Processors) > 0 {
		var err error
		if p.recs, err = bufs.own.prepare(ctx, e, b, d, idx); err != nil {
			return failed(writeResult{done: 0, err: err})
		}
		p.toRecord = bufs.own.recordIndex(len(b.records))
	}
	if dd != nil && dd.Pending() > 0 {
		before := dd.Hits()
		p.recs, p.toRecord = bufs.skip.filter(b, idx, dd, e.dedupSource(b.source), p.recs, p.toRecord)
		e.stats.DedupSkipped.Add(dd.Hits() - before)
	}

	p.whole = len(p.recs) == len(b.records) && len(d.Processors) == 0 && len(b.nacks) == 0
	if dd == nil || len(p.recs) == 0 {
		return p
	}
	if w, ok := dd.(writableDedup); ok {
		if err := w.Writable(); err != nil {
			// Written now, the batch could not be remembered, and the
			// restart would write it again: do not write it yet.
			return failed(writeResult{done: 0, err: &StageError{Kind: KindDestination, ID: d.ID,
				Op: "remember written positions", Err: cerrors.Transient(err)}})
		}
	}
	if !reports {
		return p
	}
	positions := b.positions
	if !p.whole {
		bufs.pos = bufs.pos[:0]
		for i := range p.recs {
			bufs.pos = append(bufs.pos, p.recs[i].Position)
		}
		positions = bufs.pos
	}
	key, wait, err := dd.Intend(context.WithoutCancel(ctx), e.dedupSource(b.source), positions)
	if err != nil {
		return failed(writeResult{done: 0, err: &StageError{Kind: KindDestination, ID: d.ID,
			Op: "record intended positions", Err: cerrors.Transient(err)}})
	}
	// The entry is deleted with the position save that acknowledges the
	// batch, as a remembered one is.
	b.dedupKeys[idx] = append(b.dedupKeys[idx], key)
	p.intent = wait
	return p
}

// writeAll writes recs, nacking records the destination refuses with a
// fatal error. With track, it appends the positions of the records it
// wrote to written.
func (e *Engine) writeAll(ctx context.Context, d Destination, idx int, b *batch, recs []record.Record, toRecord func(int) int,
	written []record.Position, track bool) (writeResult, []record.Position) {
	done := 0
	guard := e.cfg.WriteGuard
	for done < len(recs) {
		// Checked before every call, not once per batch, and as late as
		// possible: a pause (SIGSTOP, a frozen VM) can fall between two
		// calls for the same batch, and the lease may have run out then.
		if guard != nil {
			if err := guard(); err != nil {
				return writeResult{done: toRecord(done), err: &StageError{Kind: KindDestination, ID: d.ID, Op: "write", Err: cerrors.Transient(err)}}, written
			}
		}
		n, err := d.Connector.Write(ctx, recs[done:])
		n = min(max(n, 0), len(recs)-done)
		if track {
			for i := done; i < done+n; i++ {
				written = append(written, recs[i].Position)
			}
		}
		done += n
		if err == nil {
			if done == len(recs) {
				break
			}
			err = fmt.Errorf("connector wrote %d of %d records and returned no error", n, len(recs)-done+n)
		}
		rule := ""
		if pos, named := cerrors.RecordOf(err); named && bytes.Equal(pos, recs[done].Position) {
			// The connector says this record is the trouble: a dead-letter
			// rule may take it off the pipeline's hands, whatever its class.
			rule, _ = e.deadLetter(err, KindDestination, d.ID)
		}
		if rule != "" || cerrors.Classify(err).Class == cerrors.ClassFatal {
			// This record can never be written here: nack it and go on.
			n := nack{index: toRecord(done), kind: KindDestination, id: d.ID, err: err, rule: rule}
			if len(d.Processors) > 0 {
				// The destination's copy, whose buffer is reused.
				rec := recs[done].Clone()
				n.rec = &rec
			}
			b.destNacks[idx] = append(b.destNacks[idx], n)
			done++
			continue
		}
		return writeResult{done: toRecord(done), err: &StageError{Kind: KindDestination, ID: d.ID, Op: "write", Err: err}}, written
	}
	return writeResult{done: len(b.records)}, written
}

// skipBuffer holds what a destination writes of a batch after dropping
// the records an earlier run already wrote.
type skipBuffer struct {
	recs []record.Record
	idx  []int
}

func (s *skipBuffer) filter(b *batch, destIdx int, dd DedupDestination, source string, recs []record.Record, toRecord func(int) int) ([]record.Record, func(int) int) {
	s.recs, s.idx = s.recs[:0], s.idx[:0]
	for j := range recs {
		if skip, done := dd.Skip(source, recs[j].Position); skip {
			if done != nil {
				b.dedupKeys[destIdx] = append(b.dedupKeys[destIdx], done)
			}
			continue
		}
		s.recs = append(s.recs, recs[j])
		s.idx = append(s.idx, toRecord(j))
	}
	total := len(b.records)
	return s.recs, func(j int) int {
		if j >= len(s.idx) {
			return total
		}
		return s.idx[j]
	}
}

// destinationBuffer holds the copies a destination's own processors work
// on, so other destinations of the same batch see the records unchanged.
// A processor of the destination may turn a record into several (see
// runSplitting): they are all written for that record, which is done when
// the last of them is.
type destinationBuffer struct {
	recs  []record.Record
	idx   []int
	split splitState
}

func (o *destinationBuffer) prepare(ctx context.Context, e *Engine, b *batch, d Destination, destIdx int) ([]record.Record, error) {
	o.recs, o.idx = o.recs[:0], o.idx[:0]
	splits := destinationSplits(d)
	for j := range b.out {
		rec := b.out[j].Clone()
		i := b.recordIndex(j)
		if !splits {
			kept, n, err := e.runProcessors(ctx, d.Processors, &rec)
			if err != nil {
				return nil, err
			}
			o.add(b, destIdx, i, rec, kept, n)
			continue
		}
		if !e.splits[b.source] && record.IsDerived(rec.Position) {
			// As processRecord: the process stage checks when the
			// processors of the batch's source (its own or the
			// pipeline's) split too.
			return nil, derivedLookalike(e.sources[b.source].ID)
		}
		o.split.out = o.split.out[:0]
		kept, n, split, err := e.runSplitting(ctx, d.Processors, &rec, &o.split)
		if err != nil {
			return nil, err
		}
		if !split {
			o.add(b, destIdx, i, rec, kept, n)
			continue
		}
		for k := range o.split.out {
			x := &o.split.out[k]
			o.add(b, destIdx, i, x.rec, x.kept, x.nack)
		}
		clear(o.split.out)
	}
	return o.recs, nil
}

// add takes what the destination's processors made of the record at index
// i of the batch: rec to write, or a nack.
func (o *destinationBuffer) add(b *batch, destIdx, i int, rec record.Record, kept bool, n *nack) {
	if n != nil {
		n.index = i
		n.rec = &rec
		b.destNacks[destIdx] = append(b.destNacks[destIdx], *n)
	}
	if kept {
		o.recs = append(o.recs, rec)
		o.idx = append(o.idx, i)
	}
}

// destinationSplits reports whether a processor of d may turn a record
// into several.
func destinationSplits(d Destination) bool {
	for _, p := range d.Processors {
		if _, ok := p.Processor.(processor.Splitter); ok {
			return true
		}
	}
	return false
}

func (o *destinationBuffer) recordIndex(total int) func(int) int {
	return func(j int) int {
		if j >= len(o.idx) {
			return total
		}
		return o.idx[j]
	}
}
