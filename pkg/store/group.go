package store

import (
	"context"
	"errors"
	"sync"
)

// maxGroup and maxGroupBytes bound one group commit, well under Badger's
// transaction size limit (about 1.2 MiB with our options).
const (
	maxGroup      = 1024
	maxGroupBytes = 256 << 10
)

// GroupWriter makes small durable writes cheap under concurrency: writes
// that arrive while a commit is under way are collected and committed
// together in one transaction (one disk sync), and each caller returns once
// its own write is durable. A lone writer pays one sync, as before; ten
// thousand concurrent writers pay about ten thousand divided by the group
// size.
//
// It owns one goroutine, started by NewGroupWriter and ended by Close.
type GroupWriter struct {
	db    Store
	reqs  chan groupWrite
	close sync.Once
	quit  chan struct{}
	done  chan struct{}
}

// Op is one write of an atomic group of writes (see Apply).
type Op struct {
	Key, Value []byte
	// Delete removes Key instead of setting it.
	Delete bool
}

// groupWrite is one caller's request: its ops land in the same
// transaction, whatever else shares the commit.
type groupWrite struct {
	ops    []Op
	result chan error
}

func (w groupWrite) size() int {
	n := 0
	for _, op := range w.ops {
		n += len(op.Key) + len(op.Value)
	}
	return n
}

// ErrWriterClosed is returned for writes after Close.
var ErrWriterClosed = errors.New("group writer is closed")

// NewGroupWriter starts a writer on db.
func NewGroupWriter(db Store) *GroupWriter {
	g := &GroupWriter{
		db:   db,
		reqs: make(chan groupWrite, maxGroup),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	go g.loop()
	return g
}

// Set stores value under key and returns once it is durable. The caller
// may reuse the slices after Set returns.
func (g *GroupWriter) Set(ctx context.Context, key, value []byte) error {
	return g.Apply(ctx, Op{Key: key, Value: value})
}

// Delete removes key and returns once that is durable.
func (g *GroupWriter) Delete(ctx context.Context, key []byte) error {
	return g.Apply(ctx, Op{Key: key, Delete: true})
}

// Apply commits ops atomically (all in one transaction, possibly shared
// with other callers' writes) and returns once they are durable.
func (g *GroupWriter) Apply(ctx context.Context, ops ...Op) error {
	return g.submit(ctx, groupWrite{ops: ops, result: make(chan error, 1)})
}

// ApplyAsync is Apply without waiting: see SetAsync.
func (g *GroupWriter) ApplyAsync(ctx context.Context, ops ...Op) (wait func() error, err error) {
	w := groupWrite{ops: ops, result: make(chan error, 1)}
	if err := g.enqueue(ctx, w); err != nil {
		return nil, err
	}
	// wait may be called more than once (and from more than one place):
	// every call gets the one result.
	return sync.OnceValue(func() error { return g.wait(w) }), nil
}

// SetAsync queues a write of value under key and returns without waiting
// for the commit; wait then blocks until the write is durable and returns
// its result. err is non-nil (ctx done, writer closed) when nothing was
// queued, and wait is then nil.
//
// Writes are committed in the order they were queued, so a caller that
// queues under its own lock (handing out sequence numbers, say) gets them
// committed in that order, while waiting for the sync outside the lock and
// sharing it with everyone queued meanwhile.
//
// The caller must not modify key or value until wait has returned. Calling
// wait is optional, and calling it again returns the same result; once
// queued, the write happens either way.
func (g *GroupWriter) SetAsync(ctx context.Context, key, value []byte) (wait func() error, err error) {
	return g.ApplyAsync(ctx, Op{Key: key, Value: value})
}

func (g *GroupWriter) submit(ctx context.Context, w groupWrite) error {
	if err := g.enqueue(ctx, w); err != nil {
		return err
	}
	return g.wait(w)
}

// enqueue hands w to the loop; on nil, the loop will answer on w.result.
func (g *GroupWriter) enqueue(ctx context.Context, w groupWrite) error {
	// Checked first so that a cancelled ctx or a closed writer wins over a
	// free slot in the queue: select picks among ready cases at random.
	select {
	case <-g.quit:
		return ErrWriterClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case g.reqs <- w:
		return nil
	case <-g.quit:
		return ErrWriterClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait returns the result of a queued write. Once queued the write happens
// whatever the caller's ctx does; waiting for it keeps the caller from
// reusing the slices too early.
func (g *GroupWriter) wait(w groupWrite) error {
	select {
	case err := <-w.result:
		return err
	case <-g.done:
		// The loop has ended; it answers everything it took before that.
		select {
		case err := <-w.result:
			return err
		default:
			return ErrWriterClosed
		}
	}
}

func (g *GroupWriter) loop() {
	defer close(g.done)
	group := make([]groupWrite, 0, maxGroup)
	var size int
	for {
		select {
		case w := <-g.reqs:
			group = append(group[:0], w)
			size = w.size()
		case <-g.quit:
			// Writes queued before Close still land.
			for {
				select {
				case w := <-g.reqs:
					g.commit([]groupWrite{w})
				default:
					return
				}
			}
		}
	collect:
		for len(group) < maxGroup && size < maxGroupBytes {
			select {
			case w := <-g.reqs:
				group = append(group, w)
				size += w.size()
			default:
				break collect
			}
		}
		g.commit(group)
	}
}

func (g *GroupWriter) commit(group []groupWrite) {
	err := g.apply(group)
	if errors.Is(err, ErrTxnTooBig) && len(group) > 1 {
		// A few large values together went over the limit: commit them one
		// by one rather than failing writes that fit on their own.
		for _, w := range group {
			w.result <- g.apply([]groupWrite{w})
		}
		return
	}
	for _, w := range group {
		w.result <- err
	}
}

func (g *GroupWriter) apply(group []groupWrite) error {
	return g.db.Update(context.Background(), func(tx Txn) error {
		for _, w := range group {
			for _, op := range w.ops {
				var err error
				if op.Delete {
					err = tx.Delete(op.Key)
				} else {
					err = tx.Set(op.Key, op.Value)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// Close stops the writer after the writes already queued. Later writes get
// ErrWriterClosed. Safe to call more than once.
func (g *GroupWriter) Close() {
	g.close.Do(func() { close(g.quit) })
	<-g.done
}
