package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/processor"
	"github.com/conduitry/conduit/pkg/record"
)

// Metadata keys a record sent to the dead-letter queue carries (Conduit's).
const (
	MetadataDLQNackError  = "conduit.dlq.nack.error"
	MetadataDLQNackNodeID = "conduit.dlq.nack.node.id"
)

// read is the reader stage. It stops reading when readCtx is done (graceful
// stop) and returns nil, so the stages after it drain; it abandons the
// batch when runCtx is done. out hands a batch on and reports false when
// the run is being torn down.
func (e *Engine) read(readCtx, runCtx context.Context, free *batchPool, out func(*batch) bool) error {
	src := e.cfg.Source
	for {
		b := free.get(readCtx)
		if b == nil {
			return nil
		}
		n, err := src.Connector.Read(readCtx, b.buf)
		if readCtx.Err() != nil && (err != nil || n == 0) {
			return nil
		}
		if err != nil {
			return &StageError{Kind: KindSource, ID: src.ID, Op: "read", Err: err}
		}
		if n <= 0 || n > len(b.buf) {
			return &StageError{Kind: KindSource, ID: src.ID, Op: "read",
				Err: fmt.Errorf("connector returned %d records for a batch of %d", n, len(b.buf))}
		}
		b.fill(n)
		free.grow(b, n)
		e.stats.RecordsRead.Add(int64(n))
		if !out(b) {
			_ = runCtx
			return nil
		}
	}
}

// dispatch hands a batch to the acker (first, to keep read order) and to
// every destination. The channels hold every batch there is, so these sends
// never wait for long; ctx only matters when the run is torn down.
func dispatch(ctx context.Context, b *batch, inflight chan<- *batch, toDest []chan *batch) bool {
	if !send(ctx, inflight, b) {
		return false
	}
	for _, ch := range toDest {
		if !send(ctx, ch, b) {
			return false
		}
	}
	return true
}

// receive takes the next batch of a stage's input; ok is false when the
// input is closed (the stage before has drained) or the run is torn down.
func receive(ctx context.Context, in <-chan *batch) (b *batch, ok bool) {
	select {
	case b, ok = <-in:
		return b, ok
	case <-ctx.Done():
		return nil, false
	}
}

func closeOutputs(inflight chan *batch, toDest []chan *batch) {
	close(inflight)
	for _, ch := range toDest {
		close(ch)
	}
}

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

// write is one destination's stage. A record the destination refuses with
// a fatal error is nacked and the rest of the batch is still written; a
// transient error stops the stage, and the acker reports it once it has
// acknowledged everything before it. With dedup, records an earlier run
// already wrote are skipped, and a batch is never written while the batch
// before is written but not yet remembered (see dedup/):
//
//   - a destination that reports what it holds (reports) records an intent
//     before each write; the next batch is taken and its intent submitted
//     while this one's commits, so no sync sits between two writes;
//   - any other destination remembers a batch after writing it, and waits
//     for that before writing the next one.
func (e *Engine) write(ctx context.Context, d Destination, idx int, dd DedupDestination, reports bool, in <-chan *batch, out chan<- *batch) error {
	var slots [maxIntentsAhead + 1]prepareBuffers
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
		p := e.prepare(ctx, d, idx, dd, reports, b, &slots[slot])
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
	queue := make([]preparedBatch, 0, maxIntentsAhead+1)
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
			for len(queue) <= maxIntentsAhead {
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
			if err := cur.intent(); err != nil {
				fail(b, "record intended positions", err)
				return nil
			}
		}
		queue = append(queue[:0], queue[1:]...)
		if lastRemembered != nil {
			// The batch before must be remembered before this one is
			// written: a crash then duplicates at most one batch.
			if err := lastRemembered(); err != nil {
				fail(b, "remember written positions", err)
				return nil
			}
			lastRemembered = nil
		}
		// Usually the destination writes exactly the batch's records, and
		// their positions are already at hand; collecting them one by one
		// is only needed when it writes fewer.
		remember := dd != nil && !reports
		var res writeResult
		res, written = e.writeAll(ctx, d, idx, b, cur.recs, cur.toRecord, written[:0], remember && !cur.whole)
		if remember && cur.whole {
			// res.done counts the records handled from the first; a record
			// nacked among them is acknowledged anyway, so remembering it
			// changes nothing.
			written = b.positions[:res.done]
		}
		if remember && len(written) > 0 {
			// Records the destination accepted are remembered even when the
			// run is being torn down meanwhile: they will be delivered again,
			// and this entry is what keeps them from being written twice.
			key, wait, err := dd.Remember(context.WithoutCancel(ctx), written)
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

// maxIntentsAhead is how many batches a destination that reports what it
// holds prepares, and records intents for, ahead of the one it writes.
const maxIntentsAhead = 12

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
		if p.recs, err = bufs.own.prepare(ctx, b, d, idx); err != nil {
			return failed(writeResult{done: 0, err: err})
		}
		p.toRecord = bufs.own.recordIndex(len(b.records))
	}
	if dd != nil && dd.Pending() > 0 {
		before := dd.Hits()
		p.recs, p.toRecord = bufs.skip.filter(b, idx, dd, p.recs, p.toRecord)
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
	key, wait, err := dd.Intend(context.WithoutCancel(ctx), positions)
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
	for done < len(recs) {
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
		if cerrors.Classify(err).Class == cerrors.ClassFatal {
			// This record can never be written here: nack it and go on.
			b.destNacks[idx] = append(b.destNacks[idx], nack{index: toRecord(done), kind: KindDestination, id: d.ID, err: err})
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

func (s *skipBuffer) filter(b *batch, destIdx int, dd DedupDestination, recs []record.Record, toRecord func(int) int) ([]record.Record, func(int) int) {
	s.recs, s.idx = s.recs[:0], s.idx[:0]
	for j := range recs {
		if skip, done := dd.Skip(recs[j].Position); skip {
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
type destinationBuffer struct {
	recs []record.Record
	idx  []int
}

func (o *destinationBuffer) prepare(ctx context.Context, b *batch, d Destination, destIdx int) ([]record.Record, error) {
	o.recs, o.idx = o.recs[:0], o.idx[:0]
	for j := range b.out {
		rec := b.out[j].Clone()
		i := b.recordIndex(j)
		kept, n, err := runProcessors(ctx, d.Processors, &rec)
		if err != nil {
			return nil, err
		}
		if n != nil {
			n.index = i
			b.destNacks[destIdx] = append(b.destNacks[destIdx], *n)
		}
		if kept {
			o.recs = append(o.recs, rec)
			o.idx = append(o.idx, i)
		}
	}
	return o.recs, nil
}

func (o *destinationBuffer) recordIndex(total int) func(int) int {
	return func(j int) int {
		if j >= len(o.idx) {
			return total
		}
		return o.idx[j]
	}
}

// ack is the acker stage: it takes batches in read order, waits until every
// destination is done with each, sends nacked records to the dead-letter
// queue (ending the run when the nack window overflows), acknowledges the
// records to the source and hands the newest position to the persister.
//
// When batches finish faster than the source acknowledges them, one Ack
// covers several (see ackGroup): a batch that is done waits for the source
// only while the next one is done too (or its dedup entry is being
// committed), never for one still being written.
func (e *Engine) ack(ctx context.Context, inflight <-chan *batch, fromDest []chan *batch, free *batchPool, p *persister, window *nackWindow) error {
	group := ackGroup{e: e, free: free, p: p, max: max(1, cap(inflight)/2)}
	var dlqBuf []record.Record
	for {
		b, ok, ready := tryReceive(inflight, len(group.batches) > 0)
		if !ready {
			if err := group.flush(ctx); err != nil {
				return err
			}
			b, ok = receive(ctx, inflight)
		}
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			// The source ended: what is done is acknowledged.
			return group.flush(ctx)
		}
		limit := len(b.records)
		var failure error
		for i, ch := range fromDest {
			// Results channels are never closed while the acker runs.
			got, _, ready := tryReceive(ch, len(group.batches) > 0)
			if !ready {
				if err := group.flush(ctx); err != nil {
					return err
				}
				select {
				case got = <-ch:
				case <-ctx.Done():
					return nil
				}
			}
			if got != b {
				// Stages are FIFO; anything else is a bug in the engine
				// and acknowledging would break the read-order promise.
				panic("pipeline: destination results out of read order")
			}
			if r := b.results[i]; r.err != nil && r.done <= limit {
				limit, failure = r.done, r.err
			}
			// The source may only hear about records whose positions the
			// dedup store holds durably. The group waits along: its batches'
			// entries are durable already, and this one's is in the group
			// commit under way, so acknowledgements wait for one commit at
			// most and are not split into one call per batch.
			if wait := b.dedupWait[i]; wait != nil {
				if err := wait(); err != nil && failure == nil {
					limit, failure = 0, &StageError{Kind: KindDestination, ID: e.cfg.Destinations[i].ID,
						Op: "remember written positions", Err: cerrors.Transient(err)}
				}
			}
		}
		if ctx.Err() != nil {
			// The run is being torn down (another stage failed or a force
			// stop): results may be cut short by the cancellation and prove
			// nothing. Nothing more is acknowledged; the records are read
			// again after the next start.
			return nil
		}

		nacks := b.mergedNacks()
		if len(nacks) == 0 {
			window.addClean(limit)
		} else if cut, n := window.walk(limit, nacks); n != nil {
			e.log.Error("dead-letter queue window overflowed: the pipeline stops",
				zap.Int("window_size", window.size), zap.Int("window_nack_threshold", window.threshold),
				zap.String("component", n.id), zap.Error(n.err))
			// The overflowing record is neither queued nor acknowledged:
			// after a restart it is read again.
			limit, failure = cut, &StageError{Kind: n.kind, ID: n.id, Op: opOf(n.kind), Err: n.err}
			nacks = nacks[:slices.IndexFunc(nacks, func(x nack) bool { return x.index == cut })]
		}
		if failure != nil || len(nacks) > 0 {
			// What can fail from here on must not take the batches before
			// it down with it: they are acknowledged first.
			if err := group.flush(ctx); err != nil {
				return err
			}
		}
		if len(nacks) > 0 {
			dlqBuf = dlqBuf[:0]
			for _, n := range nacks {
				dlqBuf = append(dlqBuf, dlqRecord(b.records[n.index], n))
			}
			if err := e.writeDLQ(ctx, dlqBuf); err != nil {
				return err
			}
			e.stats.RecordsNacked.Add(int64(len(nacks)))
		}
		if failure == nil {
			group.add(b, limit, len(nacks))
			if len(group.batches) >= group.max {
				if err := group.flush(ctx); err != nil {
					return err
				}
			}
			continue
		}
		// The group is empty here (flushed above): what this batch got
		// through is acknowledged on its own before the run ends.
		if limit > 0 {
			group.add(b, limit, len(nacks))
			if err := group.flush(ctx); err != nil {
				return err
			}
		}
		return failure
	}
}

// tryReceive takes the next batch from in without waiting when hurry is
// set (ready is false when there is none yet); otherwise it says "not
// ready" so that the caller waits.
func tryReceive(in <-chan *batch, hurry bool) (b *batch, ok, ready bool) {
	if !hurry {
		return nil, false, false
	}
	select {
	case b, ok = <-in:
		return b, ok, true
	default:
		return nil, false, false
	}
}

// ackGroup holds batches that are done but for the source's
// acknowledgement, in read order. A source whose Ack is a round trip (a
// standalone connector, a broker's commit) would otherwise hold the
// pipeline to one batch per round trip: the acker falls behind, every
// batch in flight waits for it, and the source cannot read.
type ackGroup struct {
	e    *Engine
	free *batchPool
	p    *persister
	max  int

	batches   []*batch
	positions []record.Position
	deletes   [][]byte
	nacked    int
}

// add puts the first limit records of b in the group, nacked of them sent
// to the dead-letter queue.
func (g *ackGroup) add(b *batch, limit, nacked int) {
	g.batches = append(g.batches, b)
	g.positions = append(g.positions, b.positions[:limit]...)
	g.nacked += nacked
	if limit == len(b.records) {
		// Only a batch acknowledged in full frees its dedup entries:
		// records after a partial acknowledgement are delivered again and
		// must still be recognised.
		for _, keys := range b.dedupKeys {
			g.deletes = append(g.deletes, keys...)
		}
	}
}

// flush acknowledges the group's records to the source in one call, hands
// the newest position (and the dedup entries the batches free) to the
// persister and frees the batches.
func (g *ackGroup) flush(ctx context.Context) error {
	if len(g.batches) == 0 {
		return nil
	}
	e := g.e
	if n := len(g.positions); n > 0 {
		if err := e.cfg.Source.Connector.Ack(ctx, g.positions); err != nil {
			return &StageError{Kind: KindSource, ID: e.cfg.Source.ID, Op: "ack", Err: err}
		}
		e.stats.RecordsAcked.Add(int64(n))
		e.stats.RecordsWritten.Add(int64(n - g.nacked))
		g.p.offer(g.positions[n-1], g.deletes) // copies the keys it keeps
		if e.cfg.OnAck != nil && n > g.nacked {
			e.cfg.OnAck(n - g.nacked)
		}
	}
	for _, b := range g.batches {
		b.reset()
		g.free.put(b)
	}
	clear(g.batches)
	g.batches = g.batches[:0]
	clear(g.positions) // they point into the batches' records
	g.positions = g.positions[:0]
	clear(g.deletes)
	g.deletes = g.deletes[:0]
	g.nacked = 0
	return nil
}

func opOf(k Kind) string {
	if k == KindProcessor {
		return "process"
	}
	return "write"
}

// mergedNacks returns the batch's nacks in read order, one per record
// (a record refused by several destinations goes to the queue once).
func (b *batch) mergedNacks() []nack {
	if len(b.destNacks) == 0 || allEmpty(b.destNacks) {
		return b.nacks
	}
	merged := append([]nack(nil), b.nacks...)
	for _, dn := range b.destNacks {
		merged = append(merged, dn...)
	}
	// Insertion sort by index, keeping the first nack of each record: nacks
	// are rare, and each list is already in order.
	out := merged[:0]
	for _, n := range merged {
		pos := len(out)
		for pos > 0 && out[pos-1].index > n.index {
			pos--
		}
		if pos > 0 && out[pos-1].index == n.index {
			continue
		}
		out = append(out, nack{})
		copy(out[pos+1:], out[pos:])
		out[pos] = n
	}
	return out
}

func allEmpty(lists [][]nack) bool {
	for _, l := range lists {
		if len(l) > 0 {
			return false
		}
	}
	return true
}

func dlqRecord(r record.Record, n nack) record.Record {
	out := r.Clone()
	if out.Metadata == nil {
		out.Metadata = record.Metadata{}
	}
	out.Metadata[MetadataDLQNackError] = n.err.Error()
	out.Metadata[MetadataDLQNackNodeID] = n.id
	return out
}

// writeDLQ writes nacked records to the dead-letter queue. A failure is
// transient: the records were not acknowledged, so after the restart they
// are read, rejected and offered to the queue again.
func (e *Engine) writeDLQ(ctx context.Context, recs []record.Record) error {
	dlq := e.cfg.DLQ.Connector
	if dlq == nil {
		return nil
	}
	for written := 0; written < len(recs); {
		n, err := dlq.Write(ctx, recs[written:])
		written += min(max(n, 0), len(recs)-written)
		if err == nil && written < len(recs) {
			err = fmt.Errorf("wrote %d of %d records and returned no error", written, len(recs))
		}
		if err != nil {
			return &StageError{Kind: KindDLQ, ID: DLQID, Op: "write", Err: cerrors.Transient(err)}
		}
	}
	return nil
}

// nackWindow is the sliding window of Conduit's DLQ settings: it remembers
// whether each of the last size records was nacked and overflows when more
// than threshold of them were. A size of 0 never overflows.
type nackWindow struct {
	size, threshold int
	ring            []bool
	next, nacks     int
}

func newNackWindow(size, threshold int) *nackWindow {
	return &nackWindow{size: size, threshold: threshold, ring: make([]bool, size)}
}

// walk adds records[0:limit] in read order, nacks being the nacked ones
// (sorted by index). At the first overflow it stops and returns the index
// of that record and its nack; otherwise it returns limit and nil.
func (w *nackWindow) walk(limit int, nacks []nack) (int, *nack) {
	next := 0
	for i := range limit {
		var n *nack
		if next < len(nacks) && nacks[next].index == i {
			n = &nacks[next]
			next++
		}
		if w.add(n != nil) {
			return i, n
		}
	}
	return limit, nil
}

// addClean records n records without a nack: the common case, done in bulk.
func (w *nackWindow) addClean(n int) {
	if w.size == 0 || w.nacks == 0 {
		// Nothing in the window to slide out.
		w.next = (w.next + n) % max(w.size, 1)
		return
	}
	if n >= w.size {
		clear(w.ring)
		w.nacks, w.next = 0, 0
		return
	}
	for range n {
		w.add(false)
	}
}

// add records one record and reports whether the window overflowed.
func (w *nackWindow) add(nacked bool) bool {
	if w.size == 0 {
		return false
	}
	if w.ring[w.next] {
		w.nacks--
	}
	w.ring[w.next] = nacked
	if nacked {
		w.nacks++
	}
	w.next = (w.next + 1) % w.size
	return w.nacks > w.threshold
}
