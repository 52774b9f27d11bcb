package auditlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// WatchBuffer is how many live events a Watcher holds for its reader. A
// reader that falls further behind is dropped with ErrWatcherTooSlow.
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
	live  chan Event // filled by publish under the pipeline's mu
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
	w := &Watcher{
		c:     make(chan Event),
		live:  make(chan Event, WatchBuffer),
		kinds: slices.Clone(kinds),
	}
	w.C = w.c

	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	p := l.pipelines[pipelineID]
	if p == nil {
		p = newPipelineLog(pipelineID)
		l.pipelines[pipelineID] = p
	}
	l.wg.Add(1)
	l.mu.Unlock()

	// Registered under p.mu: every event published from here on reaches
	// live; every one at or below upTo is stored already and comes from
	// the replay.
	p.mu.Lock()
	p.watchers[w] = struct{}{}
	upTo := p.published.Load()
	p.mu.Unlock()

	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.life, cancel)
	go func() {
		defer l.wg.Done()
		defer stop()
		defer cancel()
		err := l.follow(wctx, p, w, afterSequence, upTo)
		p.mu.Lock()
		delete(p.watchers, w)
		p.mu.Unlock()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			switch {
			case ctx.Err() != nil:
				err = ctx.Err()
			case l.life.Err() != nil:
				err = ErrClosed
			}
		}
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		close(w.c)
	}()
	return w, nil
}

// follow replays the stored events in (after, upTo], then forwards the live
// ones above both, until ctx is done or publish drops the watcher. It
// returns why it ended.
func (l *Log) follow(ctx context.Context, p *pipelineLog, w *Watcher, after, upTo uint64) error {
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
			return fmt.Errorf("replay audit events of pipeline %s: %w", p.id, err)
		}
		for _, e := range page {
			select {
			case w.c <- e:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if len(page) < replayPage {
			break // the scan reached upTo
		}
		next = seen + 1
	}

	sent := max(after, upTo)
	for {
		select {
		case e, ok := <-w.live:
			if !ok {
				return w.dropErr
			}
			if e.Sequence <= sent {
				continue
			}
			select {
			case w.c <- e:
				sent = e.Sequence
			case <-ctx.Done():
				return ctx.Err()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
