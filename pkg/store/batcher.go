package store

import (
	"context"
	"errors"
	"sync"
)

// A chunk is what one Commit of the store carries: its bounds keep it well
// under Badger's limit for one transaction (about 15% of a memtable).
const (
	maxChunkOps   = 8192
	maxChunkBytes = 512 << 10
)

// ErrBatcherClosed is returned by writes submitted after Close.
var ErrBatcherClosed = errors.New("store writer is closed")

// Batcher is the one way the runtime writes durably: pipeline states, audit
// events, source positions and dedup entries all go through it. Writes
// submitted while a commit is under way are gathered into the next round,
// and a round is committed as one transaction of the store (one sync on
// Badger, one transaction on a database), so that many pipelines share a
// sync however many writes they make.
//
// A write is a set of ops that land together: a pipeline's state and the
// audit event that records it, a source position and the dedup entries it
// frees. Writes land in the order they were submitted. Within a round, a
// write to a key that a write before it in the same round also writes
// replaces that op (the later value wins, and only it is written): a
// pipeline that changes state ten times while the disk syncs writes its
// state once.
//
// A caller waits for its write (Apply, Pending.Wait) or does not (Submit,
// SubmitFunc): a supervisor, whose restarts keep a schedule, never waits
// for the disk.
//
// It owns one goroutine, started by NewBatcher and ended by Close.
type Batcher struct {
	db Store

	mu sync.Mutex
	// next is the round being gathered; nil when none was started since the
	// last one was taken. last is the latest round taken (committing or
	// done), which Flush waits for when nothing is gathered.
	next    *round
	last    *round
	closed  bool
	wake    chan struct{}
	done    chan struct{}
	onError func(writes int, err error)
}

// Op is one write of a group of writes that land together.
type Op struct {
	Key, Value []byte
	// Delete removes Key instead of setting it.
	Delete bool
}

func (op Op) size() int { return len(op.Key) + len(op.Value) }

// round is the writes gathered between two commits. Its chunks commit in
// order, each as one transaction; done is closed once all have, after the
// callbacks of the round ran.
type round struct {
	chunks []*chunk
	done   chan struct{}
}

// chunk is one transaction of a round. keys indexes the ops by key for
// coalescing, which only happens within a chunk, so that a write's ops
// always land in one transaction.
type chunk struct {
	ops   []Op
	keys  map[string]int
	bytes int
	// writes counts the writes that joined the chunk.
	writes int
	err    error
	// callbacks run once the chunk is committed (or failed), in submit
	// order, on the batcher's goroutine.
	callbacks []func(error)
}

// Pending is a submitted write; Wait returns once it is durable.
type Pending struct {
	r *round
	c *chunk
}

// Wait returns once the write is durable, with the error of its commit, or
// ctx's error if ctx ends first (the write still happens).
func (p Pending) Wait(ctx context.Context) error {
	if p.r == nil {
		return nil
	}
	select {
	case <-p.r.done:
		return p.c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NewBatcher starts the writer of db. onError, if set, is told about a
// failed commit, which the writes nobody waits for have no other way to
// report.
func NewBatcher(db Store, onError func(writes int, err error)) *Batcher {
	b := &Batcher{
		db:      db,
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		onError: onError,
	}
	go b.loop()
	return b
}

// Submit queues ops to land together, without waiting. The Batcher keeps
// the slices until the write is durable: the caller must not change them.
// It fails only after Close.
func (b *Batcher) Submit(ops ...Op) (Pending, error) {
	return b.submit(nil, ops)
}

// SubmitFunc is Submit with a callback: done is called with the commit's
// error once the write is durable (or failed), on the Batcher's goroutine,
// after the callbacks of the writes submitted before it and before the
// write's Pending is done. done must be quick and must not wait for another
// write (it would wait for itself); it may Submit.
func (b *Batcher) SubmitFunc(done func(error), ops ...Op) (Pending, error) {
	return b.submit(done, ops)
}

// Apply writes ops together and returns once they are durable.
func (b *Batcher) Apply(ctx context.Context, ops ...Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := b.Submit(ops...)
	if err != nil {
		return err
	}
	return p.Wait(ctx)
}

func (b *Batcher) submit(done func(error), ops []Op) (Pending, error) {
	size := 0
	for _, op := range ops {
		if err := checkKey(op.Key); err != nil {
			return Pending{}, err
		}
		size += op.size()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Pending{}, ErrBatcherClosed
	}
	r := b.next
	if r == nil {
		r = &round{done: make(chan struct{})}
		b.next = r
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	c := r.chunkFor(len(ops), size)
	for _, op := range ops {
		if i, ok := c.keys[string(op.Key)]; ok {
			c.bytes += op.size() - c.ops[i].size()
			c.ops[i] = op
			continue
		}
		c.keys[string(op.Key)] = len(c.ops)
		c.ops = append(c.ops, op)
		c.bytes += op.size()
	}
	if done != nil {
		c.callbacks = append(c.callbacks, done)
	}
	c.writes++
	return Pending{r: r, c: c}, nil
}

// chunkFor returns the chunk a write of n ops and size bytes joins: the
// last one while it has room, else a new one. A write larger than a chunk
// gets a chunk of its own, and the store says whether it fits.
func (r *round) chunkFor(n, size int) *chunk {
	if k := len(r.chunks); k > 0 {
		c := r.chunks[k-1]
		if len(c.ops)+n <= maxChunkOps && c.bytes+size <= maxChunkBytes {
			return c
		}
	}
	c := &chunk{keys: make(map[string]int, 16)}
	r.chunks = append(r.chunks, c)
	return c
}

// Flush returns once every write submitted before it is durable (or
// failed), with the error of the latest round.
func (b *Batcher) Flush(ctx context.Context) error {
	b.mu.Lock()
	r := b.next
	if r == nil {
		r = b.last
	}
	b.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		// Rounds commit in order, so this one being done means every
		// earlier one is too.
		return errors.Join(r.errs()...)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *round) errs() []error {
	var errs []error
	for _, c := range r.chunks {
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	return errs
}

func (b *Batcher) loop() {
	defer close(b.done)
	for {
		<-b.wake
		b.mu.Lock()
		r, closed := b.next, b.closed
		b.next = nil
		if r != nil {
			b.last = r
		}
		b.mu.Unlock()
		if r != nil {
			b.commit(r)
		}
		if closed {
			return
		}
	}
}

func (b *Batcher) commit(r *round) {
	failed := 0
	var firstErr error
	for _, c := range r.chunks {
		// A chunk over the store's limit for one transaction fails whole:
		// its writes' ops are coalesced and cannot be told apart any more,
		// and only unusually large values get there.
		c.err = b.db.Commit(context.Background(), c.ops)
		if c.err != nil {
			failed += c.writes
			if firstErr == nil {
				firstErr = c.err
			}
		}
		for _, done := range c.callbacks {
			done(c.err)
		}
	}
	if firstErr != nil && b.onError != nil {
		b.onError(failed, firstErr)
	}
	close(r.done)
}

// Close commits what was submitted and stops the writer. Later writes get
// ErrBatcherClosed. Safe to call more than once.
func (b *Batcher) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		select {
		case b.wake <- struct{}{}:
		default:
		}
	}
	b.mu.Unlock()
	<-b.done
}
