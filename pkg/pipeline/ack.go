package pipeline

import (
	"bytes"
	"context"
	"slices"
	"sort"

	"go.uber.org/zap"

	cerrors "github.com/conduitry/conduit/errors"
	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// ack is the acker stage: it takes batches in read order, waits until every
// destination is done with each, sends nacked records to the dead-letter
// queue (ending the run when the nack window overflows), acknowledges the
// records to their source and hands its newest position to its persister
// (persisters[i] is sources[i]'s). Batches of several sources are
// interleaved in one read order, and each source's batches keep its own:
// each source is acknowledged in the order it read.
//
// When batches finish faster than the source acknowledges them, one Ack
// covers several (see ackGroup): a batch that is done waits for the source
// only while the next one is done too (or its dedup entry is being
// committed), never for one still being written.
func (e *Engine) ack(ctx context.Context, inflight <-chan *batch, fromDest []chan *batch, free *batchPool, persisters []*persister, marking []holdingDedup, window *nackWindow) error {
	group := ackGroup{e: e, free: free, persisters: persisters, max: max(1, cap(inflight)/2),
		positions: make([][]record.Position, len(persisters)), with: make([][]store.Op, len(persisters)),
		records: make([]int, len(persisters)), nacked: make([]int, len(persisters)),
		marking: marking, marks: slices.Repeat([]int64{-1}, len(marking))}
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
			cause := n.err
			if window.threshold > 0 {
				// A window that tolerates nacks overflowed: that is the
				// cause. With none tolerated (the default) the record's
				// error is.
				cause = &DLQWindowError{Nacks: window.nacks, Size: window.size, Threshold: window.threshold, Err: n.err}
			}
			limit, failure = cut, &StageError{Kind: n.kind, ID: n.id, Op: opOf(n.kind), Err: cause}
			nacks = nacks[:slices.IndexFunc(nacks, func(x nack) bool { return x.index == cut })]
		}
		if b.ackEnds != nil && limit < len(b.records) {
			// Records derived from one read are acknowledged together: what
			// the run got through of them is done again after the restart,
			// rejected records included.
			_, limit = b.ackable(limit)
			nacks = nacks[:sort.Search(len(nacks), func(k int) bool { return nacks[k].index >= limit })]
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
			now := e.cfg.Now()
			for _, n := range nacks {
				failed := &b.records[n.index]
				if n.rec != nil {
					failed = n.rec
				}
				dlqBuf = append(dlqBuf, e.dlqRecord(*failed, e.nodes.sources[b.source], n, now))
			}
			if err := e.writeDLQ(ctx, dlqBuf); err != nil {
				return err
			}
			e.stats.RecordsNacked.Add(int64(len(nacks)))
			e.reportDeadLettered(b, nacks)
		}
		if failure == nil {
			group.add(b, limit, nackedRecords(nacks))
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
			group.add(b, limit, nackedRecords(nacks))
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
//
// The group holds the batches of every source; what it acknowledges is
// kept per source (positions[i], with[i], records[i] and nacked[i] are
// sources[i]'s: the positions it read, not those of records derived from
// them), and each source gets one Ack per flush.
//
// The marks of destinations that read back what they wrote go with the
// last position save of the flush: saves commit in the order they are
// submitted, so once it is durable every save of the flush is, and every
// record before the mark is acknowledged. The mark is where the group's
// last batch ends in the destination's output (where a batch acknowledged
// in part begins: what follows it comes again).
type ackGroup struct {
	e          *Engine
	free       *batchPool
	persisters []*persister
	max        int

	batches   []*batch
	positions [][]record.Position
	// with[i] are the writes sources[i]'s position save commits with it:
	// the dedup entries its batches free.
	with [][]store.Op
	// marking[d] moves destination d's mark (nil when it has none), and
	// marks[d] is the mark the flush commits, -1 before the group has one.
	// cut says that a batch was acknowledged in part: the mark stays at
	// its beginning.
	marking []holdingDedup
	marks   []int64
	cut     bool
	// records[i] counts the records positions[i] cover (more than
	// positions when processors derived several from one), nacked[i]
	// those of them sent to the dead-letter queue.
	records []int
	nacked  []int
}

// add puts the first limit records of b in the group, nacked of them sent
// to the dead-letter queue; limit covers every record derived from the
// records read it acknowledges.
func (g *ackGroup) add(b *batch, limit, nacked int) {
	s := b.source
	g.batches = append(g.batches, b)
	g.addMarks(b, limit)
	read, _ := b.ackable(limit)
	g.positions[s] = append(g.positions[s], b.readPositions()[:read]...)
	g.records[s] += limit
	g.nacked[s] += nacked
	if limit == len(b.records) {
		// Only a batch acknowledged in full frees its dedup entries:
		// records after a partial acknowledgement are delivered again and
		// must still be recognised. A batch's entries hold positions of
		// its source only: they go with that source's position.
		for _, keys := range b.dedupKeys {
			for _, k := range keys {
				g.with[s] = append(g.with[s], store.Op{Key: k, Delete: true})
			}
		}
	}
}

// flush acknowledges the group's records to each source in one call,
// hands each source's newest position (and the dedup entries its batches
// free) to its persister and frees the batches.
func (g *ackGroup) flush(ctx context.Context) error {
	if len(g.batches) == 0 {
		return nil
	}
	e := g.e
	last := -1 // the source whose save is submitted last carries the marks
	for s, positions := range g.positions {
		if len(positions) > 0 {
			last = s
		}
	}
	for s, positions := range g.positions {
		n := len(positions)
		if n == 0 {
			continue
		}
		src := e.sources[s]
		if err := src.Connector.Ack(ctx, positions); err != nil {
			return &StageError{Kind: KindSource, ID: src.ID, Op: "ack", Err: err}
		}
		e.stats.RecordsAcked.Add(int64(n))
		e.stats.RecordsWritten.Add(int64(g.records[s] - g.nacked[s]))
		with := g.with[s]
		for d, m := range g.marks {
			if m >= 0 && s == last {
				with = append(with, g.marking[d].Mark(m))
			}
		}
		g.persisters[s].offer(positions[n-1], with) // copies what it keeps
		if e.cfg.OnAck != nil && g.records[s] > g.nacked[s] {
			e.cfg.OnAck(g.records[s] - g.nacked[s])
		}
		clear(positions) // they point into the batches' records
		g.positions[s] = positions[:0]
		clear(with)
		g.with[s] = with[:0]
		g.records[s], g.nacked[s] = 0, 0
	}
	for _, b := range g.batches {
		b.reset()
		g.free.put(b)
	}
	for d := range g.marks {
		g.marks[d] = -1
	}
	g.cut = false
	clear(g.batches)
	g.batches = g.batches[:0]
	return nil
}

// addMarks moves the group's marks for b, the records up to limit of
// which are acknowledged.
func (g *ackGroup) addMarks(b *batch, limit int) {
	if g.cut {
		return
	}
	g.cut = limit < len(b.records)
	for d := range g.marks {
		span := b.marks[d]
		switch {
		case span == noMark:
		case g.cut:
			g.marks[d] = span.begin
		default:
			g.marks[d] = span.end
		}
	}
}

// markers returns, per destination, what moves its mark: its dedup view
// for a destination that reads back what it wrote, nil otherwise; nil
// when no destination has a mark.
func markers(dedups []DedupDestination, modes []dedupMode) []holdingDedup {
	var out []holdingDedup
	for i, dd := range dedups {
		if h, ok := dd.(holdingDedup); ok && modes[i] == markOutput {
			if out == nil {
				out = make([]holdingDedup, len(dedups))
			}
			out[i] = h
		}
	}
	return out
}

// mergedNacks returns the batch's nacks in read order, one per record
// (a record refused by several destinations goes to the queue once; the
// records a destination's processors derived from one are each a record
// of their own).
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
		if b.nackedBefore(out[:pos], &n) {
			continue
		}
		out = append(out, nack{})
		copy(out[pos+1:], out[pos:])
		out[pos] = n
	}
	return out
}

// nackedBefore reports whether the record n is about is nacked in out
// (sorted by index) already.
func (b *batch) nackedBefore(out []nack, n *nack) bool {
	for k := len(out) - 1; k >= 0 && out[k].index == n.index; k-- {
		if bytes.Equal(b.nackedPosition(&out[k]), b.nackedPosition(n)) {
			return true
		}
	}
	return false
}

// nackedPosition is the position of the record n is about.
func (b *batch) nackedPosition(n *nack) record.Position {
	if n.rec != nil {
		return n.rec.Position
	}
	return b.records[n.index].Position
}

// nackedRecords is how many of the batch's records nacks (sorted by index)
// are about: several nacks of one record (of records a destination's
// processors derived from it) count as one.
func nackedRecords(nacks []nack) int {
	n := 0
	for k := range nacks {
		if k == 0 || nacks[k].index != nacks[k-1].index {
			n++
		}
	}
	return n
}

func allEmpty(lists [][]nack) bool {
	for _, l := range lists {
		if len(l) > 0 {
			return false
		}
	}
	return true
}
