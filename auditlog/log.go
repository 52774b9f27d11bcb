package auditlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/conduitry/conduit/pkg/store"
)

// Defaults of Options.
const (
	DefaultMaxEventsPerPipeline = 10000
	// DefaultMaxAge is the default of the auditlog.max-age setting. Options
	// does not apply it by itself: a zero Options.MaxAge keeps events
	// regardless of age, so that "0" in the config means "keep".
	DefaultMaxAge        = 30 * 24 * time.Hour
	DefaultSweepInterval = time.Minute
)

// ErrClosed is returned by Append, List and Watch after Close, and by a
// Watcher's Err when Close ended it.
var ErrClosed = errors.New("audit log is closed")

// errStop ends a store scan from inside its callback.
var errStop = errors.New("stop scan")

// Options configure a Log. The zero value is valid.
type Options struct {
	// MaxEventsPerPipeline bounds how many events each pipeline keeps
	// (config auditlog.max-events-per-pipeline); 0 means
	// DefaultMaxEventsPerPipeline. Between two retention passes a pipeline
	// may hold up to 1% more (at least one, at most 1000 more), so that the
	// oldest are deleted in batches rather than one per append.
	MaxEventsPerPipeline int
	// MaxAge deletes events older than this (config auditlog.max-age);
	// 0 keeps them regardless of age. See DefaultMaxAge.
	MaxAge time.Duration
	// SweepInterval is how often the retention pass runs (the age limit,
	// and the count limit for pipelines that no longer append); 0 means
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// Now is the clock for event times and the age limit; nil is time.Now.
	Now func() time.Time
	// Logger receives the lines about skipped entries and failed retention
	// passes; nil discards them.
	Logger *zap.Logger
	// BeforeWrite, if set, is called by the writer goroutine before it
	// writes the events handed to Enqueue since its last round. The runtime
	// uses it to flush pipeline states first, so that an event in the log
	// means the transition it describes is persisted too: what the log
	// says happened is what a restart resumes from.
	BeforeWrite func(context.Context) error
}

// Log is the audit log of every pipeline. Its methods are safe for
// concurrent use. It owns two goroutines (the retention pass and the
// writer of Enqueue) and one per open Watcher; Close ends them all.
type Log struct {
	db          store.Store
	w           *store.GroupWriter
	maxEvents   uint64
	trimSlack   uint64
	maxAge      time.Duration
	sweepEvery  time.Duration
	now         func() time.Time
	log         *zap.Logger
	beforeWrite func(context.Context) error

	// life is cancelled by Close. It is the context of everything the Log
	// does on its own (retention, watcher goroutines), so that Close can
	// interrupt them.
	life   context.Context
	cancel context.CancelFunc
	// wg counts the goroutines the Log owns; Add only under mu, while open.
	wg sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	pipelines map[string]*pipelineLog

	// The queue of Enqueue, drained by the writer goroutine (runWriter).
	qmu       sync.Mutex
	queued    []*eventChunk
	freeChunk []*eventChunk // written chunks, for reuse
	qclosed   bool
	enqueued  uint64        // events ever handed to Enqueue
	written   uint64        // of those, how many the writer has finished
	qprogress chan struct{} // closed and replaced whenever written moves
	qwake     chan struct{}
	qdone     chan struct{}

	closeOnce sync.Once
	// afterSweep, when set by a test before start, runs after each
	// retention pass of the sweeper goroutine.
	afterSweep func()
}

// pipelineLog is the in-memory state of one pipeline's log.
//
// Sequences are handed out under mu in the order their writes are queued;
// the writes finish in any order, and settle publishes them in sequence
// order: published only moves up through a gap-free run of settled
// sequences. Everything at or below published is durable (or failed, and
// then absent for good), which is what List and Watch rely on.
type pipelineLog struct {
	id     string
	escID  string
	prefix []byte

	// published is read without mu by List and LastSequence.
	published atomic.Uint64

	mu sync.Mutex
	// last is the highest sequence handed out.
	last uint64
	// settled holds writes that finished above published+1, waiting for
	// the ones below; usually empty.
	settled map[uint64]settledEvent
	// oldest: no event below it is stored.
	oldest   uint64
	watchers map[*Watcher]struct{}
	// maintaining is true while a retention pass deletes this pipeline's
	// old events; one at a time.
	maintaining bool
}

type settledEvent struct {
	e      Event
	stored bool
}

func newPipelineLog(id string) *pipelineLog {
	return &pipelineLog{
		id:       id,
		escID:    escapeID(id),
		prefix:   pipelinePrefix(id),
		settled:  make(map[uint64]settledEvent),
		oldest:   1,
		watchers: make(map[*Watcher]struct{}),
	}
}

// Open reads where every pipeline's log ends (two seeks per pipeline) and
// starts the retention goroutine. Appends are written through w, which
// must write to db; the Log closes neither.
func Open(ctx context.Context, db store.Store, w *store.GroupWriter, opts Options) (*Log, error) {
	l, err := open(ctx, db, w, opts)
	if err != nil {
		return nil, err
	}
	l.start()
	return l, nil
}

// open is Open without starting the retention goroutine.
func open(ctx context.Context, db store.Store, w *store.GroupWriter, opts Options) (*Log, error) {
	switch {
	case db == nil || w == nil:
		return nil, errors.New("open audit log: store and group writer are required")
	case opts.MaxEventsPerPipeline < 0:
		return nil, fmt.Errorf("open audit log: max events per pipeline is %d, want 0 (default) or more", opts.MaxEventsPerPipeline)
	case opts.MaxAge < 0:
		return nil, fmt.Errorf("open audit log: max age is %s, want 0 (keep) or more", opts.MaxAge)
	case opts.SweepInterval < 0:
		return nil, fmt.Errorf("open audit log: sweep interval is %s, want 0 (default) or more", opts.SweepInterval)
	}
	maxEvents := opts.MaxEventsPerPipeline
	if maxEvents == 0 {
		maxEvents = DefaultMaxEventsPerPipeline
	}
	l := &Log{
		db:          db,
		w:           w,
		maxEvents:   uint64(maxEvents),
		trimSlack:   uint64(min(max(maxEvents/100, 1), 1000)),
		maxAge:      opts.MaxAge,
		sweepEvery:  opts.SweepInterval,
		now:         opts.Now,
		log:         opts.Logger,
		beforeWrite: opts.BeforeWrite,
		pipelines:   make(map[string]*pipelineLog),
	}
	if l.sweepEvery == 0 {
		l.sweepEvery = DefaultSweepInterval
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = zap.NewNop()
	}
	l.log = l.log.Named("auditlog")
	if err := l.load(ctx); err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	l.life, l.cancel = context.WithCancel(context.Background())
	l.qprogress, l.qwake = make(chan struct{}), make(chan struct{}, 1)
	l.freeChunk = make([]*eventChunk, 0, 4)
	return l, nil
}

// start starts the retention and the writer goroutines.
func (l *Log) start() {
	l.wg.Add(1)
	go l.runSweeper()
	l.qdone = make(chan struct{})
	go l.runWriter()
}

// load finds every pipeline in the store and its first and last sequence:
// a forward seek finds the next pipeline's first key, a reverse seek its
// last, and the next forward seek starts after its range.
func (l *Log) load(ctx context.Context) error {
	all := []byte(store.PrefixAuditLog)
	cursor := all
	for {
		var key []byte
		err := l.db.ScanFrom(ctx, all, cursor, func(k, _ []byte) error {
			key = bytes.Clone(k)
			return errStop
		})
		if err != nil && err != errStop {
			return err
		}
		if key == nil {
			return nil
		}
		escID, first, ok := parseKey(key)
		id, idOK := unescapeID(escID)
		if !ok || !idOK {
			l.log.Warn("skipping an entry under the audit log prefix that is not an audit event", zap.String("key", string(key)))
			cursor = append(key, 0)
			continue
		}
		p := newPipelineLog(id)
		last, err := l.lastStored(ctx, p)
		if err != nil {
			return err
		}
		p.last, p.oldest = last, first
		p.published.Store(last)
		l.pipelines[id] = p
		cursor = prefixEnd(p.prefix)
	}
}

// lastStored returns the highest sequence stored for p (0 for none), from
// the key alone: a sequence whose value is corrupt was still handed out.
func (l *Log) lastStored(ctx context.Context, p *pipelineLog) (uint64, error) {
	var last uint64
	err := l.db.ScanReverse(ctx, p.prefix, nil, func(k, _ []byte) error {
		escID, seq, ok := parseKey(k)
		if !ok || escID != p.escID {
			l.log.Warn("skipping an entry under the audit log prefix that is not an audit event", zap.String("key", string(k)))
			return nil
		}
		last = seq
		return errStop
	})
	if err != nil && err != errStop {
		return 0, err
	}
	return last, nil
}

// prefixEnd is the first key after every key starting with prefix, which
// ends in '/' here, so it always exists.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	end[len(end)-1]++
	return end
}

// pipeline returns id's state, creating it if create is set; nil, nil for
// an unknown id without create.
func (l *Log) pipeline(id string, create bool) (*pipelineLog, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	p := l.pipelines[id]
	if p == nil && create {
		p = newPipelineLog(id)
		l.pipelines[id] = p
	}
	return p, nil
}

// Append stores e as the pipeline's next event and returns it with its
// Sequence and Time set, once it is durable. Concurrent appends share
// syncs; appends to one pipeline get sequences in the order they reach
// Append.
//
// A failed write is not retried and its sequence is skipped: List and
// Watch never show it, and later appends go on after it. (Only a restart
// may hand it out again, if no later write was stored: nobody saw it.) A
// cancelled ctx stops an append only before its write is queued.
func (l *Log) Append(ctx context.Context, e Event) (Event, error) {
	q, err := l.queue(ctx, e)
	if err != nil {
		return Event{}, err
	}
	return l.finish(q)
}

// validate checks what every appended event needs.
func validate(e Event) error {
	switch {
	case e.PipelineID == "":
		return errors.New("append audit event: pipeline id is empty")
	case e.Kind == "":
		return fmt.Errorf("append audit event of pipeline %s: kind is empty", e.PipelineID)
	}
	return nil
}

// queuedEvent is an event whose write is queued: numbered, encoded and
// handed to the group writer.
type queuedEvent struct {
	p    *pipelineLog
	e    Event
	wait func() error
}

// queue numbers e, encodes it and queues its write without waiting.
func (l *Log) queue(ctx context.Context, e Event) (queuedEvent, error) {
	if err := validate(e); err != nil {
		return queuedEvent{}, err
	}
	if err := ctx.Err(); err != nil {
		return queuedEvent{}, err
	}
	p, err := l.pipeline(e.PipelineID, true)
	if err != nil {
		return queuedEvent{}, err
	}
	if !e.NextAttemptAt.IsZero() {
		e.NextAttemptAt = e.NextAttemptAt.UTC()
	}

	// Under p.mu: number, encode and queue, so that queue order is
	// sequence order. The sync happens outside, shared with whoever
	// queues meanwhile.
	p.mu.Lock()
	e.Sequence = p.last + 1
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	e.Time = e.Time.UTC() // also drops the monotonic reading, as a read would
	value, err := encodeEvent(e)
	if err != nil {
		p.mu.Unlock()
		return queuedEvent{}, fmt.Errorf("append %s event of pipeline %s: %w", e.Kind, e.PipelineID, err)
	}
	wait, err := l.w.SetAsync(ctx, eventKey(p.prefix, e.Sequence), value)
	if err != nil {
		p.mu.Unlock()
		return queuedEvent{}, fmt.Errorf("append %s event of pipeline %s: %w", e.Kind, e.PipelineID, err)
	}
	p.last = e.Sequence
	p.mu.Unlock()
	return queuedEvent{p: p, e: e, wait: wait}, nil
}

// finish waits for a queued write, publishes the event and applies the
// count limit.
func (l *Log) finish(q queuedEvent) (Event, error) {
	err := q.wait()
	l.settle(q.p, q.e, err == nil)
	if err != nil {
		return Event{}, fmt.Errorf("append %s event %d of pipeline %s: %w", q.e.Kind, q.e.Sequence, q.e.PipelineID, err)
	}
	l.trimCount(q.p, l.trimSlack)
	return q.e, nil
}

// Enqueue hands e over to be appended and returns at once: the Log's
// writer goroutine numbers and writes it, in the order of Enqueue calls,
// sharing syncs with everything queued meanwhile. It is how a caller that
// must not wait for the disk (a pipeline's supervisor, whose restarts keep
// a schedule) records events. The event is durable, and visible to List
// and Watch, once Flush returns. A write that fails is logged. Enqueue
// fails only for an invalid event or a closed Log.
//
// The queue is not bounded: what fills it is pipeline transitions, a
// handful per pipeline per restart, and the writer drains it as fast as
// the store syncs.
func (l *Log) Enqueue(e Event) error {
	if err := validate(e); err != nil {
		return err
	}
	l.qmu.Lock()
	defer l.qmu.Unlock()
	if l.qclosed {
		return ErrClosed
	}
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	if n := len(l.queued); n == 0 || l.queued[n-1].n == len(l.queued[n-1].events) {
		var c *eventChunk
		if f := len(l.freeChunk); f > 0 {
			c, l.freeChunk = l.freeChunk[f-1], l.freeChunk[:f-1]
		} else {
			c = new(eventChunk)
		}
		l.queued = append(l.queued, c)
	}
	c := l.queued[len(l.queued)-1]
	c.events[c.n] = e
	c.n++
	l.enqueued++
	select {
	case l.qwake <- struct{}{}:
	default:
	}
	return nil
}

// Flush returns once every event handed to Enqueue before it is written
// (or its write failed, which the writer logged) and published.
func (l *Log) Flush(ctx context.Context) error {
	l.qmu.Lock()
	target := l.enqueued
	for l.written < target {
		progress := l.qprogress
		l.qmu.Unlock()
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		}
		l.qmu.Lock()
	}
	l.qmu.Unlock()
	return nil
}

// eventChunk holds events handed to Enqueue, and, once the writer queued
// their writes, what it needs to finish them. The queue grows by chunks so
// that a burst of events (a fault storm) is not copied around as a slice
// doubles, and chunks are reused.
type eventChunk struct {
	n      int
	events [256]Event
	logs   [256]*pipelineLog
	waits  [256]func() error
}

// reset empties c for reuse, clearing only the entries used: a round of
// one event must not pay for zeroing 256.
func (c *eventChunk) reset() {
	clear(c.events[:c.n])
	clear(c.logs[:c.n])
	clear(c.waits[:c.n])
	c.n = 0
}

// logWriteFailure reports an event handed to Enqueue that could not be
// written; nobody waits for it, so the log is where it shows.
func (l *Log) logWriteFailure(e Event, err error) {
	l.log.Error("could not write an audit event", zap.String("pipeline_id", e.PipelineID),
		zap.String("event", string(e.Kind)), zap.Error(err))
}

// runWriter writes the events handed to Enqueue: it takes all that are
// queued, queues their writes (which then share group commits), waits for
// them and publishes them, and starts over. On Close it writes what is
// left and returns.
func (l *Log) runWriter() {
	defer close(l.qdone)
	var chunks []*eventChunk
	for {
		l.qmu.Lock()
		for len(l.queued) == 0 {
			if l.qclosed {
				l.qmu.Unlock()
				return
			}
			l.qmu.Unlock()
			<-l.qwake
			l.qmu.Lock()
		}
		chunks, l.queued = l.queued, chunks[:0]
		l.qmu.Unlock()

		if l.beforeWrite != nil {
			if err := l.beforeWrite(context.Background()); err != nil {
				// The events are still worth having; the failure is the
				// state store's to report.
				l.log.Warn("writing audit events although what had to be written before them failed", zap.Error(err))
			}
		}
		written := 0
		for _, c := range chunks {
			for i := range c.n {
				q, err := l.queue(context.Background(), c.events[i])
				if err != nil {
					l.logWriteFailure(c.events[i], err)
					continue
				}
				c.events[i], c.logs[i], c.waits[i] = q.e, q.p, q.wait
			}
		}
		for _, c := range chunks {
			for i := range c.n {
				if c.waits[i] == nil {
					continue
				}
				if _, err := l.finish(queuedEvent{p: c.logs[i], e: c.events[i], wait: c.waits[i]}); err != nil {
					l.logWriteFailure(c.events[i], err)
				}
			}
			written += c.n
			c.reset()
		}

		l.qmu.Lock()
		// A few chunks are kept for the next round; a storm's worth is
		// left to the garbage collector.
		for _, c := range chunks {
			if len(l.freeChunk) == cap(l.freeChunk) {
				break
			}
			l.freeChunk = append(l.freeChunk, c)
		}
		clear(chunks)
		l.written += uint64(written)
		close(l.qprogress)
		l.qprogress = make(chan struct{})
		l.qmu.Unlock()
	}
}

// settle records that the write of e finished (stored or not) and
// publishes every event that is now next in line.
func (l *Log) settle(p *pipelineLog, e Event, stored bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	published := p.published.Load()
	if e.Sequence != published+1 {
		p.settled[e.Sequence] = settledEvent{e: e, stored: stored}
		return
	}
	for {
		if stored {
			p.publish(e)
		}
		published++
		s, ok := p.settled[published+1]
		if !ok {
			break
		}
		delete(p.settled, published+1)
		e, stored = s.e, s.stored
	}
	p.published.Store(published)
}

// publish hands e to every watcher that wants it, without blocking: a
// watcher whose buffer is full is dropped. Called under p.mu.
func (p *pipelineLog) publish(e Event) {
	for w := range p.watchers {
		if !w.wants(e.Kind) {
			continue
		}
		if !w.live.push(e) {
			delete(p.watchers, w)
			w.dropErr = fmt.Errorf("%w: more than %d events of pipeline %s were not received in time; watch again after the last sequence received",
				ErrWatcherTooSlow, WatchBuffer, p.id)
			w.live.close()
		}
	}
}

// LastSequence returns the sequence of the newest event of the pipeline
// that List and Watch can see, 0 when it has none.
func (l *Log) LastSequence(pipelineID string) uint64 {
	p, err := l.pipeline(pipelineID, false)
	if p == nil || err != nil {
		return 0
	}
	return p.published.Load()
}

// Close ends the retention goroutine and every watcher (their Err is then
// ErrClosed) and waits for them. Appends still in flight complete, and
// events handed to Enqueue are written first. Later
// calls to Append, List and Watch return ErrClosed. Safe to call more than
// once.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		// Events already handed to Enqueue are written first.
		l.qmu.Lock()
		l.qclosed = true
		l.qmu.Unlock()
		select {
		case l.qwake <- struct{}{}:
		default:
		}
		if l.qdone != nil {
			<-l.qdone
		}
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.cancel()
		l.wg.Wait()
	})
	return nil
}
