package pipeline

import (
	"context"
	"sync"

	"github.com/conduitry/conduit/pkg/record"
	"github.com/conduitry/conduit/pkg/store"
)

// persister is the acker's handle on the position saves of one run: the
// acker offers the newest acknowledged position after every
// acknowledgement, without waiting, and the store's writer makes it durable
// with the next commit it makes (store.Batcher). Offers made while a
// commit is under way replace each other there, so one synced write covers
// every batch acknowledged meanwhile, together with the dedup entries the
// acknowledged records free.
//
// run returns once the last position offered is durable, or with the first
// failed save: a pipeline that cannot record its progress must not keep
// going as if it could.
type persister struct {
	positions   Positions
	pipelineID  string
	connectorID string
	stats       *Stats

	mu sync.Mutex
	// submitted and settled count the saves handed to the store and those
	// whose commit is over; err is the first failure.
	submitted, settled int
	err                error
	closed             bool
	wake               chan struct{} // capacity 1: "something changed"
}

func newPersister(p Positions, pipelineID, connectorID string, stats *Stats) *persister {
	return &persister{
		positions:   p,
		pipelineID:  pipelineID,
		connectorID: connectorID,
		stats:       stats,
		wake:        make(chan struct{}, 1),
	}
}

// offer submits pos as the newest acknowledged position, and the writes
// in with along. The store keeps their keys and values until the save is
// durable: they must not change afterwards.
func (p *persister) offer(pos record.Position, with []store.Op) {
	p.mu.Lock()
	if p.err != nil || p.closed {
		p.mu.Unlock()
		return
	}
	p.submitted++
	p.mu.Unlock()
	err := p.positions.SaveLater(p.pipelineID, p.connectorID, pos, with, p.saved)
	if err != nil {
		p.saved(err)
	}
}

// saved is called once per offer with the result of its save.
func (p *persister) saved(err error) {
	// The count goes up before the save is settled: run may return as soon
	// as settled catches up, and whoever reads the stats after the run must
	// see every save it waited for.
	if err == nil {
		p.stats.PositionsSaved.Add(1)
	}
	p.mu.Lock()
	p.settled++
	if err != nil && p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	p.signal()
}

// close tells run that nothing more is offered. The acker calls it when it
// stops, whatever the reason.
func (p *persister) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.signal()
}

func (p *persister) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run waits until every offered save is durable after close, or one fails.
// ctx only ends the wait: the saves happen regardless.
func (p *persister) run(ctx context.Context) error {
	for {
		p.mu.Lock()
		err, done := p.err, p.closed && p.settled == p.submitted
		p.mu.Unlock()
		if err != nil {
			return &StageError{Kind: KindSource, ID: p.connectorID, Op: "save position", Err: err}
		}
		if done {
			return nil
		}
		select {
		case <-p.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
