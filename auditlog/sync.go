package auditlog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Sync takes up the events of a pipeline that another process sharing the
// store appended: the stored ones beyond what this Log published go to
// this Log's watchers in sequence order, as if appended here, and the
// pipeline's next Append or Record continues after the highest stored
// sequence. It returns how many events it published. A pipeline this Log
// has never seen is taken up from its first stored event.
//
// It does nothing (0, nil) while this Log has writes of the pipeline in
// flight: this process is then the pipeline's writer, and its own events
// reach its watchers through Append and Record. Sync is safe to call at
// any time, also concurrently with itself: no watcher gets an event twice,
// and the sequence never moves down. Events that retention removed before
// Sync read them are not published.
func (l *Log) Sync(ctx context.Context, pipelineID string) (int, error) {
	return l.sync(ctx, pipelineID, true)
}

// CatchUp takes up another process's events of a pipeline as Sync does,
// but as history rather than news: they reach the pipeline's own watchers
// (which replay its history anyway) and not the watchers of every
// pipeline, which follow only what happens from their start. A pipeline
// without watchers of its own is moved to its last stored sequence with
// one read of the store, however far behind this Log was.
func (l *Log) CatchUp(ctx context.Context, pipelineID string) error {
	if pipelineID == "" {
		return errors.New("catch up audit events: pipeline id is empty")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := l.pipeline(pipelineID, false)
	if err != nil {
		return err
	}
	keys := p
	if keys == nil {
		keys = newPipelineLog(pipelineID, nil)
	}
	last, err := l.lastStored(ctx, keys)
	if err != nil {
		return fmt.Errorf("catch up audit events of pipeline %s: %w", pipelineID, err)
	}
	if last == 0 {
		return nil // no events: nothing to take up
	}
	var first uint64
	if p == nil {
		if first, err = l.firstStored(ctx, keys); err != nil {
			return fmt.Errorf("catch up audit events of pipeline %s: %w", pipelineID, err)
		}
		if p, err = l.pipeline(pipelineID, true); err != nil {
			return err
		}
	}
	if !p.skipTo(last, first) {
		// It has watchers of its own now: they get the events in order.
		_, err := l.sync(ctx, pipelineID, false)
		return err
	}
	l.trimLater(p)
	return nil
}

// skipTo moves p to last without publishing, unless p has watchers of its
// own (then it returns false) or writes in flight (then this process
// writes the pipeline and publishes its events itself). first is the
// lowest stored sequence, for a p that held no event.
func (p *pipelineLog) skipTo(last, first uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.watchers) > 0 {
		return false
	}
	published := p.published.Load()
	if p.last != published || last <= published {
		return true
	}
	if published < p.oldest && first > 0 {
		p.oldest = first
		p.oldestAt = time.Time{} // another instance's events, of unknown time
	}
	p.last = last
	p.published.Store(last)
	return true
}

func (l *Log) sync(ctx context.Context, pipelineID string, news bool) (int, error) {
	if pipelineID == "" {
		return 0, errors.New("sync audit events: pipeline id is empty")
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	p, err := l.pipeline(pipelineID, false)
	if err != nil {
		return 0, err
	}
	// An unknown pipeline is registered only once it shows events, so that
	// a Sync of a pipeline without any does not add it to PipelineIDs;
	// until then, a fresh state serves for its keys.
	keys := p
	if keys == nil {
		keys = newPipelineLog(pipelineID, nil)
	}

	// The store is read a page at a time without p.mu, so that appends and
	// watchers of the pipeline do not wait for it; each page is published
	// under p.mu, from where the Log stands then.
	published := 0
	page := make([]Event, 0, replayPage)
	for {
		from := uint64(1)
		if p != nil {
			var ok bool
			if from, ok = p.syncFrom(); !ok {
				break
			}
		}
		page = page[:0]
		seen, err := l.scan(ctx, keys, from, math.MaxUint64, false, func(e Event) bool {
			page = append(page, e)
			return len(page) < replayPage
		})
		if err != nil {
			return published, fmt.Errorf("sync audit events of pipeline %s: %w", pipelineID, err)
		}
		if seen == 0 {
			break // nothing stored beyond from
		}
		if p == nil {
			if p, err = l.pipeline(pipelineID, true); err != nil {
				return published, err
			}
		}
		n, ok := p.adopt(page, seen, news)
		published += n
		if !ok || len(page) < replayPage {
			break // writes in flight, or the scan reached the end
		}
	}
	if p != nil {
		// What was taken up may put the pipeline over its limit.
		l.trimLater(p)
	}
	return published, nil
}

// syncFrom returns the first sequence Sync must read for p; false when p
// has writes in flight.
func (p *pipelineLog) syncFrom() (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	published := p.published.Load()
	return published + 1, p.last == published
}

// adopt publishes the events of page above what p published, in order (to
// the watchers of every pipeline too when they are news), and
// moves p's last and published up to seen, the highest sequence stored
// (some of page may have been published meanwhile by another Sync, and
// seen may be an entry that did not decode). It returns how many events it
// published; false, and nothing done, when p has writes in flight: their
// sequences were handed out here, and the settling of them will publish.
func (p *pipelineLog) adopt(page []Event, seen uint64, news bool) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	published := p.published.Load()
	if p.last != published {
		return 0, false
	}
	if seen <= published {
		return 0, true
	}
	n := 0
	for _, e := range page {
		if e.Sequence <= published {
			continue
		}
		if n == 0 && published < p.oldest {
			// The log held no event: it now starts here rather than at 1,
			// which would make the count limit see events that are not
			// there.
			p.oldest = e.Sequence
			p.oldestAt = e.Time
		}
		if news {
			p.publish(e)
		} else {
			p.publishOwn(e)
		}
		n++
	}
	p.last = seen
	p.published.Store(seen)
	return n, true
}
