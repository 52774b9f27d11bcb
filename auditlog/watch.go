package auditlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// WatchBuffer is how many live events a Watcher holds for its reader. A
// reader that falls further behind is dropped with ErrWatcherTooSlow. The
// buffer grows with the backlog: an idle watcher holds none.
const WatchBuffer = 1024

// replayPage is how many stored events a watcher reads per store scan, so
// that a slow reader never holds a read transaction open.
const replayPage = 256

// ErrWatcherTooSlow is the Err of a Watcher whose reader fell more than
// WatchBuffer events behind. The reader may watch again after the last
// sequence it received.
var ErrWatcherTooSlow = errors.New("audit log watcher fell too far behind")

// Watcher delivers a pipeline's events on C: first the stored ones after
// the sequence Watch was given, then each new one once it is durable, in
// sequence order, with no gap and no duplicate between the two.
type Watcher struct {
	// C receives the events. It is closed when the watch ends: its context
	// is done, the reader fell behind, or the Log was closed; Err says
	// which.
	C <-chan Event

	c     chan Event
	live  liveQueue // filled by publish under the pipeline's mu
	kinds []Kind
	// dropErr is set by publish before it closes live.
	dropErr error

	mu  sync.Mutex
	err error
}

// Err returns why C was closed: ErrWatcherTooSlow (wrapped), ErrClosed, the
// watch context's error, or a store error during the replay. It returns nil
// while C is open.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *Watcher) wants(k Kind) bool {
	return len(w.kinds) == 0 || slices.Contains(w.kinds, k)
}

func newWatcher(kinds []Kind) *Watcher {
	w := &Watcher{c: make(chan Event), live: newLiveQueue(), kinds: slices.Clone(kinds)}
	w.C = w.c
	return w
}

// Watch follows a pipeline's events of the given kinds (all when empty)
// with a sequence greater than afterSequence: the stored ones first, then
// the live ones. afterSequence beyond the end is fine (the watcher waits
// for that sequence to be passed); events removed by retention are not
// replayed. The watch ends when ctx is done, and is ended early if the
// reader falls more than WatchBuffer events behind or the Log is closed.
func (l *Log) Watch(ctx context.Context, pipelineID string, afterSequence uint64, kinds []Kind) (*Watcher, error) {
	if pipelineID == "" {
		return nil, errors.New("watch audit events: pipeline id is empty")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := newWatcher(kinds)
	p, err := l.admit(pipelineID)
	if err != nil {
		return nil, err
	}

	// Registered under p.mu: every event published from here on reaches
	// live; every one at or below upTo is stored already and comes from
	// the replay.
	p.mu.Lock()
	p.watchers[w] = struct{}{}
	upTo := p.published.Load()
	p.mu.Unlock()

	l.serve(ctx, w, func(wctx context.Context) error {
		sent, err := l.replay(wctx, p, w, afterSequence, upTo)
		if err != nil {
			return err
		}
		return forward(wctx, w, sent, true)
	}, func() {
		p.mu.Lock()
		delete(p.watchers, w)
		p.mu.Unlock()
	})
	return w, nil
}

// admit counts a new watcher in l.wg, unless the Log is closed; given a
// pipeline id, it also returns that pipeline's state, created if new.
func (l *Log) admit(pipelineID string) (*pipelineLog, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	var p *pipelineLog
	if pipelineID != "" {
		if p = l.pipelines[pipelineID]; p == nil {
			p = newPipelineLog(pipelineID, l.every)
			l.pipelines[pipelineID] = p
		}
	}
	l.wg.Add(1)
	return p, nil
}

// serve runs a registered watcher's goroutine, counted in l.wg: follow
// until ctx is done or the Log closes, then unregister and finish.
func (l *Log) serve(ctx context.Context, w *Watcher, follow func(context.Context) error, unregister func()) {
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.life, cancel)
	go func() {
		defer l.wg.Done()
		defer stop()
		defer cancel()
		err := follow(wctx)
		unregister()
		w.finish(ctx, l.life, err)
	}()
}

// replay hands the stored events in (after, upTo] to the reader and
// returns the sequence the live ones must pass. (The live part runs in
// forward, after replay's frames are gone: an idle watcher's goroutine
// keeps the stack its deepest call needed.)
func (l *Log) replay(ctx context.Context, p *pipelineLog, w *Watcher, after, upTo uint64) (uint64, error) {
	next := after + 1
	var page []Event
	for after < upTo && next <= upTo {
		page = page[:0]
		seen, err := l.scan(ctx, p, next, upTo, false, func(e Event) bool {
			if w.wants(e.Kind) {
				page = append(page, e)
			}
			return len(page) < replayPage
		})
		if err != nil {
			return 0, fmt.Errorf("replay audit events of pipeline %s: %w", p.id, err)
		}
		for _, e := range page {
			select {
			case w.c <- e:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		if len(page) < replayPage {
			break // the scan reached upTo
		}
		next = seen + 1
	}

	return max(after, upTo), nil
}

// forward hands the live events to the reader until ctx is done or
// publish drops the watcher, and returns why it ended. With ordered (the
// watcher of one pipeline), events at or below sent, which the replay
// gave already, are skipped.
func forward(ctx context.Context, w *Watcher, sent uint64, ordered bool) error {
	for {
		e, ok, closed := w.live.pop()
		if !ok {
			if closed {
				return w.dropErr
			}
			select {
			case <-w.live.ready:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if ordered {
			if e.Sequence <= sent {
				continue
			}
			sent = e.Sequence
		}
		select {
		case w.c <- e:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// WatchEvery follows the events of every pipeline, of the given kinds (all
// when empty), from now on: nothing stored is replayed, since sequences
// are per pipeline and there is no position in all of them to resume
// from. Each pipeline's events arrive in its sequence order, those of
// different pipelines interleaved as they became durable. A pipeline that
// appears later is followed too. The watch ends as Watch's does.
func (l *Log) WatchEvery(ctx context.Context, kinds []Kind) (*Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := newWatcher(kinds)
	if _, err := l.admit(""); err != nil {
		return nil, err
	}

	l.every.mu.Lock()
	l.every.watchers[w] = struct{}{}
	l.every.mu.Unlock()

	l.serve(ctx, w, func(wctx context.Context) error { return forward(wctx, w, 0, false) }, func() {
		l.every.mu.Lock()
		delete(l.every.watchers, w)
		l.every.mu.Unlock()
	})
	return w, nil
}

// finish records why the watch ended and closes C. A cancelled watch says
// whose cancel it was: the caller's context, or the Log's Close.
func (w *Watcher) finish(ctx, life context.Context, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		switch {
		case ctx.Err() != nil:
			err = ctx.Err()
		case life.Err() != nil:
			err = ErrClosed
		}
	}
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	close(w.c)
}

// liveQueue holds the live events a watcher's reader has not taken yet,
// up to WatchBuffer. A channel of that capacity would cost every watcher
// about 300 KB up front, idle or not; the queue grows with the backlog
// and gives the memory back once the reader catches up.
type liveQueue struct {
	// ready has room for one signal: an event was pushed or the queue was
	// closed since the reader last looked.
	ready chan struct{}

	mu     sync.Mutex
	events []Event // events[head:] are waiting
	head   int
	closed bool
}

// keepQueue is the capacity an emptied queue keeps for the next burst.
const keepQueue = 16

func newLiveQueue() liveQueue { return liveQueue{ready: make(chan struct{}, 1)} }

// push adds e without blocking; false when WatchBuffer events are waiting
// already (the caller drops the watcher) or the queue is closed.
func (q *liveQueue) push(e Event) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.events)-q.head >= WatchBuffer {
		return false
	}
	if len(q.events) == cap(q.events) && q.head > 0 {
		// Reuse the room the reader freed instead of growing.
		n := copy(q.events, q.events[q.head:])
		clear(q.events[n:])
		q.events, q.head = q.events[:n], 0
	}
	q.events = append(q.events, e)
	q.signal()
	return true
}

// close ends the queue; the reader gets what is waiting, then closed.
func (q *liveQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.signal()
}

func (q *liveQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop takes the oldest waiting event; ok is false when none is, and closed
// then says whether one will ever come.
func (q *liveQueue) pop() (e Event, ok, closed bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.events) {
		return Event{}, false, q.closed
	}
	e = q.events[q.head]
	q.events[q.head] = Event{}
	q.head++
	if q.head == len(q.events) {
		q.events, q.head = q.events[:0], 0
		if cap(q.events) > keepQueue {
			q.events = nil
		}
	}
	return e, true, false
}
