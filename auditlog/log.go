package auditlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// Owns reports whether this process runs the pipeline, when several
	// processes share one store: retention then deletes only the events
	// of pipelines it owns, as each owner trims its own (and the store
	// refuses this process's writes for the others anyway). nil owns
	// every pipeline. It is called from the retention goroutines, so it
	// must be safe for concurrent use, and quick.
	Owns func(pipelineID string) bool
	// With returns writes to commit together with each event (the
	// outbox entries of the notifications an event causes, pkg/notify),
	// so that the event and what it causes are durable together. It is
	// called once per event, numbered and timed, under the pipeline's
	// lock: it must be quick and must not call the Log. nil adds nothing.
	With func(Event) []store.Op
}

// Log is the audit log of every pipeline. Its methods are safe for
// concurrent use. It owns the retention goroutine, one per retention pass
// started after a write, and one per open Watcher; Close ends them all.
type Log struct {
	db         store.Store
	w          *store.Batcher
	maxEvents  uint64
	trimSlack  uint64
	maxAge     time.Duration
	sweepEvery time.Duration
	now        func() time.Time
	log        *zap.Logger
	owns       func(pipelineID string) bool
	with       func(Event) []store.Op

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
	// every holds the watchers of all pipelines (WatchEvery); each
	// pipelineLog of pipelines publishes to it too.
	every *watcherSet

	// held queues the recorded writes the store refused while it refuses
	// writes (held.go); tickets orders them.
	held    holdQueue
	tickets atomic.Uint64
	// failed counts the events that could not be written and are not in
	// the log (WriteFigures).
	failed atomic.Uint64
	// after is the clock of the held writes' retries; tests replace it.
	after func(time.Duration) <-chan time.Time

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
	// every is the Log's watchers of all pipelines; nil for a pipelineLog
	// that only names keys.
	every *watcherSet
	// maintaining is true while a retention pass deletes this pipeline's
	// old events; one at a time.
	maintaining bool
	// oldestAt is the time of the oldest event stored, as far as known
	// (zero: unknown). Events are stamped in sequence order, so no stored
	// event is older: the age limit skips a pipeline whose oldest event is
	// younger than the cutoff without reading the store, where a sweep
	// across ten thousand pipelines in a fault storm would otherwise seek
	// into it ten thousand times.
	oldestAt time.Time
}

type settledEvent struct {
	e      Event
	stored bool
}

// newPipelineLog is the state of pipeline id; every is the Log's
// watchers of all pipelines, nil for a state that only names keys.
func newPipelineLog(id string, every *watcherSet) *pipelineLog {
	return &pipelineLog{
		every:    every,
		id:       id,
		escID:    escapeID(id),
		prefix:   pipelinePrefix(id),
		settled:  make(map[uint64]settledEvent),
		oldest:   1,
		watchers: make(map[*Watcher]struct{}),
	}
}

// Open reads where every pipeline's log ends (two seeks per pipeline) and
// starts the retention goroutine. Events are written through w, which
// must write to db; the Log closes neither.
func Open(ctx context.Context, db store.Store, w *store.Batcher, opts Options) (*Log, error) {
	l, err := open(ctx, db, w, opts)
	if err != nil {
		return nil, err
	}
	l.start()
	return l, nil
}

// open is Open without starting the retention goroutine.
func open(ctx context.Context, db store.Store, w *store.Batcher, opts Options) (*Log, error) {
	switch {
	case db == nil || w == nil:
		return nil, errors.New("open audit log: store and writer are required")
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
		db:         db,
		w:          w,
		maxEvents:  uint64(maxEvents),
		trimSlack:  uint64(min(max(maxEvents/100, 1), 1000)),
		maxAge:     opts.MaxAge,
		sweepEvery: opts.SweepInterval,
		now:        opts.Now,
		log:        opts.Logger,
		owns:       opts.Owns,
		with:       opts.With,
		pipelines:  make(map[string]*pipelineLog),
		every:      &watcherSet{watchers: make(map[*Watcher]struct{})},
		held:       holdQueue{newer: make(map[string]uint64), room: make(chan struct{}), max: DefaultMaxHeld},
		after:      time.After,
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
	return l, nil
}

// start starts the retention goroutine.
func (l *Log) start() {
	l.wg.Add(1)
	go l.runSweeper()
}

// load finds every pipeline in the store and its first and last sequence:
// a forward seek finds the next pipeline's first key, a reverse seek its
// last, and the next forward seek starts after its range.
func (l *Log) load(ctx context.Context) error {
	all := []byte(store.PrefixAuditLog)
	cursor := all
	for {
		var key, value []byte
		err := l.db.ScanFrom(ctx, all, cursor, func(k, v []byte) error {
			key, value = bytes.Clone(k), bytes.Clone(v)
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
		p := newPipelineLog(id, l.every)
		last, err := l.lastStored(ctx, p)
		if err != nil {
			return err
		}
		p.last, p.oldest, p.oldestAt = last, first, timeOf(value)
		p.published.Store(last)
		l.pipelines[id] = p
		cursor = prefixEnd(p.prefix)
	}
}

// timeOf is the time of a stored event, zero when it cannot be read
// (retention then reads the event itself when it needs to).
func timeOf(value []byte) time.Time {
	var r struct {
		Time time.Time `json:"time"`
	}
	if json.Unmarshal(value, &r) != nil {
		return time.Time{}
	}
	return r.Time.UTC()
}

// lastStored returns the highest sequence stored for p (0 for none), from
// the key alone: a sequence whose value is corrupt was still handed out.
func (l *Log) lastStored(ctx context.Context, p *pipelineLog) (uint64, error) {
	return l.storedEnd(ctx, p, l.db.ScanReverse)
}

// firstStored returns the lowest sequence stored for p (0 for none).
func (l *Log) firstStored(ctx context.Context, p *pipelineLog) (uint64, error) {
	return l.storedEnd(ctx, p, l.db.ScanFrom)
}

// storedEnd returns the sequence of the first event key scan visits in
// p's range.
func (l *Log) storedEnd(ctx context.Context, p *pipelineLog, scan func(context.Context, []byte, []byte, func(k, v []byte) error) error) (uint64, error) {
	var seq uint64
	err := scan(ctx, p.prefix, nil, func(k, _ []byte) error {
		escID, s, ok := parseKey(k)
		if !ok || escID != p.escID {
			l.log.Warn("skipping an entry under the audit log prefix that is not an audit event", zap.String("key", string(k)))
			return nil
		}
		seq = s
		return errStop
	})
	if err != nil && err != errStop {
		return 0, err
	}
	return seq, nil
}

// prefixEnd is the first key after every key starting with prefix, which
// ends in '/' here, so it always exists.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	end[len(end)-1]++
	return end
}

// PipelineIDs returns the ids of every pipeline with events, deleted ones
// included, sorted.
func (l *Log) PipelineIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.pipelines))
	for id := range l.pipelines {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
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
		p = newPipelineLog(id, l.every)
		l.pipelines[id] = p
	}
	return p, nil
}

// Append stores e as the pipeline's next event and returns it with its
// Sequence and Time set, once it is durable. Concurrent appends share
// syncs; appends to one pipeline get sequences in the order they reach
// Append. extra are written in the same commit as the event (the state
// of the pipeline the event records, say).
//
// A failed write is not retried and its sequence is skipped: List and
// Watch never show it, and later appends go on after it. (Only a restart
// may hand it out again, if no later write was stored: nobody saw it.) A
// cancelled ctx stops an append only before its write is submitted.
func (l *Log) Append(ctx context.Context, e Event, extra ...store.Op) (Event, error) {
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	p, pending, err := l.submit(&e, extra, false)
	if err != nil {
		return Event{}, err
	}
	if err := pending.Wait(context.WithoutCancel(ctx)); err != nil {
		return Event{}, fmt.Errorf("append %s event %d of pipeline %s: %w", e.Kind, e.Sequence, e.PipelineID, err)
	}
	l.trimCount(p, l.trimSlack)
	return e, nil
}

// Record is Append without waiting: the event (and extra, in the same
// commit) is durable, and visible to List and Watch, moments later, once
// the store's writer has committed it; Flush waits for that. It is how a
// caller that must not wait for the disk (a pipeline's supervisor, whose
// restarts keep a schedule) records events. While the store refuses writes
// (no space, no file descriptors) the write waits in memory and is written
// when the store takes writes again (see held.go); Record blocks only when
// DefaultMaxHeld writes wait already. Any other failure is logged.
func (l *Log) Record(e Event, extra ...store.Op) error {
	if l.held.count.Load() >= int64(l.held.max) {
		if err := l.waitRoom(); err != nil {
			return err
		}
	}
	_, _, err := l.submit(&e, extra, true)
	return err
}

// Flush returns once every event recorded before it is durable (or its
// write failed, which was logged) and published.
func (l *Log) Flush(ctx context.Context) error {
	return l.w.Flush(ctx)
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

// submit numbers e (in place), encodes it and submits its write with
// extra. Once the write is committed, the writer's goroutine settles the
// event (publishes it in sequence order). recorded says nobody waits for
// the write: its failure is logged, and a retention pass the pipeline then
// needs is started from there (Append runs it itself). e is a pointer, and
// nothing returns an Event: a supervisor records its events through here,
// deep in its goroutine, and every copy of an event costs stack there.
func (l *Log) submit(e *Event, extra []store.Op, recorded bool) (*pipelineLog, store.Pending, error) {
	if err := validate(*e); err != nil {
		return nil, store.Pending{}, err
	}
	p, err := l.pipeline(e.PipelineID, true)
	if err != nil {
		return nil, store.Pending{}, err
	}
	if !e.NextAttemptAt.IsZero() {
		e.NextAttemptAt = e.NextAttemptAt.UTC()
	}

	// Under p.mu: number and submit, so that submit order (which is commit
	// order) is sequence order. The sync happens outside, shared
	// with whoever submits meanwhile.
	p.mu.Lock()
	defer p.mu.Unlock()
	e.Sequence = p.last + 1
	if e.Time.IsZero() {
		e.Time = l.now()
	}
	e.Time = e.Time.UTC() // also drops the monotonic reading, as a read would
	if p.last < p.oldest && p.oldestAt.IsZero() {
		// The pipeline's first event: the oldest there is.
		p.oldestAt = e.Time
	}
	// event is the copy the writer's goroutine encodes and settles; nothing
	// changes it any more.
	event := *e
	op := store.Op{Key: eventKey(p.prefix, e.Sequence)}
	if recorded {
		// Encoded by the writer, off the caller's goroutine (a supervisor
		// keeps its schedule).
		op.Encode = func(dst []byte) ([]byte, error) { return appendEncodedEvent(dst, event) }
	} else {
		// The caller waits for the commit anyway: encoding here, in
		// parallel with the commit under way, keeps it off the writer's
		// goroutine, whose time every caller of the next round waits for.
		v, err := encodeEvent(event)
		if err != nil {
			return nil, store.Pending{}, fmt.Errorf("append %s event of pipeline %s: %w", e.Kind, e.PipelineID, err)
		}
		op.Value = v
	}
	var caused []store.Op
	if l.with != nil {
		caused = l.with(event)
	}
	ops := make([]store.Op, 0, 1+len(extra)+len(caused))
	ops = append(append(append(ops, op), extra...), caused...)
	// Fenced now, under the lease the pipeline is recorded under: a write
	// held and tried again later lands under that lease or not at all.
	ops = l.w.Fence(ops)
	ticket := l.tickets.Add(1)
	if recorded && l.queueIfHolding(heldWrite{p: p, event: event, ops: ops, ticket: ticket}) {
		p.last = e.Sequence
		return p, store.Pending{}, nil
	}
	pending, err := l.w.Submit(store.WriteOptions{Done: func(err error) {
		if recorded && err != nil && holdable(err) {
			l.holdWrite(heldWrite{p: p, event: event, ops: ops, ticket: ticket})
			return
		}
		if err == nil {
			l.storedWhileHolding(ticket, ops)
		}
		l.settle(p, event, err == nil)
		if err != nil && !errors.Is(err, store.ErrFenced) {
			// Append's caller hears of it too; the metric counts every
			// event the log lacks.
			l.failed.Add(1)
		}
		switch {
		case !recorded:
		case errors.Is(err, store.ErrFenced):
			// The pipeline moved to another instance, which writes its
			// events now: this one's late events are refused on purpose.
			l.log.Info("audit event of a pipeline another instance runs now not written", zap.String("pipeline_id", event.PipelineID),
				zap.String("event", string(event.Kind)), zap.Uint64("sequence", event.Sequence))
		case err != nil:
			l.log.Error("could not write an audit event", zap.String("pipeline_id", event.PipelineID),
				zap.String("event", string(event.Kind)), zap.Uint64("sequence", event.Sequence), zap.Error(err))
		default:
			l.trimLater(p)
		}
	}}, ops...)
	if err != nil {
		return nil, store.Pending{}, fmt.Errorf("append %s event of pipeline %s: %w", e.Kind, e.PipelineID, err)
	}
	p.last = e.Sequence
	return p, pending, nil
}

// WriteFigures says how the log's writes fare, for the metrics: held is
// how many recorded events wait in memory while the store refuses writes
// (they are written once it takes writes again), failed how many events
// since the Log opened could not be written at all and are not in the log.
// An event of a pipeline another instance of the cluster runs now, which
// that instance writes, is neither.
func (l *Log) WriteFigures() (held int, failed uint64) {
	return int(l.held.count.Load()), l.failed.Load()
}

// trimLater starts a retention pass for p on a goroutine of its own when p
// holds more events than its limit allows: the writer's goroutine, which
// settles events, must not wait for the deletes.
func (l *Log) trimLater(p *pipelineLog) {
	p.mu.Lock()
	published, oldest := p.published.Load(), p.oldest
	over := published >= oldest && published-oldest+1 > l.maxEvents+l.trimSlack && !p.maintaining
	p.mu.Unlock()
	if !over {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.wg.Go(func() { l.trimCount(p, l.trimSlack) })
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
// watcher whose buffer is full is dropped. Called under p.mu, so that the
// watchers of all pipelines get each pipeline's events in sequence order.
func (p *pipelineLog) publish(e Event) {
	p.publishOwn(e)
	if p.every != nil {
		p.every.publish(e)
	}
}

// publishOwn hands e to the pipeline's own watchers only.
func (p *pipelineLog) publishOwn(e Event) {
	offer(p.watchers, e, func() error {
		return fmt.Errorf("%w: more than %d events of pipeline %s were not received in time; watch again after the last sequence received",
			ErrWatcherTooSlow, WatchBuffer, p.id)
	})
}

// offer pushes e to the watchers that want it, without blocking, and
// drops with tooSlow() a watcher whose buffer is full.
func offer(watchers map[*Watcher]struct{}, e Event, tooSlow func() error) {
	for w := range watchers {
		if !w.wants(e.Kind) {
			continue
		}
		if !w.live.push(e) {
			delete(watchers, w)
			w.dropErr = tooSlow()
			w.live.close()
		}
	}
}

// watcherSet is the watchers of every pipeline. Its mu is taken under a
// pipelineLog's mu, never the other way round.
type watcherSet struct {
	mu       sync.Mutex
	watchers map[*Watcher]struct{}
}

func (s *watcherSet) publish(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	offer(s.watchers, e, func() error {
		return fmt.Errorf("%w: more than %d events were not received in time; watch again", ErrWatcherTooSlow, WatchBuffer)
	})
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
// ErrClosed) and waits for them. Appends and recorded events still in flight
// complete (the store's writer commits them). Later calls to Append,
// Record, List and Watch return ErrClosed. Safe to call more than
// once.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		// What was recorded before is durable when Close returns, although
		// the writer outlives the Log.
		_ = l.w.Flush(context.Background())
		l.cancel()
		l.wg.Wait()
		l.closeHeld()
	})
	return nil
}
