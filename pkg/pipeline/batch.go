package pipeline

import "github.com/conduitry/conduit/pkg/record"

// batch is the unit that travels between stages. Batches come from a fixed
// pool and go back to it after the acknowledgement, so the records' memory
// (and whatever maps a source chooses to reuse in them) is recycled instead
// of allocated per record.
type batch struct {
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

	// nacks are the records processors rejected, in read order.
	nacks []nack
	// destNacks[i] are the records destination i refused (written only by
	// its stage); results[i] is how its write ended.
	destNacks [][]nack
	results   []writeResult
}

// nack is a record rejected by a processor or refused by a destination.
type nack struct {
	index int // in batch.records
	kind  Kind
	id    string
	err   error
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
	}
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
	}
	clear(b.results)
}
