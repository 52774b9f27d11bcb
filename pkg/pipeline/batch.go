package pipeline

import "github.com/conduitry/conduit/pkg/record"

// batch is the unit that travels between stages. Batches come from a fixed
// pool and go back to it after the acknowledgement, so the records' memory
// (and whatever maps a source chooses to reuse in them) is recycled instead
// of allocated per record.
type batch struct {
	// buf is the whole backing array the source reads into.
	buf []record.Record
	// records is buf[:n] after a read.
	records []record.Record
	// positions[i] is records[i].Position, the slice Ack takes.
	positions []record.Position
	// results[i] is what destination i reported; written only by that
	// destination's stage, read by the acker after the channel handoff.
	results []writeResult
}

type writeResult struct {
	written int
	err     error
}

func newBatch(size, destinations int) *batch {
	return &batch{
		buf:       make([]record.Record, size),
		positions: make([]record.Position, 0, size),
		results:   make([]writeResult, destinations),
	}
}

func (b *batch) fill(n int) {
	b.records = b.buf[:n]
	b.positions = b.positions[:0]
	for i := range b.records {
		b.positions = append(b.positions, b.records[i].Position)
	}
}

// reset readies the batch for the pool. The records stay in buf on purpose:
// a source may reuse their maps and buffers for the next read.
func (b *batch) reset() {
	b.records = nil
	clear(b.positions)
	b.positions = b.positions[:0]
	clear(b.results)
}
