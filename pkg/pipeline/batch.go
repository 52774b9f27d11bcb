package pipeline

import (
	"context"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/conduitry/conduit/pkg/record"
)

// batch is the unit that travels between stages. Batches come from a fixed
// pool and go back to it after the acknowledgement, so the records' memory
// (and whatever maps a source chooses to reuse in them) is recycled instead
// of allocated per record.
type batch struct {
	// source is the index of the source the batch was read from (in the
	// engine's sources): a batch holds the records of one source.
	source int
	// buf is the whole backing array the source reads into.
	buf []record.Record
	// records is buf[:n] after a read, in read order. Acks cover these.
	records []record.Record
	// positions[i] is records[i].Position, the slice Ack takes.
	positions []record.Position

	// out is what destinations write: records itself when every record is
	// kept, else the kept ones compacted into outBuf, with outIdx[j] the
	// index in records of out[j].
	out    []record.Record
	outBuf []record.Record
	outIdx []int // nil when out is records
	idxBuf []int

	// When a processor turned a record into several (split, clone),
	// records are what the processors made of the records read: the
	// records derived from one in its place, in order, each with a
	// position of its own (record.DerivedPosition). acks are then the
	// positions read, and acks[k] is acknowledged once the first
	// ackEnds[k] records are done: a record read is acknowledged with the
	// last record derived from it. Both are nil when every record stayed
	// one, and records are the records read.
	acks    []record.Position
	ackEnds []int
	// The buffers records, positions and ackEnds use when some were
	// derived, kept for the next time.
	itemBuf []record.Record
	posBuf  []record.Position
	endBuf  []int

	// nacks are the records processors rejected, in read order.
	nacks []nack
	// destNacks[i] are the records destination i refused (written only by
	// its stage); results[i] is how its write ended.
	destNacks [][]nack
	results   []writeResult
	// dedupWait[i] returns once destination i's written positions are
	// durable (nil without dedup); dedupKeys[i] are its dedup entries to
	// delete with the source position that acknowledges this batch.
	dedupWait []func() error
	dedupKeys [][][]byte
	// marks[i] is where the batch begins and ends in destination i's
	// output (markOutput); noMark otherwise.
	marks []outputSpan
}

// outputSpan is where a batch begins and ends in a destination's output.
type outputSpan struct{ begin, end int64 }

// noMark is the span of a batch in the output of a destination that has
// no mark.
var noMark = outputSpan{-1, -1}

// nack is a record rejected by a processor or refused by a destination.
type nack struct {
	index int // in batch.records
	kind  Kind
	id    string
	err   error
	// rule is the recovery rule that sent the record to the queue
	// (dead-letter, or "quarantine"), empty for a plain nack.
	rule string
	// rec is the record as the component that nacked it had it, when that
	// is a destination's own copy (changed by the destination's
	// processors); nil means batch.records[index]. The dead-letter record
	// carries it, as Conduit's carries the message of the branch that
	// nacked.
	rec *record.Record
}

type writeResult struct {
	// done is how many leading records (in read order) this destination
	// has handled - written, refused (nacked) or not meant for it.
	done int
	// err is the transient failure that stopped it, nil when done is all.
	err error
}

func newBatch(size, destinations int) *batch {
	return &batch{
		buf:       make([]record.Record, size),
		positions: make([]record.Position, 0, size),
		destNacks: make([][]nack, destinations),
		results:   make([]writeResult, destinations),
		dedupWait: make([]func() error, destinations),
		dedupKeys: make([][][]byte, destinations),
		marks:     slices.Repeat([]outputSpan{noMark}, destinations),
	}
}

// initialBatchSize is the size a batch starts at; it doubles, up to the
// configured batch size, each time a source fills it completely.
const initialBatchSize = 16

// batchPool hands out at most max batches and takes them back after the
// acknowledgement; waiting for a free batch is the engine's backpressure.
// The readers (one per source) call get and grow, only the acker calls
// put.
type batchPool struct {
	free chan *batch
	// made counts the batches made so far, up to max; readers of several
	// sources make them at once.
	made         atomic.Int32
	max          int
	maxSize      int
	destinations int
}

func newBatchPool(max, maxSize, destinations int) *batchPool {
	return &batchPool{free: make(chan *batch, max), max: max, maxSize: maxSize, destinations: destinations}
}

// get returns a free batch, a new one while fewer than max exist, or nil
// when ctx is done first.
func (p *batchPool) get(ctx context.Context) *batch {
	select {
	case b := <-p.free:
		return b
	default:
	}
	if p.made.Add(1) <= int32(p.max) {
		return newBatch(min(initialBatchSize, p.maxSize), p.destinations)
	}
	p.made.Add(-1)
	select {
	case b := <-p.free:
		return b
	case <-ctx.Done():
		return nil
	}
}

// grow doubles b's capacity for its next read when the source filled it:
// the source has more to give than the batch holds.
func (p *batchPool) grow(b *batch, n int) {
	if n < len(b.buf) || len(b.buf) >= p.maxSize {
		return
	}
	size := min(2*len(b.buf), p.maxSize)
	buf := make([]record.Record, size)
	copy(buf, b.buf)
	b.buf = buf
	b.records = buf[:n]
	if b.outIdx == nil {
		b.out = b.records
	}
}

func (p *batchPool) put(b *batch) { p.free <- b }

// expand switches b to derived records (see batch.acks) when the processors
// turned records[i] into several: the records before it stay one each, and
// those of them that are kept go on to the destinations. compacted says
// that outBuf already holds them.
func (b *batch) expand(i int, compacted bool) {
	b.itemBuf = append(b.itemBuf[:0], b.records[:i]...)
	b.posBuf = append(b.posBuf[:0], b.positions[:i]...)
	b.ackEnds = b.endBuf[:0]
	for k := 1; k <= i; k++ {
		b.ackEnds = append(b.ackEnds, k)
	}
	if !compacted {
		b.outBuf = append(b.outBuf[:0], b.records[:i]...)
		b.idxBuf = b.idxBuf[:0]
		for k := range i {
			b.idxBuf = append(b.idxBuf, k)
		}
	}
}

// addDerived appends one record of an expanded batch: kept, dropped (a
// processor filtered it) or rejected (n). It reports whether the record
// was filtered.
func (b *batch) addDerived(rec record.Record, kept bool, n *nack) (filtered bool) {
	idx := len(b.itemBuf)
	b.itemBuf = append(b.itemBuf, rec)
	b.posBuf = append(b.posBuf, rec.Position)
	switch {
	case n != nil:
		n.index = idx
		b.nacks = append(b.nacks, *n)
	case !kept:
		return true
	default:
		b.outBuf = append(b.outBuf, rec)
		b.idxBuf = append(b.idxBuf, idx)
	}
	return false
}

// endRead marks the end of the records derived from one record read.
func (b *batch) endRead() { b.ackEnds = append(b.ackEnds, len(b.itemBuf)) }

// finishExpand makes the derived records the batch's records.
func (b *batch) finishExpand() {
	b.acks, b.positions = b.positions, b.posBuf
	b.records = b.itemBuf
	b.out, b.outIdx = b.outBuf, b.idxBuf
}

// ackable returns how many records read are acknowledged when the first
// limit records are done, and how many records those cover: limit, unless
// it falls among the records derived from one read, which are then not
// acknowledged (nor any of them counted) before the last of them is done.
func (b *batch) ackable(limit int) (read, covered int) {
	if b.ackEnds == nil {
		return limit, limit
	}
	k := sort.Search(len(b.ackEnds), func(k int) bool { return b.ackEnds[k] > limit })
	if k == 0 {
		return 0, 0
	}
	return k, b.ackEnds[k-1]
}

// readPositions are the positions of the records read, which the source
// is acknowledged with.
func (b *batch) readPositions() []record.Position {
	if b.acks != nil {
		return b.acks
	}
	return b.positions
}

func (b *batch) fill(n int) {
	b.records = b.buf[:n]
	b.out = b.records
	b.positions = b.positions[:0]
	for i := range b.records {
		b.positions = append(b.positions, b.records[i].Position)
	}
}

// recordIndex maps an index of out (len(out) included) to one of records.
func (b *batch) recordIndex(outIndex int) int {
	switch {
	case b.outIdx == nil:
		return outIndex
	case outIndex >= len(b.outIdx):
		return len(b.records)
	default:
		return b.outIdx[outIndex]
	}
}

// reset readies the batch for the pool. The records stay in buf on purpose:
// a source may reuse their maps and buffers for the next read.
func (b *batch) reset() {
	if b.acks != nil {
		// Derived records own their maps: they are dropped, not reused.
		clear(b.itemBuf)
		b.itemBuf = b.itemBuf[:0]
		clear(b.posBuf)
		b.posBuf, b.positions, b.acks = b.positions[:0], b.acks, nil
		b.endBuf, b.ackEnds = b.ackEnds[:0], nil
	}
	b.records, b.out, b.outIdx = nil, nil, nil
	clear(b.outBuf)
	b.outBuf = b.outBuf[:0]
	b.idxBuf = b.idxBuf[:0]
	clear(b.positions)
	b.positions = b.positions[:0]
	clear(b.nacks)
	b.nacks = b.nacks[:0]
	for i := range b.destNacks {
		clear(b.destNacks[i])
		b.destNacks[i] = b.destNacks[i][:0]
		b.dedupKeys[i] = nil // handed to the position save, which keeps them
	}
	clear(b.results)
	clear(b.dedupWait)
	for i := range b.marks {
		b.marks[i] = noMark
	}
}
