package pipeline

import (
	"context"
	"sync"
	"time"

	"github.com/conduitry/conduit/pkg/record"
)

// persister writes the newest acknowledged position durably, coalescing: the
// acker offers a position after every acknowledgement without waiting, and
// the persister saves whatever is newest each time the previous write has
// finished. One synced write then covers every batch acknowledged while it
// was under way (group commit), and the acker never waits for the disk.
//
// With dedup, saves are also spaced by minInterval. A position saved later
// loses nothing there: the dedup entries of the records acknowledged
// meanwhile are deleted only with the save that covers them, so after a
// crash those records come again and are skipped, not written twice. What
// it saves is a synced write per batch: the entries already cost one each.
type persister struct {
	positions   Positions
	pipelineID  string
	connectorID string
	stats       *Stats
	minInterval time.Duration
	closing     chan struct{} // closed by close

	mu      sync.Mutex
	pending record.Position // newest offered, not yet saved; nil when none
	spare   record.Position // buffer recycled between pending and saving
	// deletes are the dedup entries of every batch acknowledged since the
	// last save; they go with the next save.
	deletes [][]byte
	closed  bool
	wake    chan struct{} // capacity 1: "there is something to do"
}

func newPersister(p Positions, pipelineID, connectorID string, stats *Stats, minInterval time.Duration) *persister {
	return &persister{
		positions:   p,
		pipelineID:  pipelineID,
		connectorID: connectorID,
		stats:       stats,
		minInterval: minInterval,
		closing:     make(chan struct{}),
		wake:        make(chan struct{}, 1),
	}
}

// offer records pos as the newest acknowledged position, and deletes as
// keys to delete when it is saved. It copies pos, so the caller may reuse
// the slice; the keys must not change afterwards.
func (p *persister) offer(pos record.Position, deletes [][]byte) {
	p.mu.Lock()
	p.deletes = append(p.deletes, deletes...)
	if p.pending == nil {
		p.pending = append(p.spare[:0], pos...)
		p.spare = nil
	} else {
		p.pending = append(p.pending[:0], pos...)
	}
	p.mu.Unlock()
	p.signal()
}

// close tells run to save what is pending and return. The acker calls it
// when it stops, whatever the reason.
func (p *persister) close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closing)
	}
	p.mu.Unlock()
	p.signal()
}

func (p *persister) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run saves offered positions until close. A failed save ends it with the
// error, which ends the run: a pipeline that cannot record its progress must
// not keep going as if it could.
func (p *persister) run(ctx context.Context) error {
	var saving record.Position
	var deletes [][]byte
	for range p.wake {
		p.mu.Lock()
		saving, p.pending, p.spare = p.pending, nil, saving
		deletes, p.deletes = p.deletes, deletes[:0]
		closed := p.closed
		p.mu.Unlock()
		if saving != nil {
			if err := p.positions.Save(ctx, p.pipelineID, p.connectorID, saving, deletes); err != nil {
				return &StageError{Kind: KindSource, ID: p.connectorID, Op: "save position", Err: err}
			}
			p.stats.PositionsSaved.Add(1)
		}
		clear(deletes)
		if closed {
			// The acker calls close after its last offer, so what was just
			// saved is the last position of the run.
			return nil
		}
		if saving != nil && p.minInterval > 0 {
			// Offers made meanwhile wait in pending; close cuts the wait
			// short so that a stop saves the last position at once.
			t := time.NewTimer(p.minInterval)
			select {
			case <-t.C:
			case <-p.closing:
				t.Stop()
			}
		}
	}
	return nil
}
