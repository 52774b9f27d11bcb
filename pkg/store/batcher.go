package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A chunk is what one Commit of the store carries: its bounds keep it well
// under Badger's limit for one transaction (about 15% of a memtable). A
// store without such a limit says so (TxnLimiter), and a round is then
// always one transaction.
const (
	maxChunkOps   = 8192
	maxChunkBytes = 512 << 10
)

// TxnLimiter is a store whose one transaction may hold at most ops
// operations of bytes in all; 0 is no limit. A Store that does not
// implement it gets the chunk bounds above.
type TxnLimiter interface {
	TxnLimits() (ops, bytes int)
}

// ErrBatcherClosed is returned by writes submitted after Close.
var ErrBatcherClosed = errors.New("store writer is closed")

// Batcher is the one way the runtime writes durably: pipeline states, audit
// events, source positions and dedup entries all go through it. Writes
// submitted while a commit is under way are gathered into the next round,
// and a round is committed with Store.Commit (one sync on Badger, one
// transaction on a database), so that many pipelines share a sync however
// many writes they make. A round larger than one transaction may hold is
// committed in chunks, in order.
//
// A write is a set of ops that land together, in one commit: a pipeline's
// state and the audit event that records it, a source position and the
// dedup entries it frees. Writes land in the order they were submitted.
// Within a chunk, a write to a key that a write before it also writes
// replaces that op (the later value wins, and only it is written): a
// pipeline that changes state ten times while the disk syncs writes its
// state once.
//
// A caller waits for its write (Apply, Pending.Wait) or does not (Submit,
// with a Done callback or none): a supervisor, whose restarts keep a
// schedule, never waits for the disk. A write that need not survive a
// crash of the machine (Unsynced) is committed without a sync when its
// chunk holds no other kind.
//
// Writes come in two lanes, each with its own rounds and its own order.
// The records' path (dedup entries a destination waits for before it goes
// on, source positions) is Urgent: its rounds are committed between the
// chunks of a Normal round, so that a storm of bookkeeping (ten thousand
// pipelines' states and events) never holds records back. A key must be
// written through one lane only: order is kept within a lane, not across.
//
// It owns its goroutines - one for the synced lanes and, on a store that
// commits without a sync, one for the Unsynced lane, with a timer that
// wakes it late (see Submit) - started by NewBatcher and ended by Close.
type Batcher struct {
	db Store
	// maxOps and maxBytes bound a chunk, one transaction (0: no bound).
	maxOps, maxBytes int

	mu     sync.Mutex
	lanes  [3]lane
	closed bool
	wake   chan struct{}
	done   chan struct{}
	// unsynced is set when the store commits without a sync
	// (UnsyncedCommitter): Unsynced writes then have a lane of their own,
	// committed by a goroutine of their own (woken by wakeUnsynced, ended
	// by closing it, and reporting on unsyncedDone), so that they never
	// wait for another lane's sync.
	unsynced     UnsyncedCommitter
	wakeUnsynced chan struct{}
	unsyncedDone chan struct{}
	// unsyncedCommit is held by whoever takes and commits an Unsynced
	// round: the lane's goroutine, or a caller of Pending.Wait whose round
	// nobody took yet (see Wait). Rounds are taken in order under mu and
	// committed before the next is taken, so the lane's order holds
	// whoever commits.
	unsyncedCommit sync.Mutex
	// unsyncedLate wakes the lane's goroutine a while after a round began
	// on an idle lane, in case nobody waits for it (see Submit).
	unsyncedLate *time.Timer
	onError      func(writes int, err error)
	// onCommit is BatcherOptions.OnCommit; nil: none.
	onCommit func()
	// fenceOf fences writes (BatcherOptions.FenceOf); nil: none.
	fenceOf func(key []byte) *Fence
	// watcher is told about every write (see Watch); nil: none.
	watcher atomic.Pointer[WriteWatcher]
	// values and unsyncedValues are the buffers the encoded values of a
	// chunk are appended to (Op.Encode), reused chunk after chunk: values
	// by the goroutine of the synced lanes, unsyncedValues by whoever
	// holds unsyncedCommit.
	values, unsyncedValues []byte
}

// maxKeptValues bounds the value buffer a writer keeps between chunks; a
// chunk is at most maxChunkBytes, unless a store sets no bound.
const maxKeptValues = 2 * maxChunkBytes

// Priority is the lane of a write (see Batcher).
type Priority int

const (
	// Normal is the lane of pipeline states, audit events and everything
	// nobody on the records' path waits for.
	Normal Priority = iota
	// Urgent is the lane of writes the records' path waits for.
	Urgent
	// unsyncedLane is the lane of Unsynced writes on a store that commits
	// without a sync.
	unsyncedLane
)

// Durability is what a write survives once its Pending is done.
type Durability int

const (
	// Synced writes survive a crash of the machine (a power loss): the
	// store synced them.
	Synced Durability = iota
	// Unsynced writes survive a crash of the process (a SIGKILL), not
	// necessarily one of the machine: a store that can (UnsyncedCommitter)
	// hands them to the operating system and does not wait for the disk.
	// They are for what need not outlive what it guards: a dedup intent of
	// a destination that does not sync its own writes either. They have a
	// lane of their own, whatever the Priority, which no sync of the other
	// lanes holds up; so a key written Unsynced may be written in another
	// lane only once that write is done (a dedup entry is deleted with the
	// source position that acknowledges its records, which are written
	// after it). On a store that cannot, they are Synced writes.
	Unsynced
)

// UnsyncedCommitter is a Store that can commit without syncing: Commit's
// transaction, done once the operating system holds it (it survives the
// process's crash). A Store without it commits Unsynced writes synced.
type UnsyncedCommitter interface {
	CommitUnsynced(ctx context.Context, ops []Op) error
}

// lane is one order of writes. next is the round being gathered, nil when
// none was started since the last one was taken; last is the latest round
// taken (committing or done), which Flush waits for when nothing is
// gathered.
type lane struct {
	next, last *round
}

// Op is one write of a group of writes that land together.
type Op struct {
	Key, Value []byte
	// Delete removes Key instead of setting it.
	Delete bool
	// Encode, when set, produces Value on the writer's goroutine just
	// before the commit (Batcher only; Store.Commit takes encoded values):
	// it appends the value to dst and returns the extended slice. The
	// caller hands over what it encodes and no longer changes it; in
	// return it does not spend its own time encoding (a supervisor keeps
	// its schedule), and a value that a later write of the same key
	// replaces before the commit is never encoded at all. The writer
	// appends every value of a chunk to one buffer it reuses, since the
	// store keeps the values only until Commit returns: in a fault storm,
	// with no collection running, each value's own allocation was memory
	// the process held until the next one.
	Encode func(dst []byte) ([]byte, error)
	// Fence, when set, makes the op conditional on a pipeline's lease
	// (several processes on one PostgreSQL, pkg/cluster): a store that
	// shares its database refuses it when the token is not the lease's
	// current one. A store only one process uses ignores it.
	Fence *Fence
	// Expect, when set, makes the Commit that carries the op conditional
	// on what Key holds before it (Store.Commit only: the Batcher
	// refuses it, since it merges the writes of many callers).
	Expect *Expect
}

// Expect is what a key must hold for a Commit to write (Op.Expect).
type Expect struct {
	// Value is what the key must hold, byte for byte; ignored when Absent.
	Value []byte
	// Absent expects the key not to be there.
	Absent bool
}

// holds says whether a key that holds value (present: whether it is
// there at all) is what e expects.
func (e *Expect) holds(value []byte, present bool) bool {
	if e.Absent || !present {
		return e.Absent != present
	}
	return bytes.Equal(e.Value, value)
}

// errExpectInBatcher refuses an op with an Expect submitted to a Batcher.
var errExpectInBatcher = errors.New("an op with an Expect must be committed with Store.Commit, not through the Batcher")

// Fence names the lease a write is made under.
type Fence struct {
	Pipeline string
	Token    int64
}

// ErrFenced refuses a write made under a lease another instance took over.
var ErrFenced = errors.New("write refused: another instance holds the pipeline's lease now (stale fencing token)")

// FencedError is what Commit returns when it left out the ops of stale
// leases and committed the others.
type FencedError struct {
	// Pipelines are those whose ops were left out.
	Pipelines []string
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("%v: pipelines %s", ErrFenced, strings.Join(e.Pipelines, ", "))
}

func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// writeErr is a write's part of its chunk's error: a fenced commit fails
// only the writes made under a stale lease.
func writeErr(err error, fences []string) error {
	var fe *FencedError
	if !errors.As(err, &fe) {
		return err
	}
	for _, p := range fences {
		if slices.Contains(fe.Pipelines, p) {
			return err
		}
	}
	return nil
}

// lazyValueSize is what a chunk counts for a value that is encoded only at
// commit: about a pipeline state with a short recovery episode.
const lazyValueSize = 2 << 10

func (op Op) size() int {
	if op.Encode != nil {
		return len(op.Key) + lazyValueSize
	}
	return len(op.Key) + len(op.Value)
}

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
	// order, on the goroutine that committed it.
	callbacks []func(error)
}

// Pending is a submitted write; Wait returns once it is durable.
type Pending struct {
	r *round
	c *chunk
	// fences are the pipelines whose leases the write was made under.
	fences []string
	// unsynced is the Batcher of a write in the Unsynced lane, which Wait
	// may commit itself.
	unsynced *Batcher
}

// Wait returns once the write is durable, with the error of its commit, or
// ctx's error if ctx ends first (the write still happens).
//
// A write of the Unsynced lane that nobody has taken yet, while nobody
// commits that lane, is committed by Wait itself, with the lane's other
// writes gathered so far: the write's path is a destination's dedup
// intent, which it waits for before every write, and once the process has
// gone idle (a CDC row comes alone) handing the round to the lane's
// goroutine and being woken by it cost about a quarter of the intent's
// time (BenchmarkUnsyncedWriteWait/after-idle).
func (p Pending) Wait(ctx context.Context) error {
	if p.r == nil {
		return nil
	}
	if p.unsynced != nil && ctx.Err() == nil {
		p.unsynced.commitUnsyncedFor(p.r)
	}
	select {
	case <-p.r.done:
		return writeErr(p.c.err, p.fences)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NewBatcher starts the writer of db. onError, if set, is told about a
// failed commit, which the writes nobody waits for have no other way to
// report.
func NewBatcher(db Store, onError func(writes int, err error)) *Batcher {
	return NewBatcherWith(db, BatcherOptions{OnError: onError})
}

// BatcherOptions configure NewBatcherWith.
type BatcherOptions struct {
	// OnError is NewBatcher's onError.
	OnError func(writes int, err error)
	// OnCommit, when set, is called after each round committed without an
	// error, on the goroutine that committed it: it tells whoever heard of
	// failures through OnError that writes work again. It must be cheap.
	OnCommit func()
	// FenceOf, when set, gives each op without a Fence the fence of the
	// lease it is written under (nil: none), so that every write of a
	// pipeline's state is fenced without its writer knowing.
	FenceOf func(key []byte) *Fence
}

// WriteWatcher follows what the writes of a Batcher do to the store, for a
// reader that keeps what it needs to know in memory instead of reading the
// store (the dedup store's index of its entries).
type WriteWatcher interface {
	// Submitted is told the ops of a write when it is submitted, before
	// they may commit. The slice is only valid during the call.
	Submitted(ops []Op)
	// Committed is told the ops of a commit once it is over: with err nil
	// they are in the store, else some of them may or may not be. The
	// slice is only valid during the call.
	Committed(ops []Op, err error)
}

// Watch makes w follow the Batcher's writes from now on. A Batcher has one
// watcher: Watch reports false, and changes nothing, when it has one
// already.
func (b *Batcher) Watch(w WriteWatcher) bool { return b.watcher.CompareAndSwap(nil, &w) }

// NewBatcherWith is NewBatcher with options.
func NewBatcherWith(db Store, opts BatcherOptions) *Batcher {
	b := &Batcher{
		db:       db,
		maxOps:   maxChunkOps,
		maxBytes: maxChunkBytes,
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		onError:  opts.OnError,
		onCommit: opts.OnCommit,
		fenceOf:  opts.FenceOf,
	}
	if l, ok := db.(TxnLimiter); ok {
		b.maxOps, b.maxBytes = l.TxnLimits()
	}
	if uc, ok := db.(UnsyncedCommitter); ok {
		b.unsynced = uc
		b.wakeUnsynced = make(chan struct{}, 1)
		b.unsyncedDone = make(chan struct{})
		b.unsyncedLate = time.AfterFunc(time.Hour, b.wakeUnsyncedIfWaiting)
		b.unsyncedLate.Stop()
		go b.loopUnsynced()
	}
	go b.loop()
	return b
}

// Apply writes ops together, as a Normal, Synced write, and returns once
// they are durable.
func (b *Batcher) Apply(ctx context.Context, ops ...Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := b.Submit(WriteOptions{}, ops...)
	if err != nil {
		return err
	}
	return p.Wait(ctx)
}

// WriteOptions say how a submitted write is committed. The zero value is a
// Normal, Synced write that calls nobody back.
type WriteOptions struct {
	// Priority is the write's lane.
	Priority Priority
	// Durability is what the write must survive once it is done.
	Durability Durability
	// Done, when set, is called with the commit's error once the write is
	// durable (or failed), on the goroutine that committed it (the
	// Batcher's, or for an Unsynced write possibly a caller of Wait),
	// after the callbacks of the writes submitted before it and before the
	// write's Pending is done. It must be quick and must not wait for
	// another write (it would wait for itself); it may Submit.
	Done func(error)
}

// Fence returns ops with the fence each is written under now (see
// BatcherOptions.FenceOf) on the ops that have none, and ops themselves
// when there is nothing to fence. A caller that may submit the same ops
// again later (the audit log holding a write the store refused) fences
// them once, at the first submission: a write must land under the lease
// it was made under, or not at all. Ops that all carry a fence are
// returned as they are.
func (b *Batcher) Fence(ops []Op) []Op {
	if b.fenceOf == nil || !slices.ContainsFunc(ops, func(op Op) bool { return op.Fence == nil }) {
		return ops
	}
	fenced := slices.Clone(ops)
	for i := range fenced {
		if fenced[i].Fence == nil {
			fenced[i].Fence = b.fenceOf(fenced[i].Key)
		}
	}
	return fenced
}

// Submit queues ops to land together, as opts say, without waiting. The
// Batcher keeps the slices until the write is durable: the caller must not
// change them. It fails only after Close, or for an op no store can write.
func (b *Batcher) Submit(opts WriteOptions, ops ...Op) (Pending, error) {
	p, d, done := opts.Priority, opts.Durability, opts.Done
	// The caller's slice stays as it is: the fences go on copies.
	ops = b.Fence(ops)
	size := 0
	for _, op := range ops {
		// A value over MaxValueBytes is refused here, to its writer alone:
		// in a commit it would fail every write of the round with it.
		if err := checkWrite(op); err != nil {
			return Pending{}, err
		}
		if op.Expect != nil {
			return Pending{}, errExpectInBatcher
		}
		size += op.size()
	}
	if w := b.watcher.Load(); w != nil {
		(*w).Submitted(ops)
	}
	wake := b.wake
	if d == Unsynced && b.unsynced != nil {
		p, wake = unsyncedLane, b.wakeUnsynced
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return Pending{}, ErrBatcherClosed
	}
	l := &b.lanes[p]
	r := l.next
	if r == nil {
		r = &round{done: make(chan struct{})}
		l.next = r
		if p == unsyncedLane && !l.committing() {
			// An idle Unsynced lane: the write's caller usually waits for
			// it at once and Wait commits it on the caller's goroutine, so
			// waking the lane's goroutine would only add a thread's
			// wake-up to a lone write's path (a CDC row's dedup intent).
			// A round nobody waits for is committed by the goroutine
			// shortly after (unsyncedLateAfter). While a round commits,
			// the goroutine is woken at once, so that the next round
			// commits right after it whether or not its callers wait yet
			// (a destination's intents for the batches after the one it
			// writes).
			b.unsyncedLate.Reset(unsyncedLateAfter)
		} else {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
	c := r.chunkFor(len(ops), size, b.maxOps, b.maxBytes)
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
	var fences []string
	for _, op := range ops {
		if op.Fence != nil && !slices.Contains(fences, op.Fence.Pipeline) {
			fences = append(fences, op.Fence.Pipeline)
		}
	}
	if done != nil {
		c.callbacks = append(c.callbacks, func(err error) { done(writeErr(err, fences)) })
	}
	c.writes++
	pending := Pending{r: r, c: c, fences: fences}
	if p == unsyncedLane {
		pending.unsynced = b
	}
	return pending, nil
}

// chunkFor returns the chunk a write of n ops and size bytes joins: the
// last one while it has room, else a new one. A write larger than a chunk
// gets a chunk of its own, and the store says whether it fits.
func (r *round) chunkFor(n, size, maxOps, maxBytes int) *chunk {
	if k := len(r.chunks); k > 0 {
		c := r.chunks[k-1]
		if (maxOps == 0 || len(c.ops)+n <= maxOps) && (maxBytes == 0 || c.bytes+size <= maxBytes) {
			return c
		}
	}
	c := &chunk{keys: make(map[string]int, 16)}
	r.chunks = append(r.chunks, c)
	return c
}

// Flush returns once every write submitted before it is durable (or
// failed), with the error of the latest round of each lane.
func (b *Batcher) Flush(ctx context.Context) error {
	var rounds []*round
	b.mu.Lock()
	b.wakeUnsyncedLocked() // a round of an idle lane waits for nobody's Wait
	for i := range b.lanes {
		r := b.lanes[i].next
		if r == nil {
			r = b.lanes[i].last
		}
		if r != nil {
			rounds = append(rounds, r)
		}
	}
	b.mu.Unlock()
	var errs []error
	for _, r := range rounds {
		select {
		case <-r.done:
			// Rounds of a lane commit in order, so this one being done
			// means every earlier one is too.
			errs = append(errs, r.errs()...)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
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
	if b.unsynced != nil {
		// Close is done when both lanes' writes are.
		defer func() {
			close(b.wakeUnsynced)
			<-b.unsyncedDone
		}()
	}
	for {
		<-b.wake
		for {
			b.gather()
			b.commitUrgent()
			b.mu.Lock()
			r := b.take(Normal)
			closed := b.closed && r == nil && b.lanes[Urgent].next == nil
			b.mu.Unlock()
			if closed {
				return
			}
			if r == nil {
				break
			}
			b.commit(r, b.commitUrgent, true)
		}
	}
}

// loopUnsynced commits the rounds of the Unsynced lane, until loop closes
// wakeUnsynced (after Close) and nothing is left.
func (b *Batcher) loopUnsynced() {
	defer close(b.unsyncedDone)
	for range b.wakeUnsynced {
		for b.commitUnsyncedRound() {
		}
	}
	// Woken for the last time by the close: what was submitted before it.
	b.commitUnsyncedRound()
}

// commitUnsyncedRound commits the Unsynced lane's next round, if there is
// one, and reports whether there was.
func (b *Batcher) commitUnsyncedRound() bool {
	b.unsyncedCommit.Lock()
	defer b.unsyncedCommit.Unlock()
	b.mu.Lock()
	r := b.take(unsyncedLane)
	b.mu.Unlock()
	if r == nil {
		return false
	}
	b.commit(r, nil, false)
	return true
}

// commitUnsyncedFor commits the Unsynced lane's next round on the caller's
// goroutine when it is r and nobody commits the lane now; otherwise the
// lane's goroutine commits r (it was woken when r was started).
func (b *Batcher) commitUnsyncedFor(r *round) {
	select {
	case <-r.done:
		return
	default:
	}
	if !b.unsyncedCommit.TryLock() {
		// Someone commits the lane now: the lane's goroutine takes r
		// after it, whoever that is (a caller of Wait commits its own
		// round only).
		b.wakeUnsyncedIfWaiting()
		return
	}
	b.mu.Lock()
	mine := b.lanes[unsyncedLane].next == r
	if mine {
		b.take(unsyncedLane)
	}
	b.mu.Unlock()
	if mine {
		b.commit(r, nil, false)
	}
	b.unsyncedCommit.Unlock()
}

// unsyncedLateAfter is how long a round of an idle Unsynced lane may wait
// for a caller of Wait to commit it before the lane's goroutine does.
const unsyncedLateAfter = 2 * time.Millisecond

// committing reports whether the lane's last round taken is still being
// committed.
func (l *lane) committing() bool {
	if l.last == nil {
		return false
	}
	select {
	case <-l.last.done:
		return false
	default:
		return true
	}
}

// wakeUnsyncedIfWaiting wakes the Unsynced lane's goroutine when a round
// is still waiting to be taken (unsyncedLate's function).
func (b *Batcher) wakeUnsyncedIfWaiting() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wakeUnsyncedLocked()
}

// wakeUnsyncedLocked is wakeUnsyncedIfWaiting with mu held. After Close
// it does nothing: the goroutine's channel may be closed by then, and it
// commits what is left by itself.
func (b *Batcher) wakeUnsyncedLocked() {
	if b.closed || b.unsynced == nil || b.lanes[unsyncedLane].next == nil {
		return
	}
	select {
	case b.wakeUnsynced <- struct{}{}:
	default:
	}
}

// maxGatherYields bounds how long gather waits for a round to stop growing.
const maxGatherYields = 64

// gather lets the writers that are runnable submit before a round is
// taken. When a commit ends, the callers that waited for it wake up and
// most of them write again at once; a round taken right away would hold
// only the first of them, and the others would wait a whole sync for the
// next one. So the writer yields its processor while the rounds keep
// growing: a lone caller costs one yield, many share one sync, and no
// timer delays anyone.
func (b *Batcher) gather() {
	last := -1
	for range maxGatherYields {
		b.mu.Lock()
		n := b.lanes[Normal].writes() + b.lanes[Urgent].writes()
		b.mu.Unlock()
		if n == last {
			return
		}
		last = n
		runtime.Gosched()
	}
}

// writes counts the writes gathered in the lane's next round.
func (l *lane) writes() int {
	if l.next == nil {
		return 0
	}
	n := 0
	for _, c := range l.next.chunks {
		n += c.writes
	}
	return n
}

// take starts committing the round a lane gathered; nil when there is none.
// Called under mu.
func (b *Batcher) take(p Priority) *round {
	l := &b.lanes[p]
	r := l.next
	l.next = nil
	if r != nil {
		l.last = r
	}
	return r
}

// commitUrgent commits the urgent lane's round, if one was gathered.
func (b *Batcher) commitUrgent() {
	b.mu.Lock()
	r := b.take(Urgent)
	b.mu.Unlock()
	if r != nil {
		b.commit(r, nil, true)
	}
}

// commit commits r's chunks in order, calling between after each but the
// last, and then reports the round done.
func (b *Batcher) commit(r *round, between func(), synced bool) {
	failed := 0
	var firstErr error
	for i, c := range r.chunks {
		if i > 0 && between != nil {
			between()
		}
		c.err = b.commitChunk(c.ops, synced)
		if w := b.watcher.Load(); w != nil {
			(*w).Committed(c.ops, c.err)
		}
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
	if firstErr == nil && len(r.chunks) > 0 && b.onCommit != nil {
		b.onCommit()
	}
	close(r.done)
}

// commitChunk encodes the chunk's lazy values and commits it. Values that
// turn out much larger than counted can take a chunk over the store's limit
// for one transaction; it is then committed in halves, in order, which
// gives up the atomicity of the writes cut in two only in that case: the
// alternative is failing them all.
func (b *Batcher) commitChunk(ops []Op, synced bool) error {
	values := &b.values
	if !synced {
		values = &b.unsyncedValues
	}
	buf := (*values)[:0]
	defer func() {
		// The store let go of the values: the buffer is free again. (A
		// chunk committed in halves encodes nothing more, so the halves'
		// values stay as they are until then.)
		if cap(buf) <= maxKeptValues {
			*values = buf[:0]
		} else {
			*values = nil
		}
	}()
	for i := range ops {
		if ops[i].Encode == nil || ops[i].Delete {
			continue
		}
		start := len(buf)
		out, err := ops[i].Encode(buf)
		if err != nil {
			return fmt.Errorf("encode the value of %q: %w", ops[i].Key, err)
		}
		// Earlier values keep pointing into the array they were written
		// to when append moves on to a larger one.
		ops[i].Value, ops[i].Encode = out[start:len(out):len(out)], nil
		buf = out
	}
	var err error
	if !synced {
		err = b.unsynced.CommitUnsynced(context.Background(), ops)
	} else {
		err = b.db.Commit(context.Background(), ops)
	}
	if errors.Is(err, ErrTxnTooBig) && len(ops) > 1 {
		half := len(ops) / 2
		if err := b.commitChunk(ops[:half], synced); err != nil {
			return err
		}
		return b.commitChunk(ops[half:], synced)
	}
	return err
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
		if b.unsyncedLate != nil {
			b.unsyncedLate.Stop()
		}
	}
	b.mu.Unlock()
	<-b.done
}
