package auditlog

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/store"
)

// While the store refuses writes for a while (its disk is full, the
// process is short of file descriptors, or its database cannot be
// reached), a recorded event - and the state
// committed with it - is not dropped: it waits in memory, in order, and is
// written once the store takes writes again. Events recorded meanwhile
// queue behind it, so that a pipeline's states land in the order they were
// recorded. Readers see nothing of a held event until it is written
// (publishing stops at the first sequence not yet durable).
//
// The queue is bounded: at DefaultMaxHeld writes, Record blocks its caller
// until the queue has room again (backpressure on the supervisors, whose
// pipelines cannot write either). Only Close gives up on what is still
// held, after one last attempt, and logs how many events that lost.
const (
	// DefaultMaxHeld is how many refused writes the queue holds before
	// Record blocks.
	DefaultMaxHeld = 10000
	// heldRetryInterval is how often held writes are tried again; the
	// store measures its free space as often.
	heldRetryInterval = 250 * time.Millisecond
	// heldBatch is how many held writes one retry commits together: about
	// one transaction's worth, so that a batch lands whole or not at all.
	heldBatch = 100
)

// heldWrite is a recorded event the store refused, with the ops committed
// with it.
type heldWrite struct {
	p      *pipelineLog
	event  Event
	ops    []store.Op
	ticket uint64
}

// holdQueue is the Log's queue of refused writes. Its mu is taken under a
// pipelineLog's mu (submit) and on the store writer's goroutine, never the
// other way round.
type holdQueue struct {
	mu     sync.Mutex
	writes []heldWrite // by ticket
	// count is len(writes), read without mu on every write's fast path.
	count atomic.Int64
	// newer is, for each key of a held write, the ticket of the latest
	// write of that key stored since: a held op older than it is not
	// written again (it would undo the newer state).
	newer map[string]uint64
	// room is closed and replaced when the queue drops below max.
	room     chan struct{}
	max      int
	retrying bool
	// total counts the writes held since the queue was last empty.
	total int
}

// holdable reports whether err is the store refusing writes for now, which
// ends by itself.
func holdable(err error) bool {
	return errors.Is(err, store.ErrNoSpace) || errors.Is(err, store.ErrNoDescriptors) || errors.Is(err, store.ErrUnavailable)
}

// waitRoom blocks while the queue is full; it returns ErrClosed when the
// Log closes meanwhile. Called before anything is locked.
func (l *Log) waitRoom() error {
	for {
		l.held.mu.Lock()
		if len(l.held.writes) < l.held.max {
			l.held.mu.Unlock()
			return nil
		}
		room := l.held.room
		l.held.mu.Unlock()
		select {
		case <-room:
		case <-l.life.Done():
			return ErrClosed
		}
	}
}

// queueIfHolding reports whether writes are held, so that a new write must
// queue behind them; if so it queues w. Called under w.p.mu.
func (l *Log) queueIfHolding(w heldWrite) bool {
	if l.held.count.Load() == 0 {
		// A write held from now on is older than w, which is submitted
		// after it was committed; storedWhileHolding keeps w's keys from
		// being overwritten by its retry.
		return false
	}
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	if len(l.held.writes) == 0 {
		return false
	}
	l.holdLocked(w)
	return true
}

// holdWrite queues a write the store refused and makes sure a retry goroutine
// runs. Called on the store writer's goroutine.
func (l *Log) holdWrite(w heldWrite) {
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	l.holdLocked(w)
}

func (l *Log) holdLocked(w heldWrite) {
	if len(l.held.writes) == 0 {
		l.log.Warn("the store refuses writes: audit events and the states they record wait in memory and are written when it takes writes again",
			zap.Int("max_held", l.held.max))
	}
	// Callbacks and new records can interleave; keep ticket order.
	i := len(l.held.writes)
	for i > 0 && l.held.writes[i-1].ticket > w.ticket {
		i--
	}
	l.held.writes = slices.Insert(l.held.writes, i, w)
	l.held.count.Store(int64(len(l.held.writes)))
	l.held.total++
	if l.held.retrying {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return // Close writes or gives up on what is held
	}
	l.held.retrying = true
	l.wg.Go(l.retryHeld)
}

// storedWhileHolding notes the keys a write stored while others are held.
// Called on the store writer's goroutine.
func (l *Log) storedWhileHolding(ticket uint64, ops []store.Op) {
	if l.held.count.Load() == 0 {
		return
	}
	l.held.mu.Lock()
	defer l.held.mu.Unlock()
	if len(l.held.writes) == 0 {
		return
	}
	for _, op := range ops {
		if l.held.newer[string(op.Key)] < ticket {
			l.held.newer[string(op.Key)] = ticket
		}
	}
}

// retryHeld writes the held writes, oldest first, a batch at a time, every
// heldRetryInterval until none is left or the Log closes.
func (l *Log) retryHeld() {
	for {
		select {
		case <-l.after(heldRetryInterval):
		case <-l.life.Done():
			l.held.mu.Lock()
			l.held.retrying = false
			l.held.mu.Unlock()
			return
		}
		for {
			done, err := l.writeHeldBatch(l.life)
			if done {
				return
			}
			if err != nil {
				break // still refused: wait
			}
		}
	}
}

// writeHeldBatch commits the oldest held writes together. done is true
// when nothing is held any more (the retry goroutine ends); err is the
// store's refusal, the batch staying held.
func (l *Log) writeHeldBatch(ctx context.Context) (done bool, _ error) {
	l.held.mu.Lock()
	n := min(len(l.held.writes), heldBatch)
	if n == 0 {
		l.held.retrying = false
		l.held.mu.Unlock()
		return true, nil
	}
	batch := slices.Clone(l.held.writes[:n])
	var ops []store.Op
	for _, w := range batch {
		for _, op := range w.ops {
			if l.held.newer[string(op.Key)] > w.ticket {
				continue // a later write stored a newer value
			}
			ops = append(ops, op)
		}
	}
	l.held.mu.Unlock()

	err := errClosedWriter
	pending, serr := l.w.Submit(store.WriteOptions{}, ops...)
	if serr == nil {
		err = pending.Wait(context.WithoutCancel(ctx))
	}
	if err != nil && holdable(err) {
		return false, err
	}

	l.held.mu.Lock()
	l.held.writes = l.held.writes[n:]
	l.held.count.Store(int64(len(l.held.writes)))
	if len(l.held.writes) < l.held.max {
		close(l.held.room)
		l.held.room = make(chan struct{})
	}
	drained := len(l.held.writes) == 0
	total := l.held.total
	if drained {
		l.held.newer = make(map[string]uint64)
		l.held.total = 0
		l.held.retrying = false
	}
	l.held.mu.Unlock()

	for _, w := range batch {
		l.settle(w.p, w.event, err == nil)
		if err == nil {
			l.trimLater(w.p)
		} else {
			if !errors.Is(err, store.ErrFenced) {
				l.failed.Add(1)
			}
			l.log.Error("could not write an audit event", zap.String("pipeline_id", w.event.PipelineID),
				zap.String("event", string(w.event.Kind)), zap.Uint64("sequence", w.event.Sequence), zap.Error(err))
		}
	}
	if drained {
		l.log.Info("the store takes writes again: every audit event held meanwhile is written", zap.Int("events", total))
	}
	return drained, nil
}

// errClosedWriter stands for the store writer refusing a retry.
var errClosedWriter = store.ErrBatcherClosed

// closeHeld makes one last attempt at the held writes when the Log closes
// and logs how many it had to give up on.
func (l *Log) closeHeld() {
	for {
		done, err := l.writeHeldBatch(context.Background())
		if done {
			return
		}
		if err != nil {
			break
		}
	}
	l.held.mu.Lock()
	lost := l.held.writes
	l.held.writes = nil
	l.held.count.Store(0)
	l.held.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	for _, w := range lost {
		l.settle(w.p, w.event, false)
	}
	l.failed.Add(uint64(len(lost)))
	l.log.Error("audit events and the states they record were not written: the store refused writes until conduit stopped",
		zap.Int("events", len(lost)), zap.String("first_pipeline_id", lost[0].event.PipelineID),
		zap.Uint64("first_sequence", lost[0].event.Sequence))
}
